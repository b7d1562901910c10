"""The veridical observer: a reference beside the ten variants (issue 28)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from ..trials import CELL_KEYS
from .kernel import VARIANCE_FLOOR, quantum_floor
from .observers.scale import cell_moments, model_scale
from .runtable import build_runs

VERIDICAL_NAMES: tuple[str, ...] = ("veridical", "veridical_log")
VERIDICAL_K = 1  # sigma (per level with an interleaved column)
LAPSE_REASON = "not computed with --lapse (the veridical reference has no lapse rate)"


class VeridicalFit(NamedTuple):
    """Full-data fits of the two veridical observers, one row per cell."""

    cells: pd.DataFrame
    loglik: np.ndarray
    aic: np.ndarray
    sigma: np.ndarray
    n: np.ndarray
    k: np.ndarray


def _floor(n, su, suu, qfloor):
    """The engine's variance floor from the (centred) response moments."""
    nn = np.where(n > 0, n, 1)
    vu = suu - su**2 / nn
    return np.maximum(VARIANCE_FLOOR * np.maximum(vu / nn, 1e-300), qfloor)


def veridical_fit(trials: pd.DataFrame, interleaved: str | None = None) -> VeridicalFit:
    """Maximum-likelihood fits of ``veridical`` and ``veridical_log`` per cell."""
    cells, runs = build_runs(trials, interleaved)
    C = len(cells)
    levels = cells.attrs.get("levels") or []
    L = len(levels) if interleaved is not None and len(levels) > 1 else 1
    lev = runs.level if L > 1 else np.zeros(runs.x.shape, dtype=np.int64)
    ll = np.full((C, 2), np.nan)
    sigma = np.full((C, 2), np.nan)
    n_out = np.zeros((C, 2))
    k_out = np.zeros(C)
    eps = cells["eps"].to_numpy()[runs.cell][:, None]
    constant = cells["constant"].to_numpy(bool)
    for j, log in enumerate((False, True)):
        ok_cell = (cells["log_skipped"].to_numpy() == "") if log else np.ones(C, bool)
        z, u, obs, jac = model_scale(
            runs.x, runs.y, runs.present, eps, log, ok_cell[runs.cell][:, None]
        )
        centre = cell_moments(z, runs.present, runs.cell, C)[0][runs.cell][:, None]
        z = np.where(runs.present, z - centre, 0.0)
        u = np.where(obs, u - centre, 0.0)
        e2 = np.where(obs, (u - z) ** 2, 0.0)
        qfloor = quantum_floor(cells, log)
        total = np.zeros(C)
        short = np.zeros(C, bool)
        n_all = np.zeros(C)
        n_levels = np.zeros(C)
        for c in range(L):
            o = obs & (lev == c)

            def per_cell(a, o=o):
                return np.bincount(runs.cell, weights=np.where(o, a, 0.0).sum(1), minlength=C)

            n = per_cell(np.ones_like(u))
            rss, su, suu, jc = per_cell(e2), per_cell(u), per_cell(u * u), per_cell(jac)
            with np.errstate(invalid="ignore", divide="ignore"):
                s2 = np.maximum(rss / np.where(n > 0, n, 1), _floor(n, su, suu, qfloor))
                ll_c = np.where(n > 0, -0.5 * n * np.log(2 * np.pi * s2) - 0.5 * rss / s2 - jc, 0.0)
            total += ll_c
            short |= (n > 0) & (n <= VERIDICAL_K)
            n_all += n
            n_levels += n > 0
            if L == 1:
                sigma[:, j] = np.sqrt(s2)
        fit_ok = ok_cell & ~constant & ~short & (n_all > 0)
        ll[:, j] = np.where(fit_ok, total, np.nan)
        sigma[:, j] = np.where(fit_ok, sigma[:, j], np.nan)
        n_out[:, j] = n_all
        k_out = VERIDICAL_K * n_levels
    aic = 2 * k_out[:, None] - 2 * ll
    return VeridicalFit(cells[list(CELL_KEYS)].copy(), ll, aic, sigma, n_out, k_out)


def veridical_rows(trials: pd.DataFrame, rows: pd.DataFrame, lapse: bool = False) -> np.ndarray:
    """Veridical AICs ``(len(rows), 2)`` aligned with the rows of a fit batch."""
    if lapse or not len(rows):
        return np.full((len(rows), 2), np.nan)
    interleaved = None
    if "level" in rows.columns and len(rows.attrs.get("levels") or []) > 1:
        interleaved = str(rows["level"].iloc[0]).split("=", 1)[0]
    fit = veridical_fit(trials, interleaved)
    pos = {k: i for i, k in enumerate(fit.cells.itertuples(index=False, name=None))}
    idx = [pos[k] for k in rows[list(CELL_KEYS)].itertuples(index=False, name=None)]
    return fit.aic[idx]
