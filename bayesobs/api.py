"""Library entry points that mirror the CLI commands."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .bootstrap import check_resample
from .evidence import evidence_notes, evidence_table
from .fitting import fit_batch, fits_table
from .logprobs import RESPONSES, use_expected
from .trials import CELL_KEYS, normalize_trials, paradigm_rows


def magnitude_trials(trials: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The magnitude trials of a normalised table, and how many other trials were left out.

    Observer models fit magnitudes: visual-search trials (``set_size`` and
    ``correct``) and perception trials (``paradigm = perception``) are left out, and a table of nothing else is refused.  The
    one decision for :func:`fit` and ``bayesobs fit``.

    Raises
    ------
    BayesobsInputError
        When every trial is a visual-search trial.
    """
    from .errors import BayesobsInputError

    found = paradigm_rows(trials, "search") | paradigm_rows(trials, "perception")
    if found.all():
        raise BayesobsInputError(
            "these are visual-search trials or perception trials (correct answers, not magnitudes): "
            "observer models fit magnitudes; use `bayesobs score` for their analyses"
        )
    if found.any():
        return trials[~found].reset_index(drop=True), int(found.sum())
    return trials, 0


def fit(
    trials: pd.DataFrame,
    bootstrap: int = 0,
    seed: int = 0,
    progress: bool = False,
    interleaved: str | None = None,
    lapse: bool = False,
    resample: str = "pooled",
    response: str = "sampled",
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fit the ten observer variants to every cell; return ``(fits, evidence)``.

    Parameters
    ----------
    trials : DataFrame
        A trial table (DESIGN contract); it is validated here.
    bootstrap : int
        Session-run bootstrap replicates; adds ``p_mean, p_lo, p_hi`` to the
        evidence (METHOD §7).
    seed : int
        Bootstrap seed.
    progress : bool
        Show a progress bar.
    interleaved : str, optional
        A column whose levels alternate trial by trial inside a run (METHOD
        §10): per-level parameters over the shared sequence; ``fits`` and
        ``evidence`` then have one row per level with a ``level`` column.
    lapse : bool
        Add a uniform lapse rate to every variant (METHOD §11).
    resample : {"pooled", "stratified"}
        Bootstrap scheme (:func:`bayesobs.bootstrap.run_draws`).
    response : {"sampled", "expected"}
        Fit the answers as written, or the mean of each answer's distribution
        (``response_expected``, from runs with ``--logprobs``;
        :func:`bayesobs.logprobs.use_expected`).

    Returns
    -------
    fits : DataFrame
        One row per cell and variant, the columns of ``fits.csv``.
    evidence : DataFrame
        One row per cell and factor, the columns of ``evidence.csv``.
    """
    trials, left_out = magnitude_trials(normalize_trials(trials))
    if left_out:
        import warnings

        warnings.warn(
            f"{left_out} visual-search trial(s) left out of the fits (score them with "
            "bayesobs.score)",
            UserWarning,
            stacklevel=2,
        )
    check_resample(resample)
    if response not in RESPONSES:
        raise ValueError(f"response must be one of {', '.join(RESPONSES)}, not {response!r}")
    if response == "expected":
        trials, _ = use_expected(trials)
    batch = fit_batch(
        trials,
        bootstrap=bootstrap,
        seed=seed,
        progress=progress,
        interleaved=interleaved,
        lapse=lapse,
        resample=resample,
    )
    return fits_table(batch), evidence_table(batch, trials)


def predictions(
    trials: pd.DataFrame, fits: pd.DataFrame, variants=("static", "kalman")
) -> pd.DataFrame:
    """Trials with each variant's fitted central prediction (``pred_<variant>``).

    Parameters come from ``fits`` (full-data fits); predictions are on the
    response scale (:func:`bayesobs.observers.predict_response`), run by run.
    Fits of an interleaved column (a ``level`` column, one row per cell,
    variant and level; METHOD §10) predict each trial with its own level's
    parameters over the whole run, and the result gains ``level``
    (``COL=value``) for drawing the levels apart.
    """
    from .fitresults import decode_params
    from .observers.models import predict_response
    from .runtable import interleaved_levels

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
    for key, cell in out.groupby(list(CELL_KEYS), sort=False):
        run = (cell["session"].astype(str) + "/" + cell["run"].astype(str)).to_numpy()
        x = cell["stimulus"].to_numpy()
        for v in variants:
            if levels:
                by_level = {
                    lev: decode_params(table.get((*key, v, lev), "{}"))
                    for lev in dict.fromkeys(cell["level"])
                }
                if any("skipped" in p or not p for p in by_level.values()):
                    continue
                pred = level_predictions(v, by_level, x, run, cell["level"].to_numpy())
            else:
                params = decode_params(table.get((*key, v), "{}"))
                if "skipped" in params or not params:
                    continue
                pred = predict_response(v, params, x, run)
            out.loc[cell.index, f"pred_{v}"] = pred
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

    Notes
    -----
    Run means and the Kalman recursion go over all trials of a run whatever
    their level (METHOD §10): static and linear predictions are per trial, so
    each level's own prediction is exact; the Kalman filter takes each
    trial's ``rho_c`` (``P-_t = P_{t-1} + 1``, ``K_t = rho_c P-_t /
    (rho_c P-_t + 1)``, ``K_1 = 1``, ``P_1 = 1 / rho_c(1)``), the limits 0 and
    infinity standing in as 1e-12 and 1e12.
    """
    from .observers import get_variant
    from .observers.models import log_epsilon, predict_response, transform

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


__all__ = ["evidence_table", "fit", "level_predictions", "predictions"]


def write_fit(trials: pd.DataFrame, batch, out, manifest: dict | None = None) -> dict:
    """Write the maximum-likelihood fit outputs of ``batch`` into folder ``out``.

    ``fits.csv``, ``evidence.csv``, ``cells.csv`` and ``controls.csv`` (the
    anchoring control, METHOD §12), each atomically, and ``fit_manifest.json``
    (provenance, the options in ``manifest`` and the counts returned here);
    what ``bayesobs fit`` writes, callable from a notebook.

    Parameters
    ----------
    trials : DataFrame
        The magnitude trials that were fitted (see :func:`magnitude_trials`).
    batch : FitBatch
        :func:`bayesobs.fitting.fit_batch` of those trials.
    out : path
        The output folder (created).
    manifest : dict, optional
        Options to record in ``fit_manifest.json`` beside the provenance
        (inputs, mapping, bootstrap, seed...; the CLI passes its own).

    Returns
    -------
    dict
        ``n_cells``, ``n_trials``, ``n_missing``, ``log_skipped`` (cells whose
        log variants were skipped), ``n_constant`` (cells of constant
        responses, not fitted), ``levels`` (interleaved levels, if any) and
        ``evidence_notes`` (lines on the evidence: its bounds, the veridical
        reference, boundary fits; :func:`bayesobs.evidence.evidence_notes`).
    """
    from pathlib import Path

    from .controls import controls_table, fit_controls
    from .trials import write_csv

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    fits = fits_table(batch)
    write_csv(fits, out / "fits.csv")
    evidence = evidence_table(batch, trials)
    write_csv(evidence, out / "evidence.csv")
    write_csv(batch.cells, out / "cells.csv")
    write_csv(controls_table(fit_controls(trials), fits), out / "controls.csv")
    cells = batch.cells.drop_duplicates(list(CELL_KEYS))  # one row per cell, not per level
    summary = {
        "n_cells": len(cells),
        "n_trials": int(cells["n_trials"].sum()),
        "n_missing": int(cells["n_missing"].sum()),
        "log_skipped": int((cells["log_skipped"] != "").sum()),
        "n_constant": int(cells["constant"].sum()),
        "levels": list(batch.cells.attrs.get("levels") or []),
        "evidence_notes": evidence_notes(evidence),
    }
    from .provenance import write_manifest

    counts = {k: summary[k] for k in ("n_cells", "n_trials", "n_missing")}
    write_manifest(out / "fit_manifest.json", "fit", **{**(manifest or {}), **counts})
    return summary
