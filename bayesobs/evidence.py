"""Factor evidence from AIC (METHOD §3, the paper's appendix A.8)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .bootstrap import percentile_interval
from .observers.variants import FACTORS, NUISANCE, VARIANT_NAMES, VARIANTS
from .trials import CELL_KEYS

if TYPE_CHECKING:  # fitting imports this module's neighbours; no runtime cycle
    from .fitting import FitBatch


def _groups(factor: str) -> list[tuple[list[int], list[int]]]:
    """Variant indices ``(f true, f false)`` of every nuisance group with both levels."""
    groups: dict[tuple, tuple[list[int], list[int]]] = {}
    for j, v in enumerate(VARIANTS):
        key = tuple(getattr(v, n) for n in NUISANCE[factor])
        side = 0 if getattr(v, factor) else 1
        groups.setdefault(key, ([], []))[side].append(j)
    return [g for g in groups.values() if g[0] and g[1]]


_GROUPS = {f: _groups(f) for f in FACTORS}


def factor_evidence_array(aic: np.ndarray) -> np.ndarray:
    """``P(f)`` for each factor from AICs of the ten variants.

    Parameters
    ----------
    aic : array, shape (..., 10)
        AIC of each variant in :data:`bayesobs.observers.VARIANTS` order;
        NaN marks a skipped variant.

    Returns
    -------
    array, shape (..., 4)
        Evidence for ``bayesian``, ``weber``, ``sequential``, ``gain``; NaN
        where no nuisance group has both levels fitted.
    """
    aic = np.asarray(aic, dtype=float)
    fitted = np.isfinite(aic)
    best = np.min(np.where(fitted, aic, np.inf), axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", over="ignore"):
        L = np.where(fitted, np.exp(-0.5 * (aic - best)), -np.inf)
    out = np.full(aic.shape[:-1] + (len(FACTORS),), np.nan)
    for i, f in enumerate(FACTORS):
        tot_t = np.zeros(aic.shape[:-1])
        tot_f = np.zeros(aic.shape[:-1])
        count = np.zeros(aic.shape[:-1])
        for t_idx, f_idx in _GROUPS[f]:
            lt = L[..., t_idx].max(axis=-1)
            lf = L[..., f_idx].max(axis=-1)
            ok = np.isfinite(lt) & np.isfinite(lf)
            tot_t += np.where(ok, lt, 0.0)
            tot_f += np.where(ok, lf, 0.0)
            count += ok
        # Equal averages over groups: the 1/|C| factors cancel in the ratio.
        with np.errstate(invalid="ignore", divide="ignore"):
            out[..., i] = np.where(count > 0, tot_t / (tot_t + tot_f), np.nan)
    return out


def factor_evidence(fits: pd.DataFrame) -> pd.DataFrame:
    """Evidence per cell and factor from a ``fits.csv``-style table.

    Parameters
    ----------
    fits : DataFrame
        Columns ``subject, task, modality, condition, variant, aic``.

    Returns
    -------
    DataFrame
        ``subject, task, modality, condition, factor, p``.
    """
    missing = [c for c in (*CELL_KEYS, "variant", "aic") if c not in fits.columns]
    if missing:
        raise ValueError(f"fits table lacks column(s) {', '.join(missing)}")
    unknown = set(fits["variant"]) - set(VARIANT_NAMES)
    if unknown:
        raise ValueError(f"unknown variant(s) in fits table: {', '.join(sorted(unknown))}")
    wide = fits.pivot_table(
        index=list(CELL_KEYS), columns="variant", values="aic", dropna=False, aggfunc="first"
    ).reindex(columns=list(VARIANT_NAMES))
    p = factor_evidence_array(wide.to_numpy(dtype=float))
    out = pd.DataFrame(p, index=wide.index, columns=list(FACTORS)).reset_index()
    return out.melt(id_vars=list(CELL_KEYS), var_name="factor", value_name="p")


def evidence_table(batch: FitBatch) -> pd.DataFrame:
    """``evidence.csv`` rows of a fit batch; with replicates, adds ``p_mean, p_lo, p_hi``."""
    p = factor_evidence_array(batch.aic)  # (cells, 1 + B, 4)
    B = p.shape[1] - 1
    rows = []
    mean, lo, hi = percentile_interval(p[:, 1:, :], axis=1) if B else (None, None, None)
    has_level = "level" in batch.cells.columns
    for c in range(len(batch.cells)):
        key = {k: batch.cells[k].iat[c] for k in CELL_KEYS}
        for i, f in enumerate(FACTORS):
            row = {**key, "factor": f, "p": p[c, 0, i]}
            if B:
                row.update(p_mean=mean[c, i], p_lo=lo[c, i], p_hi=hi[c, i])
            if has_level:  # METHOD §10: the joint fit's evidence, on each level's row
                row["level"] = batch.cells["level"].iat[c]
            rows.append(row)
    return pd.DataFrame(rows)
