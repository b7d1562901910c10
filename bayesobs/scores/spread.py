"""Noise within an answer versus noise across answers (``answer_spread.csv``; docs/method.md)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..fits.predictions import predictions
from ..trials import CELL_KEYS

COLUMNS = (
    *CELL_KEYS,
    "n_trials",
    "n_with_distribution",
    "within_sd_mean",
    "best_variant",
    "residual_sd",
    "within_to_residual",
)


def _best(fits: pd.DataFrame) -> pd.Series:
    """The lowest-AIC variant of each cell (summed over the levels of an interleaved fit)."""
    ok = fits[np.isfinite(pd.to_numeric(fits["aic"], errors="coerce"))]
    aic = ok.groupby([*CELL_KEYS, "variant"], sort=False)["aic"].sum().reset_index()
    if aic.empty:
        return pd.Series(dtype=object)
    return aic.loc[aic.groupby(list(CELL_KEYS), sort=False)["aic"].idxmin()].set_index(
        list(CELL_KEYS)
    )["variant"]


def answer_spread(trials: pd.DataFrame, fits: pd.DataFrame) -> pd.DataFrame:
    """Per cell: the mean within-answer sd beside the best model's across-answer residual sd."""
    if "response_sd" not in trials or not trials["response_sd"].notna().any():
        return pd.DataFrame()
    fits = fits.astype({k: str for k in CELL_KEYS})
    best = _best(fits)
    variants = tuple(dict.fromkeys(best))
    pred = predictions(trials, fits, variants=variants) if variants else trials
    rows = []
    for key, cell in pred.groupby(list(CELL_KEYS), sort=True):
        key = tuple(str(k) for k in key)
        answered = cell["response"].notna()
        sd = pd.to_numeric(cell["response_sd"], errors="coerce")
        with_sd = answered & sd.notna()
        variant = best.get(key)
        residual = np.nan
        if variant is not None:
            r = (cell["response"] - cell[f"pred_{variant}"])[answered].to_numpy(dtype=float)
            r = r[np.isfinite(r)]
            residual = float(np.sqrt(np.mean(r**2))) if r.size else np.nan
        within = float(sd[with_sd].mean()) if with_sd.any() else np.nan
        rows.append(
            (
                *key,
                int(answered.sum()),
                int(with_sd.sum()),
                within,
                variant,
                residual,
                within / residual if residual > 0 else np.nan,
            )
        )
    return pd.DataFrame(rows, columns=list(COLUMNS))
