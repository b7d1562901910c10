"""Library entry points that mirror the CLI commands."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from .errors import BayesobsInputError
from .fits.controls import controls_table, fit_controls
from .fits.fitoptions import FitOptions, fit_options
from .fits.fitresults import FitBatch, fits_table
from .fits.fitting import fit_batch
from .fits.predictions import level_predictions, predictions
from .logprobs import RESPONSES, use_expected
from .paradigms import registered
from .provenance import write_manifest
from .scores.evidence import evidence_notes, evidence_table
from .trials import CELL_KEYS, normalize_trials, write_csv


def magnitude_trials(trials: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The magnitude trials of a normalised table, and how many other trials were left out."""
    found, names = pd.Series(False, index=trials.index), []
    for paradigm in registered():  # every registered paradigm's rows (bayesobs.paradigms)
        rows = paradigm.rows(trials)
        if rows.any():
            found = found | rows
            names.append(paradigm.name)
    if found.all():
        raise BayesobsInputError(
            "these are visual-search trials, perception trials or HVSBench-style questions "
            f"(paradigm {', '.join(names)}: right or wrong answers, not magnitudes): observer "
            "models fit magnitudes; use `bayesobs score` for their analyses"
        )
    if found.any():
        return trials[~found].reset_index(drop=True), int(found.sum())
    return trials, 0


class FitResult(NamedTuple):
    """Maximum-likelihood fits of a trial table, computed once: what :func:`write_fit` writes."""

    trials: pd.DataFrame  # the magnitude trials that were fitted
    batch: FitBatch
    fits: pd.DataFrame  # fits.csv
    evidence: pd.DataFrame  # evidence.csv
    controls: pd.DataFrame  # controls.csv (the anchoring control, METHOD §12)
    left_out: int  # visual-search/perception trials left out
    n_without_expected: int  # response="expected": trials without one, kept as missing


def fit_result(
    trials: pd.DataFrame,
    options: FitOptions | None = None,
    response: str = "sampled",
    normalized: bool = False,
) -> FitResult:
    """Fit the ten observer variants and the anchoring controls: the one path of every fit.

    :func:`fit` and ``bayesobs fit`` both fit through here.

    Parameters
    ----------
    trials : DataFrame
        A trial table (DESIGN contract); it is validated here.
    options : FitOptions, optional
        Bootstrap, seed, progress, resampling, interleaved column and lapse
        (default: :class:`~bayesobs.fits.fitoptions.FitOptions` ``()``).
    response : {"sampled", "expected"}
        As :func:`fit`.
    normalized : bool
        ``trials`` is already :func:`~bayesobs.trials.normalize_trials`' output
        (as ``bayesobs fit`` reads it): it is not validated again, so no second
        copy of a large table is held while it is fitted.

    Returns
    -------
    FitResult
        Its tables are those of ``fits.csv``, ``evidence.csv``,
        ``cells.csv`` and ``controls.csv``.

    Raises
    ------
    BayesobsInputError
        For a table of nothing but visual-search or perception trials.
    ValueError
        For an unknown ``response``.
    """
    options = options if options is not None else FitOptions()
    if response not in RESPONSES:
        raise ValueError(f"response must be one of {', '.join(RESPONSES)}, not {response!r}")
    trials, left_out = magnitude_trials(trials if normalized else normalize_trials(trials))
    n_without = 0
    if response == "expected":
        trials, n_without = use_expected(trials)
    batch = fit_batch(trials, options=options)
    fits = fits_table(batch)
    return FitResult(
        trials=trials,
        batch=batch,
        fits=fits,
        evidence=evidence_table(batch, trials),
        controls=controls_table(fit_controls(trials), fits),
        left_out=left_out,
        n_without_expected=n_without,
    )


def fit(
    trials: pd.DataFrame,
    bootstrap: int = 0,
    seed: int = 0,
    progress: bool = False,
    interleaved: str | None = None,
    lapse: bool = False,
    resample: str = "pooled",
    response: str = "sampled",
    options: FitOptions | None = None,
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
    options : FitOptions, optional
        ``bootstrap`` ... ``resample`` at once (checked once); when given,
        those keywords are not read.

    Returns
    -------
    fits : DataFrame
        One row per cell and variant, the columns of ``fits.csv``.
    evidence : DataFrame
        One row per cell and factor, the columns of ``evidence.csv``.
    """
    options = fit_options(
        options,
        bootstrap=bootstrap,
        seed=seed,
        progress=progress,
        interleaved=interleaved,
        lapse=lapse,
        resample=resample,
    )
    result = fit_result(trials, options, response=response)
    if result.left_out:
        warnings.warn(
            f"{result.left_out} visual-search trial(s) left out of the fits (score them with "
            "bayesobs.score)",
            UserWarning,
            stacklevel=2,
        )
    return result.fits, result.evidence


__all__ = [
    "FitResult",
    "evidence_table",
    "fit",
    "fit_result",
    "fit_summary",
    "level_predictions",
    "predictions",
    "write_fit",
]


def fit_summary(result: FitResult) -> dict:
    """Counts of a fit: what ``bayesobs fit`` prints and ``fit_manifest.json`` records.

    Parameters
    ----------
    result : FitResult
        :func:`fit_result` of the trials.

    Returns
    -------
    dict
        ``n_cells``, ``n_trials``, ``n_missing``, ``log_skipped`` (cells whose
        log variants were skipped), ``n_constant`` (cells of constant
        responses, not fitted), ``levels`` (interleaved levels, if any) and
        ``evidence_notes`` (lines on the evidence: its bounds, the veridical
        reference, boundary fits; :func:`bayesobs.scores.evidence.evidence_notes`).
    """
    cells = result.batch.cells.drop_duplicates(list(CELL_KEYS))  # one row per cell, not per level
    return {
        "n_cells": len(cells),
        "n_trials": int(cells["n_trials"].sum()),
        "n_missing": int(cells["n_missing"].sum()),
        "log_skipped": int((cells["log_skipped"] != "").sum()),
        "n_constant": int(cells["constant"].sum()),
        "levels": list(result.batch.cells.attrs.get("levels") or []),
        "evidence_notes": evidence_notes(result.evidence),
    }


def write_fit(result: FitResult, out, manifest: dict | None = None) -> dict:
    """Write the maximum-likelihood fit outputs of ``result`` into folder ``out``.

    ``fits.csv``, ``evidence.csv``, ``cells.csv`` and ``controls.csv`` (the
    anchoring control, METHOD §12), each atomically, and ``fit_manifest.json``
    (provenance, the options in ``manifest`` and the counts); what
    ``bayesobs fit`` writes, callable from a notebook.  It writes what it is
    given and fits nothing.

    Parameters
    ----------
    result : FitResult
        :func:`fit_result` of the trials.
    out : path
        The output folder (created).
    manifest : dict, optional
        Options to record in ``fit_manifest.json`` beside the provenance
        (inputs, mapping, bootstrap, seed...; the CLI passes its own).

    Returns
    -------
    dict
        :func:`fit_summary` of ``result``.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(result.fits, out / "fits.csv")
    write_csv(result.evidence, out / "evidence.csv")
    write_csv(result.batch.cells, out / "cells.csv")
    write_csv(result.controls, out / "controls.csv")
    summary = fit_summary(result)
    counts = {k: summary[k] for k in ("n_cells", "n_trials", "n_missing")}
    write_manifest(out / "fit_manifest.json", "fit", **{**(manifest or {}), **counts})
    return summary
