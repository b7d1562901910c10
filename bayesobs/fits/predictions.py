"""Fitted central predictions of the observer variants, trial by trial (for figures and the spread)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trials import CELL_KEYS, normalize_trials
from .fitresults import decode_params
from .observers import get_variant
from .observers.models import log_epsilon, predict_response, transform
from .runtable import interleaved_levels


def predictions(
    trials: pd.DataFrame, fits: pd.DataFrame, variants=("static", "kalman")
) -> pd.DataFrame:
    """Trials with each variant's fitted central prediction (``pred_<variant>``).

    Parameters come from ``fits`` (full-data fits); predictions are on the
    response scale (:func:`bayesobs.fits.observers.predict_response`), run by run.
    Fits of an interleaved column (a ``level`` column, one row per cell,
    variant and level; METHOD §10) predict each trial with its own level's
    parameters over the whole run, and the result gains ``level``
    (``COL=value``) for drawing the levels apart.

    Parameters
    ----------
    trials : DataFrame
        A trial table (normalised here).
    fits : DataFrame
        ``fits.csv`` of the same trials (:func:`fit` or ``bayesobs fit``).
    variants : sequence of str
        The variants whose predictions to add.

    Returns
    -------
    DataFrame
        The normalised trials with a ``pred_<variant>`` column per variant
        (NaN where the variant has no fit in the trial's cell).
    """
    trials = normalize_trials(trials)
    out = trials.copy()
    for v in variants:
        out[f"pred_{v}"] = np.nan
    keys = [*CELL_KEYS, "variant"]
    fits = fits.astype({k: str for k in CELL_KEYS})  # a CSV may read subject 1 as a number
    levels = "level" in fits.columns and bool(fits["level"].notna().any())
    if levels:
        column = str(fits["level"].dropna().iloc[0]).split("=", 1)[0]
        codes, names = interleaved_levels(trials, column)
        out["level"] = [f"{column}={names[c]}" for c in codes]
        keys.append("level")
    table = fits.set_index(keys)["params"]
    # whole columns once, then each cell's rows by position (not a pandas lookup per cell)
    runs = (out["session"].astype(str) + "/" + out["run"].astype(str)).to_numpy()
    stimuli = out["stimulus"].to_numpy()
    level_of = out["level"].to_numpy() if levels else None
    preds = {v: np.full(len(out), np.nan) for v in variants}
    for key, pos in out.groupby(list(CELL_KEYS), sort=False).indices.items():
        run, x = runs[pos], stimuli[pos]
        for v in variants:
            if levels:
                by_level = {
                    lev: decode_params(table.get((*key, v, lev), "{}"))
                    for lev in dict.fromkeys(level_of[pos])
                }
                if any("skipped" in p or not p for p in by_level.values()):
                    continue
                pred = level_predictions(v, by_level, x, run, level_of[pos])
            else:
                params = decode_params(table.get((*key, v), "{}"))
                if "skipped" in params or not params:
                    continue
                pred = predict_response(v, params, x, run)
            preds[v][pos] = pred
    for v in variants:
        out[f"pred_{v}"] = preds[v]
    return out


def level_predictions(variant, params: dict, x, run, level) -> np.ndarray:
    """Central predictions of an interleaved fit: each trial under its own level's parameters.

    Parameters
    ----------
    variant : str
        Observer variant.
    params : dict
        Decoded parameters of each level, by level label.
    x, run, level : arrays
        Stimuli in presentation order, their session-run labels and level labels.

    Returns
    -------
    ndarray
        The central predicted response of each trial, on the response scale.

    Notes
    -----
    Run means and the Kalman recursion go over all trials of a run whatever
    their level (METHOD §10): static and linear predictions are per trial, so
    each level's own prediction is exact; the Kalman filter takes each
    trial's ``rho_c`` (``P-_t = P_{t-1} + 1``, ``K_t = rho_c P-_t /
    (rho_c P-_t + 1)``, ``K_1 = 1``, ``P_1 = 1 / rho_c(1)``), the limits 0 and
    infinity standing in as 1e-12 and 1e12.
    """
    var = get_variant(variant)
    x = np.asarray(x, dtype=float)
    level = np.asarray(level)
    run = np.asarray(run)
    eps = log_epsilon(x)
    if var.family != "kalman":
        pred = np.full(len(x), np.nan)
        for lev, p in params.items():
            at = level == lev
            pred[at] = predict_response(var, p, x, run, eps)[at]
        return pred
    z = transform(x, eps, var.log)
    rho = np.clip([float(params[lev]["rho"]) for lev in level], 1e-12, 1e12)
    mu = np.empty(len(x))
    for r in dict.fromkeys(run):
        idx = np.flatnonzero(run == r)
        m, P = z[idx[0]], 1.0 / rho[idx[0]]
        mu[idx[0]] = m
        for t in idx[1:]:
            pm = P + 1.0
            d = rho[t] * pm + 1.0
            m += rho[t] * pm / d * (z[t] - m)
            P = pm / d
            mu[t] = m
    if var.gain:
        g = np.array([float(params[lev].get("g", 1.0)) for lev in level])
        delta = np.array([float(params[lev].get("delta", 0.0)) for lev in level])
        mu = g * mu + delta
    return np.exp(mu) - eps if var.log else mu
