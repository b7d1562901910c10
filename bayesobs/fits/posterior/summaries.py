"""Summaries, diagnostics and PSIS-LOO of fitted cells, one cell at a time or a slice at once."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...trials import CELL_KEYS
from .batching import (
    _inference_data,
    _observed_ll,
)
from .files import _sunk
from .mcmcstats import summary_stats
from .model import natural_params
from .predictive import predictive_groups
from .psis import loo_many

RHAT_MAX = 1.01
PARETO_K_MAX = 0.7  # Vehtari et al. (2017): PSIS-LOO unreliable above
ESS_PER_CHAIN = 100  # Vehtari et al. (2021): bulk ESS above 100 per chain
# the decimals arviz.summary rounds its columns to (ESS to integers, R-hat to 2, the rest to 3)
SUMMARY_DECIMALS = {
    "mean": 3,
    "sd": 3,
    "hdi_3%": 3,
    "hdi_97%": 3,
    "mcse_mean": 3,
    "mcse_sd": 3,
    "ess_bulk": 0,
    "ess_tail": 0,
    "r_hat": 2,
}


LOO_CELLS = 16  # cells whose PSIS-LOO is computed together (memory: cells x obs x draws doubles)


def diagnostics(idata) -> dict:
    """Worst R-hat, smallest bulk ESS and the number of divergent transitions.

    Parameters
    ----------
    idata : arviz.InferenceData
        A fit with a ``posterior`` and ``sample_stats.diverging``.

    Returns
    -------
    dict
        ``r_hat_max`` (float), ``ess_bulk_min`` (float) and ``divergences``
        (int) over every parameter.
    """
    import arviz as az  # start-up time: ArviZ loads only when posteriors are summarised

    summ = az.summary(idata, kind="diagnostics")
    return {
        "r_hat_max": float(summ["r_hat"].max()),
        "ess_bulk_min": float(summ["ess_bulk"].min()),
        "divergences": int(np.asarray(idata.sample_stats["diverging"]).sum()),
    }


def diagnostics_failures(d: dict, chains: int) -> str:
    """Each failed check with its value and threshold, e.g. ``R-hat 1.052 > 1.01``."""
    out = []
    if not d["r_hat_max"] <= RHAT_MAX:
        out.append(f"R-hat {d['r_hat_max']:.3f} > {RHAT_MAX}")
    if not d["ess_bulk_min"] >= ESS_PER_CHAIN * chains:
        out.append(
            f"bulk ESS {d['ess_bulk_min']:.0f} < {ESS_PER_CHAIN * chains} "
            f"({ESS_PER_CHAIN} per chain x {chains} chains)"
        )
    if d["divergences"]:
        out.append(f"{d['divergences']} divergent transition(s) > 0")
    return ", ".join(out)


def diagnostics_ok(d: dict, chains: int) -> bool:
    """R-hat at most 1.01, bulk ESS above 100 per chain, no divergences."""
    return (
        d["r_hat_max"] <= RHAT_MAX
        and d["ess_bulk_min"] >= ESS_PER_CHAIN * chains
        and d["divergences"] == 0
    )


def _cell_results(group_keys, key, name, idata, chains):
    """Summary rows, LOO row and notes of one fitted (group, variant)."""
    import arviz as az  # start-up time: ArviZ loads only when posteriors are summarised

    label = "/".join(map(str, key))
    summ = az.summary(idata, hdi_prob=0.94)
    diag = {  # = diagnostics(idata): the same columns of the same (rounded) summary
        "r_hat_max": float(summ["r_hat"].max()),
        "ess_bulk_min": float(summ["ess_bulk"].min()),
        "divergences": int(np.asarray(idata.sample_stats["diverging"]).sum()),
    }
    notes = []
    if not diagnostics_ok(diag, chains):
        notes.append(
            f"{label} {name}: sampler diagnostics failed ({diagnostics_failures(diag, chains)}); "
            "treat with care"
        )
    rows = []
    for lab, r in summ.iterrows():
        param, _, subj = lab.partition("[")
        rows.append(
            {
                **dict(zip(group_keys, key, strict=True)),
                "subject_cell": subj.rstrip("]"),
                "variant": name,
                "param": param,
                **{c: r[c] for c in summ.columns},
                **diag,
            }
        )
    with warnings.catch_warnings():
        # arviz's generic warning is replaced by a note with the count and the threshold
        warnings.filterwarnings("ignore", message=".*[Pp]areto", category=UserWarning)
        loo = az.loo(idata, pointwise=True)
    k = np.asarray(loo.pareto_k)
    high = int((k > PARETO_K_MAX).sum())
    if high:
        notes.append(
            f"{label} {name}: {high} of {k.size} observation(s) have Pareto k > {PARETO_K_MAX} "
            f"(largest {k.max():.2f}): PSIS-LOO is unreliable for them; compare variants with "
            "care (K-fold CV, or a lapse/heavier-tailed model)"
        )
    loo_row = {
        **dict(zip(group_keys, key, strict=True)),
        "variant": name,
        "elpd_loo": float(loo.elpd_loo),
        "se": float(loo.se),
        "p_loo": float(loo.p_loo),
        "pareto_k_over_0.7": high,
    }
    return rows, loo_row, "; ".join(notes) or None


def slice_results(variant, items: list, raw, chains: int, sink=None, seed: int = 0) -> list:
    """Summary rows, LOO rows, notes and InferenceData of a sampled slice of cells, all at once."""
    post, div, ll = raw
    n = len(items)
    datas = [d for _, d in items]
    post = {k: np.asarray(v)[:n] for k, v in post.items()}
    div, ll = np.asarray(div)[:n], np.asarray(ll)[:n]
    scales = _Scales(
        np.array([d.c[0] for d in datas])[:, None, None, None],
        np.array([d.s[0] for d in datas])[:, None, None, None],
    )
    nat = natural_params(variant, post, scales)  # (cells, chain, draw, 1) each
    labels = ["/".join(map(str, key)) for key, _ in items]
    C, D = div.shape[1:]
    # arviz.summary's columns, each parameter's (chain, draw) array as its own (mcmcstats)
    stats = {k: summary_stats(v[..., 0], hdi_prob=0.94) for k, v in nat.items()}
    columns = [c for c in next(iter(stats.values())) if c != "ess_mean"]
    summ = {  # rounded as arviz.summary rounds its table
        k: pd.DataFrame({c: s[c] for c in columns}).round(SUMMARY_DECIMALS)
        for k, s in stats.items()
    }
    if chains == 1:
        reff = np.ones(n)
    else:  # arviz.ess(method="mean") of each parameter, averaged over the cell's parameters
        ess_mean = np.ascontiguousarray(np.stack([s["ess_mean"] for s in stats.values()], axis=1))
        reff = ess_mean.mean(axis=-1) / (C * D)
    # PSIS-LOO a few cells at a time: each observation's numbers are its own, and the
    # (observations x draws) float64 copies of a whole slice took a gigabyte or more; each
    # cell's copy is made again for its InferenceData below, so that no more than a few
    # cells' exist at once (a worker's peak memory: 0.2 GB less at 112 cells)
    loo: dict[str, list] = {}
    for lo in range(0, n, LOO_CELLS):
        chunk = range(lo, min(lo + LOO_CELLS, n))
        part = loo_many([_observed_ll(ll[j], datas[j]) for j in chunk], reff[lo : lo + LOO_CELLS])
        for key, values in part.items():
            loo.setdefault(key, []).extend(values)
    out = []
    for j, ((key, d), label) in enumerate(zip(items, labels, strict=True)):
        rows_j = {k: f.iloc[j] for k, f in summ.items()}  # the cell's row of each parameter
        diag = {
            "r_hat_max": float(pd.Series([r["r_hat"] for r in rows_j.values()]).max()),
            "ess_bulk_min": float(pd.Series([r["ess_bulk"] for r in rows_j.values()]).min()),
            "divergences": int(div[j].sum()),
        }
        notes = []
        if not diagnostics_ok(diag, chains):
            notes.append(
                f"{label} {variant.name}: sampler diagnostics failed "
                f"({diagnostics_failures(diag, chains)}); treat with care"
            )
        rows = []
        for param, row in rows_j.items():
            rows.append(
                {
                    **dict(zip(CELL_KEYS, key, strict=True)),
                    "subject_cell": label,
                    "variant": variant.name,
                    "param": param,
                    **{c: row[c] for c in columns},
                    **diag,
                }
            )
        k = loo["pareto_k"][j]
        high = int((k > PARETO_K_MAX).sum())
        if high:
            notes.append(
                f"{label} {variant.name}: {high} of {k.size} observation(s) have Pareto k > "
                f"{PARETO_K_MAX} (largest {k.max():.2f}): PSIS-LOO is unreliable for them; "
                "compare variants with care (K-fold CV, or a lapse/heavier-tailed model)"
            )
        loo_row = {
            **dict(zip(CELL_KEYS, key, strict=True)),
            "variant": variant.name,
            "elpd_loo": float(loo["elpd_loo"][j]),
            "se": float(loo["se"][j]),
            "p_loo": float(loo["p_loo"][j]),
            "pareto_k_over_0.7": high,
        }
        idata = _inference_data(
            {name: v[j] for name, v in nat.items()}, _observed_ll(ll[j], d), div[j], d.subjects
        )
        idata.add_groups(predictive_groups(variant, {k: v[j] for k, v in post.items()}, d, seed))
        out.append((key, variant.name, idata, rows, loo_row, "; ".join(notes) or None))
        if (j + 1) % LOO_CELLS == 0 or j + 1 == n:  # a few cells' fits to the sink (one file)
            start = j // LOO_CELLS * LOO_CELLS
            out[start:] = _sunk(out[start:], sink)
    return out


@dataclass
class _Scales:
    """The centre and scale :func:`natural_params` reads, for a stack of cells."""

    c: np.ndarray
    s: np.ndarray
