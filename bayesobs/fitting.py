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

Numerical care: stimuli and responses are centred by a per-cell constant
before moments are accumulated (every variant is shift-equivariant), and the
profiled variance has a floor of ``1e-12`` times the response variance so that
a perfect fit yields a large, finite log-likelihood instead of ``inf``.
"""

from __future__ import annotations

import json
import math
from typing import NamedTuple

import numpy as np
import pandas as pd
import scipy.sparse as sp

from .bootstrap import run_draws, unit_draws
from .observers.models import LOG_EPS_FRACTION
from .observers.variants import FACTORS, VARIANTS
from .trials import CELL_KEYS

LOG_RHO_GRID = np.arange(-18.0, 18.0 + 1e-9, 0.25)
GOLDEN_ITERATIONS = 32  # bracket 0.5 -> 1e-7 in log rho
VARIANCE_FLOOR = 1e-12
_PHI = (math.sqrt(5.0) - 1.0) / 2.0
_PARAMS = ("w", "b", "w_prior", "g", "delta", "rho", "sigma")
_V = {v.name: j for j, v in enumerate(VARIANTS)}
# Gram statistics of (z, zbar, 1, u) over observed trials.
_N, _SZ, _SZB, _SU, _SZZ, _SZZB, _SZBZB, _SZU, _SZBU, _SUU = range(10)


class RunTable(NamedTuple):
    """Trials as a padded ``(runs, T)`` array; each run is one session run."""

    x: np.ndarray  # stimuli, 0 where absent
    y: np.ndarray  # responses, NaN where missing or absent
    present: np.ndarray  # a trial exists at this position
    cell: np.ndarray  # (runs,) cell index
    session: np.ndarray  # (runs,) session key
    run: np.ndarray  # (runs,) run key


class FitBatch(NamedTuple):
    """Fits of every cell and bootstrap replicate.

    Arrays have shape ``(cells, 1 + B, 10)``; replicate 0 is the full data.
    ``params`` maps each parameter name to such an array (NaN where the
    parameter does not belong to the variant or the variant was skipped).
    """

    cells: pd.DataFrame
    loglik: np.ndarray
    aic: np.ndarray
    n: np.ndarray
    params: dict[str, np.ndarray]
    skipped: np.ndarray  # (cells, 10) reason string or ""


# ----------------------------------------------------------------- tables
def build_runs(trials: pd.DataFrame) -> tuple[pd.DataFrame, RunTable]:
    """Cells and the padded run table of a normalised trial table."""
    cell_id = trials.groupby(list(CELL_KEYS), sort=True).ngroup().to_numpy()
    run_id = trials.groupby(list(CELL_KEYS) + ["session", "run"], sort=True).ngroup().to_numpy()
    order = np.lexsort((trials["trial"].to_numpy(), run_id))
    run_id, cell_id = run_id[order], cell_id[order]
    x_all = trials["stimulus"].to_numpy(float)[order]
    y_all = trials["response"].to_numpy(float)[order]
    n_runs = run_id.max() + 1
    lengths = np.bincount(run_id, minlength=n_runs)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    pos = np.arange(len(run_id)) - starts[run_id]
    T = int(lengths.max())
    x = np.zeros((n_runs, T))
    y = np.full((n_runs, T), np.nan)
    present = np.zeros((n_runs, T), dtype=bool)
    x[run_id, pos] = x_all
    y[run_id, pos] = y_all
    present[run_id, pos] = True
    first = starts
    sess = trials["session"].to_numpy()[order][first]
    runk = trials["run"].to_numpy()[order][first]
    runs = RunTable(x, y, present, cell_id[first], sess, runk)
    cells = (
        trials[list(CELL_KEYS)]
        .drop_duplicates()
        .sort_values(list(CELL_KEYS))
        .reset_index(drop=True)
    )
    obs = present & ~np.isnan(y)
    cells["n_runs"] = np.bincount(runs.cell, minlength=len(cells))
    cells["n_trials"] = np.bincount(runs.cell, weights=lengths, minlength=len(cells)).astype(int)
    cells["n_missing"] = cells["n_trials"] - np.bincount(
        runs.cell, weights=obs.sum(1), minlength=len(cells)
    ).astype(int)
    xmax = np.full(len(cells), -np.inf)
    xmin = np.full(len(cells), np.inf)
    np.maximum.at(xmax, runs.cell, np.where(present, x, -np.inf).max(1))
    np.minimum.at(xmin, runs.cell, np.where(present, x, np.inf).min(1))
    eps = LOG_EPS_FRACTION * xmax
    ymin = np.full(len(cells), np.inf)
    np.minimum.at(ymin, runs.cell, np.where(obs, y, np.inf).min(1))
    cells["eps"] = eps
    reason = np.where(
        xmin <= 0,
        "log variants skipped: a stimulus <= 0",
        np.where(ymin <= -eps, "log variants skipped: a response <= -eps", ""),
    )
    cells["log_skipped"] = reason
    return cells, runs


def dataset_matrix(
    trials: pd.DataFrame,
    cells: pd.DataFrame,
    runs: RunTable,
    B: int,
    seed: int,
    resample: str = "pooled",
) -> sp.csr_matrix:
    """Sparse ``(cells * (1 + B), runs)`` matrix of run counts per dataset.

    Row ``c * (1 + B) + b`` is replicate ``b`` of cell ``c`` (``b = 0``: the
    full data, every run once).
    """
    draws = run_draws(trials, B, seed, resample) if B > 0 else {}
    return unit_draws(cells, runs.cell, runs.session, runs.run, draws, B)


# ------------------------------------------------------------ statistics
def _transformed(runs: RunTable, cells: pd.DataFrame, log: bool):
    """Centred ``z``, ``u`` (0 where not applicable), observed mask, Jacobian."""
    obs = runs.present & ~np.isnan(runs.y)
    eps = cells["eps"].to_numpy()[runs.cell][:, None]
    if log:
        ok = (cells["log_skipped"].to_numpy() == "")[runs.cell][:, None]
        with np.errstate(invalid="ignore", divide="ignore"):
            z = np.where(runs.present & ok, np.log(np.where(ok, runs.x + eps, 1.0)), 0.0)
            u = np.where(obs & ok, np.log(np.where(obs & ok, runs.y + eps, 1.0)), 0.0)
        jac = u  # log(y + eps), before centring
        jac_run = np.where(obs, jac, 0.0).sum(1)
    else:
        z = np.where(runs.present, runs.x, 0.0)
        u = np.where(obs, runs.y, 0.0)
        jac_run = np.zeros(len(z))
    # Per-cell centring constant: mean of z over all trials of the cell.
    n_cells = len(cells)
    tot = np.bincount(runs.cell, weights=z.sum(1), minlength=n_cells)
    cnt = np.bincount(runs.cell, weights=runs.present.sum(1), minlength=n_cells)
    centre = (tot / cnt)[runs.cell][:, None]
    z = np.where(runs.present, z - centre, 0.0)
    u = np.where(obs, u - centre, 0.0)
    return z, u, obs, jac_run, centre[:, 0]


def _gram(z, u, present, obs) -> np.ndarray:
    o = obs.astype(float)
    zb = z.sum(1) / present.sum(1)
    n = o.sum(1)
    sz = (o * z).sum(1)
    su = (o * u).sum(1)
    return np.stack(
        [
            n,
            sz,
            zb * n,
            su,
            (o * z * z).sum(1),
            zb * sz,
            zb * zb * n,
            (o * z * u).sum(1),
            zb * su,
            (o * u * u).sum(1),
        ],
        axis=1,
    )


def _kalman_moments(z, u, obs, rho):
    """``sum mu``, ``sum mu^2``, ``sum mu u`` over observed trials.

    ``z``, ``u``, ``obs``: time-major ``(T, R)`` arrays; ``rho`` broadcasts
    against ``(R,)`` (e.g. ``(C, 1)`` for a grid, or ``(R,)``, one per run).
    The gains are computed inside the recursion; ``rho = inf`` is replaced by
    ``1e300``, for which ``K_t = p / (p + 1)`` is exactly 1 in floating point.
    Returns three arrays of shape ``broadcast(rho, (R,))``.
    """
    rho = np.asarray(rho, dtype=float)
    r = np.where(np.isinf(rho), 1e300, rho)
    lead = np.broadcast_shapes(r.shape, z.shape[1:])
    T = z.shape[0]
    o = obs.astype(float)
    k = np.ones(lead)
    mu = np.broadcast_to(z[0], lead).copy()
    s1 = mu * o[0]
    s2 = mu * s1
    s3 = s1 * u[0]
    m = np.empty(lead)
    for t in range(1, T):
        k += r
        k /= k + 1.0
        np.subtract(z[t], mu, out=m)
        m *= k
        mu += m
        np.multiply(mu, o[t], out=m)
        s1 += m
        s3 += m * u[t]
        m *= mu
        s2 += m
    return s1, s2, s3


def _rss_kalman(G, s1, s2, s3):
    """RSS of ``kalman`` and ``kalman_gain`` given dataset moments.

    ``G``: dataset Gram stats broadcastable to ``s1``'s leading shape.
    """
    n, su, suu = G[..., _N], G[..., _SU], G[..., _SUU]
    rss_k = suu - 2 * s3 + s2
    with np.errstate(invalid="ignore", divide="ignore"):
        vmu = s2 - s1 * s1 / n
        cmu = s3 - s1 * su / n
        vu = suu - su * su / n
        g = np.where(vmu > 1e-14 * np.maximum(s2, 1e-300), cmu / vmu, 0.0)
    g = np.maximum(g, 0.0)
    rss_g = vu - 2 * g * cmu + g * g * vmu
    delta = (su - g * s1) / n
    return rss_k, rss_g, g, delta


def _closed_forms(G):
    """RSS and (centred) parameters of linear, static and static_gain."""
    n = G[:, _N]
    with np.errstate(invalid="ignore", divide="ignore"):
        mz, mzb, mu_ = G[:, _SZ] / n, G[:, _SZB] / n, G[:, _SU] / n
        vzz = G[:, _SZZ] - n * mz * mz
        vbb = G[:, _SZBZB] - n * mzb * mzb
        vzb = G[:, _SZZB] - n * mz * mzb
        czu = G[:, _SZU] - n * mz * mu_
        cbu = G[:, _SZBU] - n * mzb * mu_
        vu = G[:, _SUU] - n * mu_ * mu_
        tiny = 1e-13
        # linear
        w = np.where(vzz > tiny * G[:, _SZZ], czu / vzz, 0.0)
        rss_lin = vu - w * czu
        b = mu_ - w * mz
        # static: residual e = u - z regressed on d = zbar - z, no intercept
        sdd = G[:, _SZBZB] - 2 * G[:, _SZZB] + G[:, _SZZ]
        sde = G[:, _SZBU] - G[:, _SZZB] - G[:, _SZU] + G[:, _SZZ]
        see = G[:, _SUU] - 2 * G[:, _SZU] + G[:, _SZZ]
        om = np.where(sdd > tiny * (G[:, _SZZ] + G[:, _SZBZB]), sde / sdd, 0.0)
        om = np.clip(om, 0.0, 1.0)
        rss_st = see - 2 * om * sde + om * om * sdd

        # static_gain: min over faces of {a >= 0, c >= 0}
        def rss(a, c):
            return vu - 2 * (a * czu + c * cbu) + a * a * vzz + 2 * a * c * vzb + c * c * vbb

        det = vzz * vbb - vzb * vzb
        full_ok = det > 1e-10 * vzz * vbb
        a_f = np.where(full_ok, (vbb * czu - vzb * cbu) / det, 0.0)
        c_f = np.where(full_ok, (vzz * cbu - vzb * czu) / det, 0.0)
        full_ok &= (a_f >= 0) & (c_f >= 0)
        a_1 = np.where(vzz > tiny * G[:, _SZZ], np.maximum(czu / vzz, 0.0), 0.0)
        c_2 = np.where(vbb > tiny * G[:, _SZBZB], np.maximum(cbu / vbb, 0.0), 0.0)
        cands = np.stack(
            [np.where(full_ok, rss(a_f, c_f), np.inf), rss(a_1, 0.0), rss(0.0, c_2)], axis=1
        )
        pick = np.argmin(cands, axis=1)
        a = np.choose(pick, [a_f, a_1, np.zeros_like(a_1)])
        c = np.choose(pick, [c_f, np.zeros_like(c_2), c_2])
        rss_sg = cands[np.arange(len(pick)), pick]
        g = a + c
        om_g = np.where(g > 0, c / np.where(g > 0, g, 1.0), 0.0)  # g = 0: unidentified, report 0
        d_sg = mu_ - a * mz - c * mzb
    return {
        "linear": (rss_lin, {"w": w, "b": b}),
        "static": (rss_st, {"w_prior": om}),
        "static_gain": (rss_sg, {"w_prior": om_g, "g": g, "delta": d_sg}),
    }


def _golden(evaluate, lo, hi, iterations=GOLDEN_ITERATIONS):
    """Vectorised golden-section minimisation of ``evaluate(theta)`` on [lo, hi]."""
    x1 = hi - _PHI * (hi - lo)
    x2 = lo + _PHI * (hi - lo)
    f1, f2 = evaluate(x1), evaluate(x2)
    for _ in range(iterations):
        left = f1 < f2  # minimum in [lo, x2]
        hi = np.where(left, x2, hi)
        lo = np.where(left, lo, x1)
        xn = np.where(left, hi - _PHI * (hi - lo), lo + _PHI * (hi - lo))
        fn = evaluate(xn)
        x2, f2, x1, f1 = (
            np.where(left, x1, xn),
            np.where(left, f1, fn),
            np.where(left, xn, x2),
            np.where(left, fn, f2),
        )
    best = f1 <= f2
    return np.where(best, x1, x2), np.where(best, f1, f2)


def _fit_kalman(W, Gd, z, u, obs):
    """Profiled fits of ``kalman`` and ``kalman_gain`` for every dataset.

    ``z``, ``u``, ``obs`` are time-major ``(T, runs)``.
    """
    theta = np.concatenate([[-np.inf], LOG_RHO_GRID, [np.inf]])
    s1, s2, s3 = _kalman_moments(z, u, obs, np.exp(theta)[:, None])  # (C, R)
    agg = [(W @ s.T) for s in (s1, s2, s3)]  # (D, C)
    rss_k, rss_g, _, _ = _rss_kalman(Gd[:, None, :], *agg)
    D = W.shape[0]
    coo = W.tocoo()
    d_p, r_p, w_p = coo.row, coo.col, coo.data
    # (dataset, run) pairs, twice: row 0 for kalman, row 1 for kalman_gain
    zp, up, op = z[:, r_p], u[:, r_p], obs[:, r_p]
    zp, up, op = (np.concatenate([a, a], axis=1) for a in (zp, up, op))
    P = len(d_p)

    def moments_at(th):  # th: (2, D) -> moments (2, D) each
        m = _kalman_moments(zp, up, op, np.exp(th[:, d_p]).reshape(-1))
        return [
            np.stack(
                [
                    np.bincount(d_p, weights=w_p * mm[j * P : (j + 1) * P], minlength=D)
                    for j in (0, 1)
                ]
            )
            for mm in m
        ]

    def evaluate(th):
        rk, rg, _, _ = _rss_kalman(Gd, *moments_at(th))
        return np.stack([rk[0], rg[1]])

    grids = np.stack([rss_k, rss_g])  # (2, D, C)
    i = np.argmin(np.where(np.isnan(grids), np.inf, grids), axis=2)  # (2, D)
    best_theta = theta[i]
    best_rss = np.take_along_axis(grids, i[..., None], axis=2)[..., 0]
    interior = (i > 0) & (i < len(theta) - 1)
    lo = theta[np.clip(i - 1, 1, len(theta) - 2)]
    hi = theta[np.clip(i + 1, 1, len(theta) - 2)]
    if interior.any():
        th_r, f_r = _golden(evaluate, lo, hi)
        better = interior & (f_r < best_rss)
        best_theta = np.where(better, th_r, best_theta)
    rk, rg, g, delta = _rss_kalman(Gd, *moments_at(best_theta))
    return {
        "kalman": (rk[0], {"rho": np.exp(best_theta[0])}),
        "kalman_gain": (rg[1], {"rho": np.exp(best_theta[1]), "g": g[1], "delta": delta[1]}),
    }


def _fit_chunk(W, runs: RunTable, cells: pd.DataFrame, B: int):
    """Log-likelihoods and parameters of every variant for one chunk."""
    D = W.shape[0]
    cell_of = np.repeat(np.arange(len(cells)), 1 + B)
    ll = np.full((D, len(VARIANTS)), np.nan)
    n_out = np.zeros(D)
    par = {p: np.full((D, len(VARIANTS)), np.nan) for p in _PARAMS}
    for log in (False, True):
        z, u, obs, jac_run, centre_run = _transformed(runs, cells, log)
        G = _gram(z, u, runs.present, obs)
        Gd = np.asarray(W @ G)
        jac = np.asarray(W @ jac_run)
        # cell centring constant, per dataset
        centre_cell = np.zeros(len(cells))
        centre_cell[runs.cell] = centre_run
        centre = centre_cell[cell_of]
        n = Gd[:, _N]
        n_out = n
        vu = Gd[:, _SUU] - Gd[:, _SU] ** 2 / np.where(n > 0, n, 1)
        floor = VARIANCE_FLOOR * np.maximum(vu / np.where(n > 0, n, 1), 1e-300)
        results = _closed_forms(Gd)
        results.update(_fit_kalman(W, Gd, z.T.copy(), u.T.copy(), obs.T.copy()))
        ok_cell = (cells["log_skipped"].to_numpy() == "") if log else np.ones(len(cells), bool)
        ok = ok_cell[cell_of]
        for v_j, v in enumerate(VARIANTS):
            if v.log != log:
                continue
            base = v.family if v.family == "linear" else v.family + ("_gain" if v.gain else "")
            rss, p = results[base]
            with np.errstate(invalid="ignore", divide="ignore"):
                s2 = np.maximum(rss / n, floor)
                loglik = -0.5 * n * np.log(2 * np.pi * s2) - 0.5 * rss / s2 - jac
            fit_ok = ok & (n > v.k)
            ll[:, v_j] = np.where(fit_ok, loglik, np.nan)
            par["sigma"][:, v_j] = np.where(fit_ok, np.sqrt(s2), np.nan)
            for name, val in p.items():
                if name in ("b", "delta"):  # undo the centring
                    slope = p["w"] if name == "b" else p["g"]
                    val = val + centre * (1.0 - slope)
                par[name][:, v_j] = np.where(fit_ok, val, np.nan)
    return ll, n_out, par


# ------------------------------------------------------------------ public
def fit_batch(
    trials: pd.DataFrame,
    bootstrap: int = 0,
    seed: int = 0,
    progress: bool = False,
    max_chunk_pairs: int = 200_000,
    resample: str = "pooled",
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
    resample : {"pooled", "stratified"}
        Bootstrap scheme (:func:`bayesobs.bootstrap.run_draws`).

    Returns
    -------
    FitBatch
    """
    if bootstrap < 0:
        raise ValueError("bootstrap must be >= 0")
    cells, runs = build_runs(trials)
    B = int(bootstrap)
    W = dataset_matrix(trials, cells, runs, B, seed, resample)
    n_cells = len(cells)
    V = len(VARIANTS)
    ll = np.full((n_cells, 1 + B, V), np.nan)
    n = np.zeros((n_cells, 1 + B, V))
    params = {p: np.full((n_cells, 1 + B, V), np.nan) for p in _PARAMS}
    runs_per_cell = cells["n_runs"].to_numpy()
    step = max(1, int(max_chunk_pairs // max(1, (1 + B) * runs_per_cell.max())))
    chunks = [np.arange(s, min(s + step, n_cells)) for s in range(0, n_cells, step)]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=n_cells * (1 + B), unit="fit", desc="fitting cells x replicates")
    run_start = np.concatenate([[0], np.cumsum(runs_per_cell)])
    for idx in chunks:
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
        c_ll, c_n, c_par = _fit_chunk(sub_W, sub_runs, sub_cells, B)
        ll[idx] = c_ll.reshape(len(idx), 1 + B, V)
        n[idx] = c_n.reshape(len(idx), 1 + B, 1)
        for p in _PARAMS:
            params[p][idx] = c_par[p].reshape(len(idx), 1 + B, V)
        if bar is not None:
            bar.update(len(idx) * (1 + B))
    if bar is not None:
        bar.close()
    k = np.array([v.k for v in VARIANTS], dtype=float)
    aic = 2 * k - 2 * ll
    skipped = np.full((n_cells, V), "", dtype=object)
    for j, v in enumerate(VARIANTS):
        if v.log:
            skipped[:, j] = cells["log_skipped"].to_numpy()
        few = (n[:, 0, j] <= v.k) & (skipped[:, j] == "")
        skipped[few, j] = f"skipped: {v.k + 1} or more observed responses needed"
    return FitBatch(cells, ll, aic, n, params, skipped)


def fits_table(batch: FitBatch) -> pd.DataFrame:
    """``fits.csv`` rows (DESIGN contract) of the full-data fits."""
    rows = []
    cells = batch.cells
    for c in range(len(cells)):
        key = {k: cells[k].iat[c] for k in CELL_KEYS}
        for j, v in enumerate(VARIANTS):
            if batch.skipped[c, j]:
                params = {"skipped": batch.skipped[c, j]}
            else:
                params = {p: float(batch.params[p][c, 0, j]) for p in v.param_names}
            rows.append(
                {
                    **key,
                    "variant": v.name,
                    **{f: bool(getattr(v, f)) for f in FACTORS},
                    "n": int(batch.n[c, 0, j]),
                    "k": v.k,
                    "loglik": batch.loglik[c, 0, j],
                    "aic": batch.aic[c, 0, j],
                    "params": json.dumps(params),
                }
            )
    return pd.DataFrame(rows)
