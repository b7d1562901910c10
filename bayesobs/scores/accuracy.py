"""Accuracy of the magnitude answers: NRMSE against the range-midpoint baseline (METHOD §4)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..bootstrap import add_interval, run_draws, unit_draws
from ..trials import CELL_KEYS, RUN_KEYS


def with_baseline(trials: pd.DataFrame) -> pd.DataFrame:
    """Add ``baseline``: the constant range-midpoint predictor of each trial.

    ``(range_low + range_high) / 2`` where logged; otherwise the midpoint of the
    smallest and largest stimulus of that session type in the cell.

    Parameters
    ----------
    trials : DataFrame
        Normalised magnitude trials (the cell keys, ``session``,
        ``stimulus``; optional ``range_low``, ``range_high``).

    Returns
    -------
    DataFrame
        A copy of ``trials`` with the ``baseline`` column (stimulus units).
    """
    out = trials.copy()
    g = out.groupby([*CELL_KEYS, "session"], sort=False)["stimulus"]
    fallback = (g.transform("min") + g.transform("max")) / 2
    if "range_low" in out.columns and "range_high" in out.columns:
        logged = (out["range_low"] + out["range_high"]) / 2
        out["baseline"] = logged.where(logged.notna(), fallback)
    else:
        out["baseline"] = fallback
    return out


def replicated(df: pd.DataFrame, name: str, values: np.ndarray) -> pd.DataFrame:
    """Add ``name`` (full data) and, with replicates, ``name_mean/_lo/_hi``."""
    df[name] = values[:, 0]
    if values.shape[1] > 1:
        add_interval(df, name, values[:, 1:])
    return df


def accuracy_batch(
    trials: pd.DataFrame, bootstrap: int = 0, seed: int = 0, resample: str = "pooled"
):
    """NRMSE of every cell and replicate: ``(cells, 1 + B)``.

    Over the trials with an observed response: ``RMSE(y, x) / RMSE(c, x)``.
    ``resample`` is the bootstrap scheme (:func:`bayesobs.bootstrap.run_draws`).

    Parameters
    ----------
    trials : DataFrame
        Normalised magnitude trials (``baseline`` is added by
        :func:`with_baseline` when absent).
    bootstrap : int
        Session-run bootstrap replicates ``B`` (0: full data only).
    seed : int
        Bootstrap seed.
    resample : {"pooled", "stratified"}
        The bootstrap scheme.

    Returns
    -------
    cells : DataFrame
        ``subject, task, modality, condition`` of every cell, sorted.
    nrmse : numpy.ndarray
        ``(len(cells), 1 + B)``: column 0 the full data, then each replicate;
        NaN where no response was observed, infinite where the baseline has
        no error but the responses have some.

    Raises
    ------
    BayesobsInputError
        With ``bootstrap > 0``: an unknown ``resample``, or ``stratified``
        with fewer than 2 runs of a session type in some group.
    """
    t = trials if "baseline" in trials.columns else with_baseline(trials)
    obs = t["response"].notna().to_numpy()
    x = t["stimulus"].to_numpy()
    err = np.where(obs, t["response"].to_numpy() - x, 0.0)
    base = np.where(obs, t["baseline"].to_numpy() - x, 0.0)
    runs = t.assign(_e=err**2, _b=base**2).groupby(list(RUN_KEYS), sort=True)[["_e", "_b"]].sum()
    keys = runs.index.to_frame(index=False)
    cells = keys[list(CELL_KEYS)].drop_duplicates().reset_index(drop=True)
    unit_cell = keys.groupby(list(CELL_KEYS), sort=True).ngroup().to_numpy()
    B = int(bootstrap)
    draws = run_draws(t, B, seed, resample) if B > 0 else {}
    W = unit_draws(cells, unit_cell, keys["session"].to_numpy(), keys["run"].to_numpy(), draws, B)
    sums = np.asarray(W @ runs.to_numpy()).reshape(len(cells), 1 + B, 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        nrmse = np.sqrt(sums[..., 0] / sums[..., 1])
    return cells, nrmse


def accuracy_table(trials: pd.DataFrame, bootstrap: int = 0, seed: int = 0) -> pd.DataFrame:
    """``accuracy.csv``: ``subject, task, modality, condition, nrmse`` (+ interval).

    Parameters
    ----------
    trials : DataFrame
        Normalised magnitude trials.
    bootstrap : int
        Pooled session-run bootstrap replicates (0: no interval).
    seed : int
        Bootstrap seed.

    Returns
    -------
    DataFrame
        One row per cell: the cell keys and ``nrmse`` (full data), with
        ``bootstrap > 0`` also ``nrmse_mean``, ``nrmse_lo``, ``nrmse_hi``
        (the replicates' mean and 68% percentile interval).
    """
    cells, nrmse = accuracy_batch(trials, bootstrap, seed)
    return replicated(cells, "nrmse", nrmse)


def bias_variance(trials: pd.DataFrame) -> pd.DataFrame:
    """Per cell: mean squared error of the responses and its split into bias² and variance.

    ``mse = bias2 + variance`` with ``bias2 = mean(y - x)^2`` and
    ``variance = mean((y - x - mean(y - x))^2)``, over observed responses.

    Parameters
    ----------
    trials : DataFrame
        Normalised magnitude trials (the cell keys, ``stimulus``,
        ``response``).

    Returns
    -------
    DataFrame
        ``subject, task, modality, condition, bias2, variance, mse`` (squared
        stimulus units), one row per cell with an observed response.
    """
    t = trials.dropna(subset=["response"]).assign(_e=lambda d: d["response"] - d["stimulus"])
    g = t.groupby(list(CELL_KEYS), sort=True)["_e"]
    out = pd.DataFrame({"bias2": g.mean() ** 2, "variance": g.var(ddof=0)})
    out["mse"] = out["bias2"] + out["variance"]
    return out.reset_index()
