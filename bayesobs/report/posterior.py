"""What ``bayesobs fit --method posterior`` writes: tables, InferenceData files and figures.

The writer of :mod:`bayesobs.fits.posterior` (which computes and writes nothing
itself): :func:`write_outputs` runs :func:`bayesobs.fits.posterior.fit_posterior`
and writes its results with the posterior predictive check figures.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from ..fits.posterior import bcs_posterior, fit_posterior, ppc_table
from ..scores.bcs import BCS_ABLATIONS
from ..trials import CELL_KEYS
from ..trials import write_csv as _csv
from . import figures as F


@dataclass(frozen=True)
class PosteriorFiles:
    """``fit_posterior``'s sink: each fit's InferenceData written to ``folder``, its draws kept.

    Called on each fit as its batch finishes, in the worker process that
    sampled it (``runs_in_workers``: only the posterior draws travel back,
    not the pointwise log-likelihoods).  The file is
    ``<subject>__<task>__<modality>__<condition>__<variant>.nc`` (``/``
    becomes ``_``), written uncompressed: zlib took 45% of the writing's CPU
    time and saved 2.6% of the bytes (random float draws and
    log-likelihoods hardly compress).  It is written through the netCDF-C
    library (xarray's ``netcdf4`` engine), which took a fifth of the CPU
    time of the ``h5netcdf`` engine (about 20 ms instead of 110 ms a file,
    nearly all of it metadata); the file is the same netCDF-4 file, read
    back by ``arviz.from_netcdf`` to the same arrays and attributes.

    Parameters
    ----------
    folder : pathlib.Path
        An existing folder, written by the caller's command (which holds its
        lock while the workers write).
    keep : tuple of str, optional
        The variants whose posterior draws are returned (kept in the
        caller's memory); for any other the file's path is returned, to be
        read back with ``arviz.from_netcdf`` when needed.  Default: every
        variant's draws.
    """

    folder: Path
    keep: tuple[str, ...] | None = None
    runs_in_workers: ClassVar[bool] = True

    def __call__(self, key: tuple, idata):
        """Write ``idata`` as ``folder/<key>.nc``; return its posterior group alone, or the path."""
        import arviz as az  # start-up time: arviz loads only to write a posterior

        path = self.folder / ("__".join(map(str, key)).replace("/", "_") + ".nc")
        write_netcdf(path, idata)
        if self.keep is not None and key[-1] not in self.keep:
            return path
        return az.InferenceData(posterior=idata.posterior)


def _plain(var) -> bool:
    """Whether :func:`write_netcdf` writes ``var`` itself: no attributes or encoding, a plain dtype."""
    kind = var.dtype.kind
    if var.attrs or var.encoding or kind not in "fiubUO":
        return False
    return kind != "O" or all(isinstance(v, str) for v in var.values.ravel())


def write_netcdf(path: Path, idata) -> None:
    """``idata.to_netcdf(path, compress=False, engine="netcdf4")``, written in one pass.

    The file xarray writes, through the same netCDF-C library: one group per
    InferenceData group with its attributes, the dimensions in the order
    their variables name them, then the variables in the group's order,
    contiguous and uncompressed (floats with a ``NaN`` ``_FillValue``,
    booleans as ``int8`` with ``dtype = "bool"``, strings as variable-length
    strings), so ``arviz.from_netcdf`` reads back the same arrays, dtypes and
    attributes.  xarray opens the file once per group and encodes every
    variable through its general machinery: about three times the CPU time
    of this for the 7,830 small files of a whole-benchmark posterior fit.  A
    variable with attributes, an encoding or another dtype (none of
    ``fit_posterior``'s have them) sends the whole file to xarray.

    Parameters
    ----------
    path : pathlib.Path
        The file to write (replaced if it exists).
    idata : arviz.InferenceData
        The fit.
    """
    import netCDF4  # start-up time: netCDF-C loads only to write a posterior

    groups = [(g, idata[g]) for g in idata.groups()]
    if not all(_plain(v) for _, ds in groups for v in ds.variables.values()):
        idata.to_netcdf(path, compress=False, engine="netcdf4")
        return
    with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
        for name, ds in groups:
            group = nc.createGroup(name)
            group.setncatts(dict(ds.attrs))
            for var in ds.variables.values():
                for dim in var.dims:
                    if dim not in group.dimensions:
                        group.createDimension(dim, ds.sizes[dim])
            for key, var in ds.variables.items():
                values = var.values
                kind = values.dtype.kind
                if kind == "f":
                    nan = values.dtype.type(np.nan)
                    out = group.createVariable(key, values.dtype, var.dims, fill_value=nan)
                elif kind == "b":
                    out = group.createVariable(key, np.int8, var.dims, fill_value=False)
                    out.setncattr("dtype", "bool")
                    values = values.astype(np.int8)
                elif kind in "iu":
                    out = group.createVariable(key, values.dtype, var.dims, fill_value=False)
                else:  # text: numpy's fixed-width or Python strings, as variable-length strings
                    out = group.createVariable(key, str, var.dims, fill_value=False)
                    values = values.astype(object)
                out[...] = values


# What write_outputs keeps in memory of each fit: the static observer's draws (the
# posterior BCS reads them); every other fit is read back from its file when a figure needs it.
KEPT_VARIANTS = ("static",)


def kept_fit(kept):
    """A fit as :class:`PosteriorFiles` returned it: its draws, or its file read back.

    Parameters
    ----------
    kept : arviz.InferenceData or pathlib.Path
        What the sink returned for the fit (``fit_posterior``'s ``idatas`` value).

    Returns
    -------
    arviz.InferenceData
        ``kept`` itself, or the whole fit read from its ``.nc`` file.
    """
    if not isinstance(kept, Path):
        return kept
    import arviz as az  # start-up time: arviz loads only to read a posterior

    return az.from_netcdf(kept)


def write_outputs(
    trials: pd.DataFrame,
    fits: pd.DataFrame,
    out,
    variants=None,
    hierarchical=False,
    chains=4,
    warmup=500,
    draws=500,
    seed=0,
    progress=False,
    workers: int | None = None,
) -> tuple[pd.DataFrame, list[str]]:
    """Posterior fits written to a folder: what ``bayesobs fit --method posterior`` does.

    Writes ``posterior.csv`` (summaries and diagnostics), ``loo.csv`` (PSIS-LOO
    beside the MLE's AIC and ``delta_aic``), ``bcs_posterior.csv`` (P(w_prior
    rose) per BCS ablation), ``posterior/*.nc`` (ArviZ InferenceData) and
    posterior predictive check figures of the best variant by LOO
    (``figures/ppc_*.png``, at most 12).

    Parameters
    ----------
    trials : DataFrame
        Normalised trials.
    fits : DataFrame
        The maximum-likelihood ``fits.csv`` rows (for ``delta_aic``).
    out : path
        Output folder (created).
    variants, hierarchical, chains, warmup, draws, seed, progress, workers
        As :func:`fit_posterior` (``workers``: its processes; by default two
        on two cores for a whole benchmark).

    Returns
    -------
    loo : DataFrame
        The rows of ``loo.csv``.
    notes : list of str
        Failed diagnostics and high Pareto k, each with its threshold.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "posterior").mkdir(exist_ok=True)
    sink = PosteriorFiles(out / "posterior", keep=KEPT_VARIANTS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # arviz announces its refactor on import
        # failed diagnostics and high Pareto k come back as notes (returned to the caller)
        warnings.filterwarnings(
            "ignore", message=".*(sampler diagnostics failed|Pareto k)", category=RuntimeWarning
        )
        summary, loo, idatas, notes = fit_posterior(
            trials,
            variants=variants,
            hierarchical=hierarchical,
            chains=chains,
            warmup=warmup,
            draws=draws,
            seed=seed,
            progress=progress,
            workers=workers,
            sink=sink,
        )
    keys = ["task", "modality", "condition"] if hierarchical else list(CELL_KEYS)
    if not hierarchical and len(loo):
        loo = loo.merge(fits[[*keys, "variant", "aic"]], on=[*keys, "variant"], how="left")
        loo["delta_aic"] = loo["aic"] - loo.groupby(keys)["aic"].transform("min")
    _csv(summary, out / "posterior.csv")
    _csv(loo, out / "loo.csv")
    rows = []
    if not hierarchical:
        for subj, task, mod, cond, variant in idatas:
            if variant != "static" or cond not in BCS_ABLATIONS or BCS_ABLATIONS[cond] != mod:
                continue
            if (subj, task, mod, "base", "static") in idatas:
                p = bcs_posterior(idatas, (subj, task, mod, "base"), (subj, task, mod, cond))
                rows.append({"subject": subj, "task": task, "ablation": cond, "p_w_prior_rose": p})
    _csv(
        pd.DataFrame(rows, columns=["subject", "task", "ablation", "p_w_prior_rose"]),
        out / "bcs_posterior.csv",
    )
    if not hierarchical and len(loo):
        (out / "figures").mkdir(exist_ok=True)
        best = loo[loo["rank"] == 1]
        for r in best.head(12).itertuples(index=False):
            key = (r.subject, r.task, r.modality, r.condition)
            cell = trials[(trials[list(keys)] == list(key)).all(axis=1)]
            fig = F.posterior_predictive(
                ppc_table(cell, r.variant, kept_fit(idatas[(*key, r.variant)]), seed=seed),
                title=f"{'/'.join(map(str, key))} · {r.variant} (best by LOO)",
            )
            fig.savefig(
                out / "figures" / ("ppc_" + "__".join(map(str, key)).replace("/", "_") + ".png"),
                dpi=110,
            )
    return loo, notes
