"""Batched, exact maximum-likelihood fits of the ten observer variants.

How the global maximum is found (METHOD §2):

* ``sigma`` is profiled out (``sigma^2 = RSS / n``), so each fit minimises a
  residual sum of squares.
* ``linear`` and ``static`` have closed forms (``w_prior`` clipped to [0, 1]);
  ``static_gain`` is least squares on ``(z, zbar_r, 1)`` with non-negative
  coefficients on ``z`` and ``zbar_r``, solved exactly by enumerating the
  faces of that convex problem.
* The Kalman variants reduce to a 1-D search over ``log rho`` (``g`` and
  ``delta`` in closed form inside): a grid over ``log rho`` in [-18, 18]
  together with the two limits ``rho = 0`` and ``rho = inf``, then a
  golden-section search inside the bracket of the best grid point.

Why it is fast: every quantity above is a sum over trials, and sums are
additive over session runs.  Statistics are computed once per *unique* run and
a dataset (a cell, or one bootstrap replicate of it) is a count-weighted sum of
its runs' statistics, a sparse matrix product.  Only the golden-section
refinement touches per-replicate Kalman recursions.

With an interleaved column (METHOD §10) the Kalman variants have one
``rho_c`` per level: a grid over ``[-18, 18]^L``, then a joint projected
Newton refinement of the grid's best local minima (:func:`bayesobs.fits.levels.newton_levels`).

Numerical care: stimuli and responses are centred by a per-cell constant
before moments are accumulated (every variant is shift-equivariant), and the
profiled variance has a floor of ``1e-12`` times the response variance so that
a perfect fit yields a large, finite log-likelihood instead of ``inf``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..distributed import map_tasks, scheduler_address
from .fitoptions import FitOptions, fit_options
from .fitresults import FitBatch, collapse_levels, decode_params, encode_params, fits_table
from .kernel import (
    G_N,
    VARIANCE_FLOOR,
    closed_forms,
    fit_kalman,
    gram_stats,
    profiled_loglik,
    quantum_floor,
    transformed,
    variance_floor,
)
from .lapse import LevelPairs, Pairs, fit_lapse, fit_lapse_levels
from .levels import fit_kalman_levels, level_grid
from .observers.variants import VARIANTS
from .runtable import RunTable, build_runs, dataset_matrix, interleaved_levels, response_quantum

__all__ = [
    "CONSTANT_REASON",
    "VARIANCE_FLOOR",
    "FitBatch",
    "RunTable",
    "build_runs",
    "collapse_levels",
    "dataset_matrix",
    "decode_params",
    "encode_params",
    "fit_batch",
    "fits_table",
    "interleaved_levels",
    "quantum_floor",
    "response_quantum",
]

CONSTANT_REASON = "constant responses"


MAX_CHUNK_RUNS = 12_000  # runs per chunk: the Kalman grid moments take ~7 kB per run


_PARAMS = ("w", "b", "w_prior", "g", "delta", "rho", "sigma", "lapse")


def _fit_chunk_levels(W, runs: RunTable, cells: pd.DataFrame, B: int, L: int, lapse=False):
    """Joint log-likelihoods and per-level parameters (METHOD §10) for one chunk."""
    D = W.shape[0]
    V = len(VARIANTS)
    cell_of = np.repeat(np.arange(len(cells)), 1 + B)
    ll = np.full((D, V), np.nan)
    few = np.zeros((D, V), dtype=bool)
    par = {p: np.full((D, V, L), np.nan) for p in _PARAMS}
    n_level = np.zeros((D, L))
    for log in (False, True):
        z, u, obs, _, centre_run = transformed(runs, cells, log)
        centre_cell = np.zeros(len(cells))
        centre_cell[runs.cell] = centre_run
        centre = centre_cell[cell_of]
        qfloor = quantum_floor(cells, log)[cell_of]
        Gds, jacs, floors, results = [], [], [], []
        for c in range(L):
            oc = obs & (runs.level == c)
            G = gram_stats(z, np.where(oc, u, 0.0), runs.present, oc)
            Gd = np.asarray(W @ G)
            jac_trial = np.where(oc, u + centre_run[:, None], 0.0) if log else np.zeros_like(u)
            jacs.append(np.asarray(W @ jac_trial.sum(1)))
            floors.append(variance_floor(Gd, qfloor))
            Gds.append(Gd)
            results.append(closed_forms(Gd))
        Gds, jacs, floors = np.stack(Gds), np.stack(jacs), np.stack(floors)
        n = Gds[..., G_N]  # (L, D)
        n_level = n.T
        kal = fit_kalman_levels(
            W, Gds, floors, z.T.copy(), u.T.copy(), obs.T.copy(), runs.level.T.copy(), L
        )
        ok_cell = (cells["log_skipped"].to_numpy() == "") if log else np.ones(len(cells), bool)
        ok = (ok_cell & ~cells["constant"].to_numpy(bool))[cell_of]
        for v_j, v in enumerate(VARIANTS):
            if v.log != log:
                continue
            base = v.family if v.family == "linear" else v.family + ("_gain" if v.gain else "")
            if v.family == "kalman":
                rss, p = kal[base]
            else:
                rss = np.stack([results[c][base][0] for c in range(L)])
                p = {
                    k: np.stack([results[c][base][1][k] for c in range(L)])
                    for k in results[0][base][1]
                }
            s2, ll_c = profiled_loglik(rss, n, floors, jacs)
            ll_c = np.where(n > 0, ll_c, 0.0)
            short = ((n > 0) & (n <= v.k)).any(axis=0)
            few[:, v_j] = short
            fit_ok = ok & ~short & (n.sum(0) > 0)
            ll[:, v_j] = np.where(fit_ok, ll_c.sum(0), np.nan)
            present = fit_ok[None, :] & (n > 0)
            par["sigma"][:, v_j] = np.where(present, np.sqrt(s2), np.nan).T
            for name, val in p.items():
                if name in ("b", "delta"):  # undo the centring
                    slope = p["w"] if name == "b" else p["g"]
                    val = val + centre[None, :] * (1.0 - slope)
                par[name][:, v_j] = np.where(present, val, np.nan).T
        if lapse:
            jac_trial = np.where(obs, u + centre_run[:, None], 0.0) if log else np.zeros_like(u)
            _lapse_levels(
                W, runs, cells, B, L, log, (z, u, obs, jac_trial, floors, centre), ll, par
            )
    return ll, n_level.sum(1), n_level, par, few


def _lapse_levels(W, runs: RunTable, cells, B, L, log, arrays, ll, par) -> None:
    """Refit the variants of one transform with a lapse rate (METHOD §10 with §11), in place."""
    z, u, obs, jac_trial, floors, centre = arrays
    D = W.shape[0]
    pairs = LevelPairs(
        W,
        z,
        u,
        obs,
        runs.present,
        jac_trial,
        _lapse_uniform(runs, cells, B),
        floors,
        D,
        runs.level,
        L,
    )
    for v_j, v in enumerate(VARIANTS):
        if v.log != log:
            continue
        ok = ~np.isnan(ll[:, v_j])
        present = ~np.isnan(par["sigma"][:, v_j])  # (D, L)
        par["lapse"][:, v_j] = np.where(present, 0.0, np.nan)
        if not ok.any():
            continue
        with np.errstate(divide="ignore"):
            log_rho0 = np.log(np.nan_to_num(par["rho"][:, v_j], nan=1.0))  # (D, L)
        lam_ll, state, lam = fit_lapse_levels(v, pairs, log_rho0)
        better = ok & (lam_ll > ll[:, v_j])
        sel = better[:, None] & present
        ll[:, v_j] = np.where(better, lam_ll, ll[:, v_j])
        par["lapse"][:, v_j] = np.where(sel, lam[:, None], par["lapse"][:, v_j])
        for name in v.param_names:
            if name == "rho":
                val = np.exp(state["log_rho"])  # (D, L)
            else:
                val = state[name].T  # (D, L)
                if name in ("b", "delta"):  # undo the centring
                    slope = state["w" if name == "b" else "g"].T
                    val = val + centre[:, None] * (1.0 - slope)
            par[name][:, v_j] = np.where(sel, val, par[name][:, v_j])


def _lapse_uniform(runs: RunTable, cells, B) -> np.ndarray:
    """``1 / (y_max - y_min)`` of every dataset's cell (observed responses; 0 if constant)."""
    cell_of = np.repeat(np.arange(len(cells)), 1 + B)
    obs_all = runs.present & ~np.isnan(runs.y)
    ymin = np.full(len(cells), np.inf)
    ymax = np.full(len(cells), -np.inf)
    np.minimum.at(ymin, runs.cell, np.where(obs_all, runs.y, np.inf).min(1))
    np.maximum.at(ymax, runs.cell, np.where(obs_all, runs.y, -np.inf).max(1))
    with np.errstate(divide="ignore"):
        uniform = 1.0 / (ymax - ymin)
    return np.where(np.isfinite(uniform), uniform, 0.0)[cell_of]


def _fit_chunk(W, runs: RunTable, cells: pd.DataFrame, B: int):
    """Log-likelihoods and parameters of every variant for one chunk."""
    D = W.shape[0]
    cell_of = np.repeat(np.arange(len(cells)), 1 + B)
    ll = np.full((D, len(VARIANTS)), np.nan)
    n_out = np.zeros(D)
    par = {p: np.full((D, len(VARIANTS)), np.nan) for p in _PARAMS}
    for log in (False, True):
        z, u, obs, jac_run, centre_run = transformed(runs, cells, log)
        Gd = np.asarray(W @ gram_stats(z, u, runs.present, obs))
        jac = np.asarray(W @ jac_run)
        # cell centring constant, per dataset
        centre_cell = np.zeros(len(cells))
        centre_cell[runs.cell] = centre_run
        centre = centre_cell[cell_of]
        n = Gd[:, G_N]
        n_out = n
        floor = variance_floor(Gd, quantum_floor(cells, log)[cell_of])
        results = closed_forms(Gd)
        results.update(fit_kalman(W, Gd, z.T.copy(), u.T.copy(), obs.T.copy()))
        ok_cell = (cells["log_skipped"].to_numpy() == "") if log else np.ones(len(cells), bool)
        ok_cell = ok_cell & ~cells["constant"].to_numpy(bool)
        ok = ok_cell[cell_of]
        for v_j, v in enumerate(VARIANTS):
            if v.log != log:
                continue
            base = v.family if v.family == "linear" else v.family + ("_gain" if v.gain else "")
            rss, p = results[base]
            s2, loglik = profiled_loglik(rss, n, floor, jac)
            fit_ok = ok & (n > v.k)
            ll[:, v_j] = np.where(fit_ok, loglik, np.nan)
            par["sigma"][:, v_j] = np.where(fit_ok, np.sqrt(s2), np.nan)
            for name, val in p.items():
                if name in ("b", "delta"):  # undo the centring
                    slope = p["w"] if name == "b" else p["g"]
                    val = val + centre * (1.0 - slope)
                par[name][:, v_j] = np.where(fit_ok, val, np.nan)
    return ll, n_out, par


def _fit_chunk_task(args):
    """One chunk of :func:`fit_batch` (here, or on a Dask worker)."""
    W, runs, cells, B, lapse = args
    c_ll, c_n, c_par = _fit_chunk(W, runs, cells, B)
    if lapse:
        _lapse_chunk(W, runs, cells, B, c_ll, c_par)
    return c_ll, c_n, c_par


def _lapse_chunk(W, runs: RunTable, cells: pd.DataFrame, B: int, ll, par) -> None:
    """Refit every variant with a lapse rate (METHOD §11), in place of ``ll``/``par``."""
    D = W.shape[0]
    cell_of = np.repeat(np.arange(len(cells)), 1 + B)
    uniform = _lapse_uniform(runs, cells, B)
    par["lapse"][:] = np.where(np.isnan(ll), np.nan, 0.0)
    for log in (False, True):
        z, u, obs, _, centre_run = transformed(runs, cells, log)
        jac_trial = np.where(obs, u + centre_run[:, None], 0.0) if log else np.zeros_like(u)
        G = np.asarray(W @ gram_stats(z, u, runs.present, obs))
        floor = variance_floor(G, quantum_floor(cells, log)[cell_of])
        pairs = Pairs(W, z, u, obs, runs.present, jac_trial, uniform, floor, D)
        centre_cell = np.zeros(len(cells))
        centre_cell[runs.cell] = centre_run
        centre = centre_cell[cell_of]
        for v_j, v in enumerate(VARIANTS):
            if v.log != log:
                continue
            ok = ~np.isnan(ll[:, v_j])
            if not ok.any():
                continue
            with np.errstate(divide="ignore"):
                log_rho0 = np.log(np.nan_to_num(par["rho"][:, v_j], nan=1.0))
            lam_ll, state, lam = fit_lapse(v, pairs, log_rho0)
            better = ok & (lam_ll > ll[:, v_j])
            ll[:, v_j] = np.where(better, lam_ll, ll[:, v_j])
            par["lapse"][:, v_j] = np.where(better, lam, par["lapse"][:, v_j])
            for name in v.param_names:
                val = np.exp(state["log_rho"]) if name == "rho" else state[name]
                if name in ("b", "delta"):  # undo the centring
                    slope = state["w"] if name == "b" else state["g"]
                    val = val + centre * (1.0 - slope)
                par[name][:, v_j] = np.where(better, val, par[name][:, v_j])


# ------------------------------------------------------------------ public
def fit_batch(
    trials: pd.DataFrame,
    bootstrap: int = 0,
    seed: int = 0,
    progress: bool = False,
    max_chunk_pairs: int = 200_000,
    interleaved: str | None = None,
    lapse: bool = False,
    resample: str = "pooled",
    options: FitOptions | None = None,
) -> FitBatch:
    """Fit all ten variants to every cell and ``bootstrap`` replicates of it.

    Parameters
    ----------
    trials : DataFrame
        A normalised trial table (:func:`bayesobs.trials.normalize_trials`).
    bootstrap : int
        Number of session-run bootstrap replicates (METHOD §7).
    seed : int
        Seed of the bootstrap draws.
    progress : bool
        Show a progress bar.
    max_chunk_pairs : int
        Memory bound: (dataset, run) pairs processed at once.
    interleaved : str, optional
        A column whose level changes trial by trial inside a run (METHOD §10):
        cells are formed without it, the observer sees every trial of the run,
        and each level gets its own parameters and noise.  Rows of the result
        are then (cell, level) pairs.
    lapse : bool
        Add a uniform lapse rate ``lambda`` in [0, 0.2] to every variant
        (METHOD §11), fitted by EM; ``k`` grows by one and ``params`` gain
        ``lapse``.
    resample : {"pooled", "stratified"}
        Bootstrap scheme (:func:`bayesobs.bootstrap.run_draws`).
    options : FitOptions, optional
        All of ``bootstrap``, ``seed``, ``progress``, ``interleaved``,
        ``lapse`` and ``resample`` at once (checked once); when given, those
        keywords are not read.

    Returns
    -------
    FitBatch
    """
    opts = fit_options(
        options,
        bootstrap=bootstrap,
        seed=seed,
        progress=progress,
        interleaved=interleaved,
        lapse=lapse,
        resample=resample,
    )
    bootstrap, seed, progress = opts.bootstrap, opts.seed, opts.progress
    interleaved, lapse, resample = opts.interleaved, opts.lapse, opts.resample
    cells, runs = build_runs(trials, interleaved)
    levels = cells.attrs["levels"]
    if interleaved is not None and len(levels) > 1:
        return _fit_batch_levels(
            trials, cells, runs, int(bootstrap), seed, progress, levels, resample, lapse
        )
    B = int(bootstrap)
    W = dataset_matrix(trials, cells, runs, B, seed, resample)
    n_cells = len(cells)
    V = len(VARIANTS)
    ll = np.full((n_cells, 1 + B, V), np.nan)
    n = np.zeros((n_cells, 1 + B, V))
    params = {p: np.full((n_cells, 1 + B, V), np.nan) for p in _PARAMS}
    runs_per_cell = cells["n_runs"].to_numpy()
    step = max(1, int(max_chunk_pairs // max(1, (1 + B) * runs_per_cell.max())))
    # the log-rho grid holds (grid points x runs) moments: bound the runs of a chunk too
    step = min(step, max(1, int(MAX_CHUNK_RUNS // max(1, runs_per_cell.max()))))

    remote = scheduler_address() is not None
    if remote:  # a Dask cluster: at least 8 tasks (every dataset is fitted on its own)
        step = min(step, max(1, -(-n_cells // 8)))
    chunks = [np.arange(s, min(s + step, n_cells)) for s in range(0, n_cells, step)]
    bar = None
    if progress:
        from tqdm.auto import tqdm  # start-up time: loaded only when a bar is shown

        bar = tqdm(total=n_cells * (1 + B), unit="fit", desc="fitting cells x replicates")
    run_start = np.concatenate([[0], np.cumsum(runs_per_cell)])

    def task(idx):
        r0, r1 = run_start[idx[0]], run_start[idx[-1] + 1]
        sub_runs = RunTable(
            runs.x[r0:r1],
            runs.y[r0:r1],
            runs.present[r0:r1],
            runs.cell[r0:r1] - idx[0],
            runs.session[r0:r1],
            runs.run[r0:r1],
        )
        # trim padding to this chunk's longest run
        T = int(sub_runs.present.sum(1).max())
        sub_runs = sub_runs._replace(
            x=sub_runs.x[:, :T], y=sub_runs.y[:, :T], present=sub_runs.present[:, :T]
        )
        sub_W = W[idx[0] * (1 + B) : (idx[-1] + 1) * (1 + B), r0:r1]
        sub_cells = cells.iloc[idx].reset_index(drop=True)
        return sub_W, sub_runs, sub_cells, B, lapse

    if remote:
        outs = map_tasks(_fit_chunk_task, [task(idx) for idx in chunks])
    else:
        outs = (_fit_chunk_task(task(idx)) for idx in chunks)
    for idx, (c_ll, c_n, c_par) in zip(chunks, outs, strict=True):
        ll[idx] = c_ll.reshape(len(idx), 1 + B, V)
        n[idx] = c_n.reshape(len(idx), 1 + B, 1)
        for p in _PARAMS:
            params[p][idx] = c_par[p].reshape(len(idx), 1 + B, V)
        if bar is not None:
            bar.update(len(idx) * (1 + B))
    if bar is not None:
        bar.close()
    k = np.array([v.k for v in VARIANTS], dtype=float) + (1 if lapse else 0)
    aic = 2 * k - 2 * ll
    skipped = np.full((n_cells, V), "", dtype=object)
    constant = cells["constant"].to_numpy(bool)
    for j, v in enumerate(VARIANTS):
        if v.log:
            skipped[:, j] = cells["log_skipped"].to_numpy()
        few = (n[:, 0, j] <= v.k) & (skipped[:, j] == "")
        skipped[few, j] = f"skipped: {v.k + 1} or more observed responses needed"
        skipped[constant, j] = CONSTANT_REASON
    if interleaved is not None:  # one level only: §10 is exactly §2
        cells = cells.assign(level=levels[0], n_level=n[:, 0, 0].astype(int))
    k_rows = np.broadcast_to(k, (n_cells, V)).copy() if lapse else None
    return FitBatch(cells, ll, aic, n, params, skipped, k_rows)


def _fit_batch_levels(
    trials, cells, runs, B, seed, progress, levels, resample, lapse=False
) -> FitBatch:
    """:func:`fit_batch` with an interleaved column of two or more levels."""
    L = len(levels)
    W = dataset_matrix(trials, cells, runs, B, seed, resample)
    n_cells, V = len(cells), len(VARIANTS)
    ll = np.full((n_cells, 1 + B, V), np.nan)
    n = np.zeros((n_cells, 1 + B))
    n_level = np.zeros((n_cells, 1 + B, L))
    few = np.zeros((n_cells, V), dtype=bool)
    params = {p: np.full((n_cells, 1 + B, V, L), np.nan) for p in _PARAMS}
    runs_per_cell = cells["n_runs"].to_numpy()
    q = len(level_grid(L))
    step = max(1, int(2_000_000 // (q * (1 + B) * runs_per_cell.max())))
    run_start = np.concatenate([[0], np.cumsum(runs_per_cell)])
    bar = None
    if progress:
        from tqdm.auto import tqdm  # start-up time: loaded only when a bar is shown

        bar = tqdm(total=n_cells * (1 + B), unit="fit", desc="fitting cells x replicates")
    for s0 in range(0, n_cells, step):
        idx = np.arange(s0, min(s0 + step, n_cells))
        r0, r1 = run_start[idx[0]], run_start[idx[-1] + 1]
        T = int(runs.present[r0:r1].sum(1).max())
        sub_runs = RunTable(
            runs.x[r0:r1, :T],
            runs.y[r0:r1, :T],
            runs.present[r0:r1, :T],
            runs.cell[r0:r1] - idx[0],
            runs.session[r0:r1],
            runs.run[r0:r1],
            runs.level[r0:r1, :T],
        )
        sub_W = W[idx[0] * (1 + B) : (idx[-1] + 1) * (1 + B), r0:r1]
        sub_cells = cells.iloc[idx].reset_index(drop=True)
        c_ll, c_n, c_nl, c_par, c_few = _fit_chunk_levels(sub_W, sub_runs, sub_cells, B, L, lapse)
        ll[idx] = c_ll.reshape(len(idx), 1 + B, V)
        n[idx] = c_n.reshape(len(idx), 1 + B)
        n_level[idx] = c_nl.reshape(len(idx), 1 + B, L)
        few[idx] = c_few.reshape(len(idx), 1 + B, V)[:, 0]
        for p in _PARAMS:
            params[p][idx] = c_par[p].reshape(len(idx), 1 + B, V, L)
        if bar is not None:
            bar.update(len(idx) * (1 + B))
    if bar is not None:
        bar.close()
    # one row per (cell, level present in the cell's data)
    cell_rows, level_rows = np.nonzero(n_level[:, 0, :] > 0)
    n_present = (n_level[:, 0, :] > 0).sum(1)
    k_variant = np.array([v.k for v in VARIANTS], dtype=float)
    # one lapse rate per cell, whatever the level (METHOD §10 with §11)
    k = k_variant[None, :] * n_present[cell_rows, None] + (1 if lapse else 0)
    ll_rows = ll[cell_rows]
    aic = 2 * k[:, None, :] - 2 * ll_rows
    skipped = np.full((len(cell_rows), V), "", dtype=object)
    constant = cells["constant"].to_numpy(bool)[cell_rows]
    for j, v in enumerate(VARIANTS):
        if v.log:
            skipped[:, j] = cells["log_skipped"].to_numpy()[cell_rows]
        short = few[cell_rows, j] & (skipped[:, j] == "")
        skipped[short, j] = f"skipped: {v.k + 1} or more observed responses per level needed"
        skipped[constant, j] = CONSTANT_REASON
    rows = cells.iloc[cell_rows].reset_index(drop=True)
    rows["level"] = [levels[i] for i in level_rows]
    rows["n_level"] = n_level[cell_rows, 0, level_rows].astype(int)
    rows.attrs["levels"] = levels
    out_params = {p: params[p][cell_rows, :, :, level_rows] for p in _PARAMS}
    n_rows = np.repeat(n[cell_rows][:, :, None], V, axis=2)
    return FitBatch(rows, ll_rows, aic, n_rows, out_params, skipped, k)
