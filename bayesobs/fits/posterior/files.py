"""Posterior files: several fits of one variant per netCDF file, along a ``cell`` dimension.

``posterior/<variant>__<first fit's key>.nc`` holds the fits of one variant that
finished together (a few cells of a sampled slice, or the groups of an unbatched
fit), written by ``arviz.InferenceData.to_netcdf``.  Every group has a ``cell``
coordinate (the fit's key joined by ``/``); the log-likelihood's ``y_dim_0`` is
padded with NaN to the longest fit's observations and the posterior's ``subject``
dimension is positional, with the labels in ``subject_label`` (``cell, subject``).
:func:`read_fit` gives one fit back as the InferenceData it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

# What write_outputs keeps in memory of each fit: the static observer's draws (the
# posterior BCS reads them); every other fit is read back from its file when a figure needs it.
KEPT_VARIANTS = ("static",)


def _cell_label(key: tuple) -> str:
    """A fit's key (less its variant) joined by ``/``: its ``cell`` coordinate."""
    return "/".join(map(str, key))


@dataclass(frozen=True)
class FitFile:
    """Where one fit lies: its file and its ``cell`` label there."""

    path: Path
    cell: str

    def read(self):
        """The fit read back.

        Returns
        -------
        arviz.InferenceData
            :func:`read_fit` of ``path`` and ``cell``.
        """
        return read_fit(self.path, self.cell)


def _stacked(fits: list, group: str):
    """One group of ``fits`` (``(key, idata)`` pairs) stacked along ``cell``."""
    import pandas as pd  # start-up time: loaded with xarray, only to write a posterior
    import xarray as xr  # start-up time: xarray loads only to write a posterior

    parts = []
    for _, idata in fits:
        ds = idata[group]
        if "subject" in ds.dims:
            labels = ds["subject"].values.astype(object)
            ds = ds.assign_coords(subject=np.arange(len(labels)), subject_label=("subject", labels))
        parts.append(ds)
    cells = pd.Index([_cell_label(key[:-1]) for key, _ in fits], name="cell")
    return xr.concat(parts, dim=cells, join="outer", coords="different", compat="equals")


def write_fits(path: Path, fits: list) -> None:
    """Write ``(key, idata)`` pairs of one variant to ``path``, stacked along ``cell``.

    Parameters
    ----------
    path : pathlib.Path
        The file to write (replaced if it exists).
    fits : list of (tuple, arviz.InferenceData)
        Each fit's key ``(*cell key, variant)`` and its InferenceData.
    """
    import arviz as az  # start-up time: arviz loads only to write a posterior

    groups = {g: _stacked(fits, g) for g in fits[0][1].groups()}
    az.InferenceData(**groups).to_netcdf(str(path), compress=False, engine="netcdf4")


def read_fit(path: Path, cell: str):
    """One fit of a posterior file, as the InferenceData that was written.

    Parameters
    ----------
    path : pathlib.Path
        A file of ``posterior/``.
    cell : str
        The fit's ``cell`` coordinate (its key less the variant, joined by ``/``).

    Returns
    -------
    arviz.InferenceData
        The fit's groups, padding removed and ``subject`` labelled again.
    """
    import arviz as az  # start-up time: arviz loads only to read a posterior

    whole = az.from_netcdf(path)
    groups = {}
    for g in whole.groups():
        ds = whole[g].sel(cell=cell, drop=True).load()
        if "y_dim_0" in ds.dims:
            ds = ds.dropna("y_dim_0", how="all")
        if g == "constant_data":  # the NaN padding made the indices floats
            ds = ds.assign({k: ds[k].astype(np.int64) for k in ds.data_vars if k != "x"})
        if "subject" in ds.dims:
            labels = ds["subject_label"].values
            keep = np.array([isinstance(v, str) and v != "" for v in labels])  # NaN pads: ""
            ds = ds.isel(subject=keep).drop_vars("subject_label")
            ds = ds.assign_coords(subject=labels[keep].astype(str))
        groups[g] = ds
    return az.InferenceData(**groups)


def kept_fit(kept):
    """A fit as :class:`PosteriorFiles` returned it: its draws, or its file read back.

    Parameters
    ----------
    kept : arviz.InferenceData or FitFile
        What the sink returned for the fit (``fit_posterior``'s ``idatas`` value).

    Returns
    -------
    arviz.InferenceData
        ``kept`` itself, or the whole fit read from its file.
    """
    return kept.read() if isinstance(kept, FitFile) else kept


@dataclass(frozen=True)
class PosteriorFiles:
    """``fit_posterior``'s sink: fits written to ``folder`` several to a file, their draws kept.

    Called on the fits that finish together, in the worker process that
    sampled them (``runs_in_workers``: only the posterior draws travel back,
    not the pointwise log-likelihoods); the file is described in
    :mod:`bayesobs.fits.posterior.files`.

    Parameters
    ----------
    folder : pathlib.Path
        An existing folder, written by the caller's command (which holds its
        lock while the workers write).
    keep : tuple of str, optional
        The variants whose posterior draws are returned (kept in the
        caller's memory); for any other a :class:`FitFile` is returned, to
        be read back with :func:`kept_fit` when needed.  Default: every
        variant's draws.
    """

    folder: Path
    keep: tuple[str, ...] | None = None
    runs_in_workers: ClassVar[bool] = True

    def __call__(self, fits: list) -> list:
        """Write ``fits`` (``(key, idata)`` of one variant) to one file; what to keep of each."""
        import arviz as az  # start-up time: arviz loads only to write a posterior

        first = fits[0][0]
        name = "__".join(map(str, (first[-1], *first[:-1]))).replace("/", "_") + ".nc"
        write_fits(self.folder / name, fits)
        if self.keep is not None and first[-1] not in self.keep:
            return [FitFile(self.folder / name, _cell_label(key[:-1])) for key, _ in fits]
        return [az.InferenceData(posterior=idata.posterior) for _, idata in fits]


def sink_in_workers(sink) -> bool:
    """Whether ``sink`` is called in fit_posterior's worker processes rather than the caller's.

    A sink whose ``runs_in_workers`` attribute is true (it pickles, and its
    effects, such as files written, are visible to the caller) is sent to
    the worker processes and called there: only what it returns comes back,
    not the pointwise log-likelihoods (:class:`PosteriorFiles`).  Any other
    sink, and every sink of a Dask run (whose workers may not share a file
    system), is called in the caller's process.

    Parameters
    ----------
    sink : callable or None
        ``fit_posterior``'s ``sink``.

    Returns
    -------
    bool
        True when ``sink`` declares ``runs_in_workers``.
    """
    return bool(getattr(sink, "runs_in_workers", False))


def _sunk(results: list, sink) -> list:
    """``results`` with their InferenceData replaced by what ``sink`` keeps, one call per variant."""
    if sink is None:
        return results
    out, by_variant = list(results), {}
    for i, (_, name, idata, *_) in enumerate(results):
        if idata is not None:
            by_variant.setdefault(name, []).append(i)
    for name, idx in by_variant.items():
        kept = sink([((*results[i][0], name), results[i][2]) for i in idx])
        for i, k in zip(idx, kept, strict=True):
            out[i] = (results[i][0], name, k, *results[i][3:])
    return out


__all__ = [
    "KEPT_VARIANTS",
    "FitFile",
    "PosteriorFiles",
    "kept_fit",
    "read_fit",
    "sink_in_workers",
    "write_fits",
]
