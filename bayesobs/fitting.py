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
Newton refinement of the grid's best local minima (:func:`newton_levels`).

Numerical care: stimuli and responses are centred by a per-cell constant
before moments are accumulated (every variant is shift-equivariant), and the
profiled variance has a floor of ``1e-12`` times the response variance so that
a perfect fit yields a large, finite log-likelihood instead of ``inf``.
"""

from __future__ import annotations

import json
import math
import os
from typing import NamedTuple

import numpy as np
import pandas as pd
import scipy.sparse as sp

from .bootstrap import run_draws, unit_draws
from .observers.models import LOG_EPS_FRACTION
from .observers.scale import cell_moments, model_scale
from .observers.variants import FACTORS, VARIANTS
from .trials import CELL_KEYS

LOG_RHO_GRID = np.arange(-18.0, 18.0 + 1e-9, 0.25)
GOLDEN_ITERATIONS = 32  # bracket 0.5 -> 1e-7 in log rho
VARIANCE_FLOOR = 1e-12
CONSTANT_REASON = "constant responses"
MAX_CHUNK_RUNS = 12_000  # runs per chunk: the Kalman grid moments take ~7 kB per run
_PHI = (math.sqrt(5.0) - 1.0) / 2.0
_PARAMS = ("w", "b", "w_prior", "g", "delta", "rho", "sigma", "lapse")
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
    level: np.ndarray | None = None  # (runs, T) level code of an interleaved column, or None


class FitBatch(NamedTuple):
    """Fits of every cell and bootstrap replicate.

    Arrays have shape ``(rows, 1 + B, 10)``; replicate 0 is the full data.
    A row is a cell, or with an interleaved column (METHOD §10) one level of
    a cell: ``cells`` then has a ``level`` column (``COL=value``), ``params``
    hold that level's parameters and ``loglik``, ``aic``, ``n`` and ``k`` are
    those of the joint fit, repeated on each level's row.  ``params`` maps
    each parameter name to such an array (NaN where the parameter does not
    belong to the variant or the variant was skipped).
    """

    cells: pd.DataFrame
    loglik: np.ndarray
    aic: np.ndarray
    n: np.ndarray
    params: dict[str, np.ndarray]
    skipped: np.ndarray  # (rows, 10) reason string or ""
    k: np.ndarray | None = None  # (rows, 10) free parameters; None: the variants' own k


# ----------------------------------------------------------------- tables
def build_runs(
    trials: pd.DataFrame, interleaved: str | None = None
) -> tuple[pd.DataFrame, RunTable]:
    """Cells and the padded run table of a normalised trial table.

    With ``interleaved`` (a column name), ``RunTable.level`` holds each
    trial's level code (the index into ``cells.attrs["levels"]``); runs keep
    every trial in order whatever its level (METHOD §10).
    """
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
    level = None
    levels: list[str] = []
    if interleaved is not None:
        codes, uniques = interleaved_levels(trials, interleaved)
        levels = [f"{interleaved}={u}" for u in uniques]
        level = np.zeros((n_runs, T), dtype=np.int64)
        level[run_id, pos] = codes[order]
    runs = RunTable(x, y, present, cell_id[first], sess, runk, level)
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
    # METHOD §8: constant responders and the response quantum
    obs_flat = ~np.isnan(y_all)
    cell_obs = cell_id[obs_flat]
    y_obs = y_all[obs_flat]
    ymax = np.full(len(cells), -np.inf)
    np.maximum.at(ymax, cell_obs, y_obs)
    n_obs = np.bincount(cell_obs, minlength=len(cells))
    cells["constant"] = (n_obs >= 2) & (ymax == ymin)
    cells["delta"] = response_quantum(y_obs, cell_obs, len(cells))
    median = pd.Series(y_obs).groupby(cell_obs).median()
    cells["y_median"] = median.reindex(np.arange(len(cells))).to_numpy()
    cells.attrs["levels"] = levels
    return cells, runs


def interleaved_levels(trials: pd.DataFrame, column: str) -> tuple[np.ndarray, list[str]]:
    """Level code of every trial and the sorted level labels of ``column``.

    Raises
    ------
    BayesobsInputError
        When the column is absent, has missing values, or is a cell key.
    """
    from .errors import BayesobsInputError

    if column in CELL_KEYS or column in ("session", "run", "trial", "stimulus", "response"):
        raise BayesobsInputError(
            f"--interleaved {column}: a cell or order key cannot be interleaved; name the "
            "column whose level changes from trial to trial inside a run (e.g. Coherence1)"
        )
    if column not in trials.columns:
        cols = ", ".join(str(c) for c in trials.columns)
        raise BayesobsInputError(f"--interleaved {column}: no such column (columns: {cols})")
    col = trials[column]
    if col.isna().any():
        i = int(np.flatnonzero(col.isna().to_numpy())[0])
        raise BayesobsInputError(
            f"--interleaved {column}: value missing in row {i + 1} of the trial table "
            "(filter it out with --where)"
        )
    labels = col.map(lambda v: format(v, "g") if isinstance(v, float) else str(v))
    uniques = sorted(labels.unique(), key=_natural)
    codes = labels.map({u: i for i, u in enumerate(uniques)}).to_numpy(np.int64)
    return codes, uniques


def _natural(label: str):
    """Numbers in numeric order, then text."""
    try:
        return (0, float(label), "")
    except ValueError:
        return (1, 0.0, label)


QUANTUM_EXPONENTS = np.arange(9, -10, -1)  # k = 9 .. -9, largest first
QUANTUM_TOLERANCE = 1e-6


def response_quantum(y: np.ndarray, group: np.ndarray, n_groups: int) -> np.ndarray:
    """Response quantum ``delta`` of each group of observed responses (METHOD §8).

    The largest ``10**k``, integer ``k`` in [-9, 9], such that every ``y`` of
    the group is a multiple of it: ``|y / 10**k - round(y / 10**k)| < 1e-6``
    with a non-zero ``round(y / 10**k)`` for a non-zero ``y`` (read literally,
    the absolute tolerance would let every answer below ``1e-6 * 10**k`` pass
    for large ``k``); 0 where no such ``k`` exists (answers not rounded to a
    power of ten) or the group is empty.
    """
    y = np.asarray(y, dtype=float)
    scale = 10.0 ** QUANTUM_EXPONENTS.astype(float)  # (K,)
    ok = np.empty((n_groups, len(scale)), dtype=bool)
    for j, s in enumerate(scale):  # one exponent at a time: memory stays O(n)
        q = y / s
        m = np.round(q)
        # y not on the 10**k grid; a non-zero answer must be a non-zero multiple
        off = (np.abs(q - m) >= QUANTUM_TOLERANCE) | ((m == 0) & (y != 0))
        ok[:, j] = np.bincount(group, weights=off, minlength=n_groups) == 0
    first = np.argmax(ok, axis=1)
    has = ok.any(axis=1) & (np.bincount(group, minlength=n_groups) > 0)
    return np.where(has, scale[first], 0.0)


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
    eps = cells["eps"].to_numpy()[runs.cell][:, None]
    ok = (cells["log_skipped"].to_numpy() == "")[runs.cell][:, None]
    z, u, obs, jac = model_scale(runs.x, runs.y, runs.present, eps, log, ok)
    jac_run = jac.sum(1)
    # Per-cell centring constant: mean of z over all trials of the cell.
    centre = cell_moments(z, runs.present, runs.cell, len(cells))[0][runs.cell][:, None]
    z = np.where(runs.present, z - centre, 0.0)
    u = np.where(obs, u - centre, 0.0)
    return z, u, obs, jac_run, centre[:, 0]


def gram_stats(z, u, present, obs) -> np.ndarray:
    """Gram statistics of ``(z, zbar_r, 1, u)`` of every run: ``(runs, 10)``.

    ``obs`` weights each trial (a mask, or EM responsibilities); ``zbar_r``
    is the mean of ``z`` over every trial of the run.
    """
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


KALMAN_BLOCK = 8192  # columns per block: the recursion's working set stays in cache


def _kalman_moments_blocked(z, u, obs, rho):
    """:func:`_kalman_moments` with one ``rho`` per column, block by block.

    The same operations on every element (so the same numbers), on blocks of
    :data:`KALMAN_BLOCK` columns that stay in cache, in two threads where
    there are two cores or more (NumPy releases the GIL).
    """
    blocks = [slice(a, a + KALMAN_BLOCK) for a in range(0, z.shape[1], KALMAN_BLOCK)]

    def one(b):
        return _kalman_moments(z[:, b], u[:, b], obs[:, b], rho[b])

    if len(blocks) > 1 and (os.cpu_count() or 1) > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(2) as pool:
            parts = list(pool.map(one, blocks))
    else:
        parts = [one(b) for b in blocks]
    if not parts:
        return [np.zeros(0)] * 3
    return [np.concatenate(p) for p in zip(*parts, strict=True)]


def rss_kalman(G, s1, s2, s3):
    """RSS of ``kalman`` and ``kalman_gain`` given dataset moments.

    ``G``: dataset Gram stats broadcastable to ``s1``'s leading shape.
    Returns ``(rss_kalman, rss_kalman_gain, g, delta)``.
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
        # n = 0: a bootstrap draw of runs without one response (NaN, as in closed_forms)
        delta = (su - g * s1) / n
    return rss_k, rss_g, g, delta


def closed_forms(G):
    """RSS and (centred) parameters of linear, static and static_gain.

    ``G``: ``(D, 10)`` dataset Gram statistics (:func:`gram_stats`).  Returns
    ``{name: (rss, params)}``.
    """
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

    ``z``, ``u``, ``obs`` are time-major ``(T, runs)``.  Datasets with the
    same row of ``W`` (bootstrap draws of the same runs, as often as each
    other: a cell of three runs has ten distinct draws) are fitted once; every
    step is computed dataset by dataset, so each copy gets the same numbers.
    """
    rows, inverse = _distinct_rows(W)
    if len(rows) == W.shape[0]:
        return _fit_kalman_distinct(W, Gd, z, u, obs)
    fits = _fit_kalman_distinct(W[rows], Gd[rows], z, u, obs)
    return {
        name: (rss[inverse], {p: v[inverse] for p, v in params.items()})
        for name, (rss, params) in fits.items()
    }


def _distinct_rows(W) -> tuple[np.ndarray, np.ndarray]:
    """The first of each distinct row of CSR ``W`` (same columns and values, in the same order).

    Returns ``(rows, inverse)``: ``W[rows]`` holds each distinct row once and
    ``W[rows][inverse]`` is ``W``.
    """
    W = W.tocsr()
    seen: dict[tuple[bytes, bytes], int] = {}
    inverse = np.empty(W.shape[0], dtype=np.int64)
    rows = []
    for i in range(W.shape[0]):
        a, b = W.indptr[i], W.indptr[i + 1]
        key = (W.indices[a:b].tobytes(), W.data[a:b].tobytes())
        j = seen.setdefault(key, len(rows))
        if j == len(rows):
            rows.append(i)
        inverse[i] = j
    return np.asarray(rows, dtype=np.int64), inverse


def _fit_kalman_distinct(W, Gd, z, u, obs):
    """:func:`_fit_kalman` of every row of ``W``."""
    theta = np.concatenate([[-np.inf], LOG_RHO_GRID, [np.inf]])
    s1, s2, s3 = _kalman_moments(z, u, obs, np.exp(theta)[:, None])  # (C, R)
    agg = [(W @ s.T) for s in (s1, s2, s3)]  # (D, C)
    rss_k, rss_g, _, _ = rss_kalman(Gd[:, None, :], *agg)
    D = W.shape[0]
    coo = W.tocoo()
    d_p, r_p, w_p = coo.row, coo.col, coo.data  # (dataset, run) pairs, by dataset (CSR order)
    first = np.searchsorted(d_p, np.arange(D + 1))

    def pairs_of(d_sel):
        """The (dataset, run) pairs of datasets ``d_sel``: item index, weight, gathered runs."""
        cnt = first[d_sel + 1] - first[d_sel]
        item = np.repeat(np.arange(len(d_sel)), cnt)
        pos = np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt - first[d_sel], cnt)
        c = r_p[pos]
        return item, w_p[pos], len(d_sel), z[:, c], u[:, c], obs[:, c]

    def moments_of(pairs, th):
        """Moments of the datasets of ``pairs`` at ``log rho = th`` (one per dataset)."""
        item, w, n, zc, uc, oc = pairs
        m = _kalman_moments_blocked(zc, uc, oc, np.exp(th)[item])
        return [np.bincount(item, weights=w * mm, minlength=n) for mm in m]

    def moments_at(th):  # th: (2, D) -> moments (2, D) each (row 0 kalman, row 1 kalman_gain)
        d_all = np.arange(D)
        m = moments_of(pairs_of(np.concatenate([d_all, d_all])), th.reshape(-1))
        return [mm.reshape(2, D) for mm in m]

    grids = np.stack([rss_k, rss_g])  # (2, D, C)
    i = np.argmin(np.where(np.isnan(grids), np.inf, grids), axis=2)  # (2, D)
    best_theta = theta[i]
    best_rss = np.take_along_axis(grids, i[..., None], axis=2)[..., 0]
    interior = (i > 0) & (i < len(theta) - 1)
    lo = theta[np.clip(i - 1, 1, len(theta) - 2)]
    hi = theta[np.clip(i + 1, 1, len(theta) - 2)]
    if interior.any():
        # refine only the interior minima (the others are kept as they are): (row, dataset) items
        j_sel, d_sel = np.nonzero(interior)
        pairs, Gd_sel = pairs_of(d_sel), Gd[d_sel]

        def evaluate(th):
            rk, rg, _, _ = rss_kalman(Gd_sel, *moments_of(pairs, th))
            return np.where(j_sel == 0, rk, rg)

        th_r, f_r = _golden(evaluate, lo[j_sel, d_sel], hi[j_sel, d_sel])
        better = f_r < best_rss[j_sel, d_sel]
        best_theta[j_sel[better], d_sel[better]] = th_r[better]
    rk, rg, g, delta = rss_kalman(Gd, *moments_at(best_theta))
    return {
        "kalman": (rk[0], {"rho": np.exp(best_theta[0])}),
        "kalman_gain": (rg[1], {"rho": np.exp(best_theta[1]), "g": g[1], "delta": delta[1]}),
    }


# ------------------------------------------------- interleaved levels (§10)
LEVEL_GRID_CANDIDATES = 6000  # grid points over the vector of log rho_c
LEVEL_STARTS = 3  # best local minima of the grid refined per (variant, dataset)
LOG_RHO_BOUND = 18.0  # log rho_c in [-18, 18]; the ends stand for the limits
NEWTON_ITERATIONS = 60
NEWTON_H = 2e-3  # finite-difference step in log rho
NEWTON_RADIUS = 2.0  # first trust radius (largest step per coordinate, log rho)
LEVEL_BLOCK_COLUMNS = 8192  # (item, run) columns per filter call: bounded memory


def level_grid(L: int) -> np.ndarray:
    """Candidate vectors of ``log rho_c``: ``(Q, L)``, the ends -18 and 18 included."""
    per = max(5, round(LEVEL_GRID_CANDIDATES ** (1.0 / L)))
    axis = np.linspace(-18.0, 18.0, per)
    return np.stack([g.ravel() for g in np.meshgrid(*([axis] * L), indexing="ij")], axis=1)


def kalman_moments_levels(z, u, obs, lev, rho, L):
    """Per-level ``sum mu``, ``sum mu^2``, ``sum mu u`` of the interleaved filter.

    ``z``, ``u``, ``obs``, ``lev``: time-major ``(T, R)``.  ``rho``: ``(..., L)``
    noise ratios whose leading shape broadcasts against ``(R,)``.  The
    recursion (METHOD §10, in units of the process noise):
    ``P-_t = P_{t-1} + 1``, ``K_t = rho_c P-_t / (rho_c P-_t + 1)``,
    ``P_t = P-_t / (rho_c P-_t + 1)``, diffuse start ``K_1 = 1``,
    ``P_1 = 1 / rho_{c(1)}``.  ``obs`` weights each trial's terms: a mask,
    or EM responsibilities (METHOD §11).  Returns three arrays ``(L, *lead)``.
    """
    rho = np.asarray(rho, dtype=float)
    lead = np.broadcast_shapes(rho.shape[:-1], z.shape[1:])
    T = z.shape[0]
    masks = [np.where(lev == c, obs, 0) for c in range(L)]

    def r_at(t):
        r = np.zeros(lead)
        for c in range(L):
            r = r + rho[..., c] * (lev[t] == c)
        return r

    mu = np.broadcast_to(z[0], lead).copy()
    P = 1.0 / r_at(0)
    s1 = np.zeros((L, *lead))
    s2 = np.zeros((L, *lead))
    s3 = np.zeros((L, *lead))

    def accumulate(t):
        for c in range(L):
            m = masks[c][t]
            if m.any():
                a = mu * m
                s1[c] += a
                s2[c] += a * mu
                s3[c] += a * u[t]

    accumulate(0)
    for t in range(1, T):  # a missing response still moves the filter; padding is harmless
        r = r_at(t)
        pm = P + 1.0
        denom = r * pm + 1.0
        k = r * pm / denom
        P = pm / denom
        mu += k * (z[t] - mu)
        accumulate(t)
    return s1, s2, s3


def level_objective(rss, n, floor):
    """``sum_c [n_c log s2_c + RSS_c / s2_c]`` (minus twice the profiled LL, up to constants)."""
    rss = np.maximum(rss, 0.0)  # a sum of squares: rounding can take it below 0
    with np.errstate(invalid="ignore", divide="ignore"):
        s2 = np.maximum(rss / np.where(n > 0, n, 1.0), floor)
        term = np.where(n > 0, n * np.log(s2) + rss / s2, 0.0)
    return term.sum(axis=0)


def _fit_kalman_levels(W, Gds, floors, z, u, obs, lev, L):
    """Profiled ``kalman``/``kalman_gain`` fits with one ``rho_c`` per level.

    ``Gds``: ``(L, D, 10)`` dataset Gram statistics per level; ``floors``:
    ``(L, D)`` variance floors; ``z``, ``u``, ``obs``, ``lev``: time-major
    ``(T, runs)``.  The global maximum over the vector of ``log rho_c``
    (METHOD §2, §10):

    1. a grid over ``[-18, 18]^L`` (:func:`level_grid`, both ends per
       level), evaluated once per unique run and summed into datasets;
    2. the :data:`LEVEL_STARTS` best local minima of that grid (points no
       worse than their axis neighbours) of every (variant, dataset) are
       refined jointly by a projected, trust-region Newton method on the
       concentrated objective, with central finite-difference gradient and
       Hessian (:func:`newton_levels`), vectorised over every start,
       variant and dataset;
    3. the best refined point is kept (never worse than the grid's best).

    A coordinate-wise search (golden sections one level at a time) stops
    short of the joint maximum when the levels' noise ratios interact; the
    joint Newton step does not.  Returns ``{variant: (rss (L, D), params)}``
    with ``(L, D)`` parameters.
    """
    D = W.shape[0]
    n = Gds[..., _N]  # (L, D)
    cand = level_grid(L)  # (Q, L)
    per = round(len(cand) ** (1.0 / L))
    s1, s2, s3 = kalman_moments_levels(z, u, obs, lev, np.exp(cand)[:, None, :], L)  # (L, Q, R)
    agg = [np.stack([np.asarray(W @ m[c].T) for c in range(L)]) for m in (s1, s2, s3)]  # (L, D, Q)
    rk, rg, _, _ = rss_kalman(Gds[:, :, None, :], *agg)  # (L, D, Q)
    fl = floors[:, :, None]
    nn = n[:, :, None]
    grids = np.stack([level_objective(rk, nn, fl), level_objective(rg, nn, fl)])  # (2, D, Q)
    starts = grid_local_minima(grids, per, L, LEVEL_STARTS)  # (2, D, K), -1 where none
    j_of, d_of, k_of = np.nonzero(starts >= 0)
    th0 = cand[starts[j_of, d_of, k_of]]
    f0 = grids[j_of, d_of, starts[j_of, d_of, k_of]]
    evaluate = level_evaluator(W, Gds, floors, z, u, obs, lev, L)

    def objective(th, items):
        return evaluate(th, j_of[items], d_of[items])[0]

    th, f = newton_levels(objective, th0, f0)
    # the best start of every (variant, dataset)
    best = np.zeros((2, D, L))
    best_f = np.full((2, D), np.inf)
    for k in range(starts.shape[2]):
        sel = k_of == k
        j, d = j_of[sel], d_of[sel]
        better = f[sel] < best_f[j, d]
        best[j[better], d[better]] = th[sel][better]
        best_f[j[better], d[better]] = f[sel][better]
    jj = np.repeat([0, 1], D)
    dd = np.tile(np.arange(D), 2)
    _, rss, g, delta = evaluate(best.reshape(2 * D, L), jj, dd)  # (L, 2D)
    rss, g, delta = (a.reshape(L, 2, D) for a in (rss, g, delta))
    rho = np.exp(np.moveaxis(best, -1, 0))  # (L, 2, D)
    return {
        "kalman": (rss[:, 0], {"rho": rho[:, 0]}),
        "kalman_gain": (rss[:, 1], {"rho": rho[:, 1], "g": g[:, 1], "delta": delta[:, 1]}),
    }


def grid_local_minima(values: np.ndarray, per: int, L: int, K: int) -> np.ndarray:
    """Flat indices of the ``K`` lowest local minima of ``values`` on an ``L``-D grid.

    ``values``: ``(..., per**L)`` in :func:`level_grid` order (NaN counts as
    ``+inf``).  A local minimum is no higher than either neighbour along
    every axis; the global minimum always is one.  Returns ``(..., K)``
    indices, lowest first, ``-1`` where there are fewer than ``K`` finite
    local minima.
    """
    lead = values.shape[:-1]
    v = np.where(np.isnan(values), np.inf, values).reshape(*lead, *([per] * L))
    is_min = np.isfinite(v)
    for ax in range(len(lead), v.ndim):
        pad = [(0, 0)] * v.ndim
        pad[ax] = (1, 1)
        vp = np.pad(v, pad, constant_values=np.inf)
        is_min &= v <= np.take(vp, np.arange(per), axis=ax)
        is_min &= v <= np.take(vp, np.arange(2, per + 2), axis=ax)
    flat = np.where(is_min, v, np.inf).reshape(*lead, -1)
    order = np.argsort(flat, axis=-1, kind="stable")[..., :K]
    ok = np.isfinite(np.take_along_axis(flat, order, axis=-1))
    return np.where(ok, order, -1)


def level_evaluator(W, Gds, floors, z, u, obs, lev, L):
    """``evaluate(th, j, d)``: objective, RSS, ``g``, ``delta`` of items at ``log rho`` vectors.

    Item ``i`` is variant ``j[i]`` (0 ``kalman``, 1 ``kalman_gain``) on
    dataset ``d[i]`` at ``th[i]`` (``(M, L)``).  Runs through the §10
    recursion once per (item, run of its dataset) pair, in blocks of
    :data:`LEVEL_BLOCK_COLUMNS` columns.  Returns ``f (M,)`` and ``(L, M)``
    arrays of RSS, ``g`` and ``delta``.
    """
    D = W.shape[0]
    coo = W.tocoo()
    d_p, r_p, w_p = coo.row, coo.col, coo.data  # (dataset, run) pairs, by dataset (CSR order)
    first = np.searchsorted(d_p, np.arange(D + 1))
    n = Gds[..., _N]

    def moments(th, d):
        M = len(d)
        cnt = first[d + 1] - first[d]
        out = [np.zeros((L, M)) for _ in range(3)]
        ends = np.cumsum(cnt)
        a = 0
        while a < M:  # a block of items whose pairs fit in LEVEL_BLOCK_COLUMNS columns
            b = int(np.searchsorted(ends, (ends[a - 1] if a else 0) + LEVEL_BLOCK_COLUMNS, "right"))
            b = max(b, a + 1)
            dd, cc = d[a:b], cnt[a:b]
            item = np.repeat(np.arange(b - a), cc)
            pos = np.arange(cc.sum()) - np.repeat(np.cumsum(cc) - cc - first[dd], cc)
            c = r_p[pos]
            m = kalman_moments_levels(
                z[:, c], u[:, c], obs[:, c], lev[:, c], np.exp(th[a:b])[item], L
            )
            for o, mm in zip(out, m, strict=True):
                for level in range(L):
                    o[level, a:b] = np.bincount(item, weights=w_p[pos] * mm[level], minlength=b - a)
            a = b
        return out

    def evaluate(th, j, d):
        s1, s2, s3 = moments(th, d)
        rk, rg, g, delta = rss_kalman(Gds[:, d, :], s1, s2, s3)  # (L, M)
        rss = np.where(j == 0, rk, rg)
        return level_objective(rss, n[:, d], floors[:, d]), rss, g, delta

    return evaluate


def _stencil(L: int, h: float) -> np.ndarray:
    """Offsets of the central-difference gradient and Hessian: ``(1 + 2L + 2L(L-1), L)``."""
    rows = [np.zeros(L)]
    eye = np.eye(L) * h
    for i in range(L):
        rows += [eye[i], -eye[i]]
    for i in range(L):
        for k in range(i + 1, L):
            rows += [eye[i] + eye[k], eye[i] - eye[k], -eye[i] + eye[k], -eye[i] - eye[k]]
    return np.array(rows)


def _derivatives(fs: np.ndarray, L: int, h: float):
    """Gradient ``(M, L)`` and Hessian ``(M, L, L)`` from values on :func:`_stencil`."""
    f0 = fs[0]
    M = fs.shape[1]
    grad = np.empty((M, L))
    hess = np.empty((M, L, L))
    for i in range(L):
        fp, fm = fs[1 + 2 * i], fs[2 + 2 * i]
        grad[:, i] = (fp - fm) / (2 * h)
        hess[:, i, i] = (fp - 2 * f0 + fm) / (h * h)
    r = 1 + 2 * L
    for i in range(L):
        for k in range(i + 1, L):
            pp, pm, mp, mm = fs[r : r + 4]
            hess[:, i, k] = hess[:, k, i] = (pp - pm - mp + mm) / (4 * h * h)
            r += 4
    return grad, hess


def newton_levels(objective, th0: np.ndarray, f0: np.ndarray, iterations: int = NEWTON_ITERATIONS):
    """Minimise ``objective`` from every start at once: projected trust-region Newton.

    ``objective(th (M', L), items (M',))`` evaluates items ``items`` at
    ``th``; ``th0 (M, L)`` are starts in ``[-18, 18]^L`` with values ``f0``.
    Each iteration: central finite differences give gradient and Hessian;
    coordinates at a bound whose gradient points outward stay there; the
    step is Newton's on the others with each Hessian eigenvalue replaced by
    its absolute value (a saddle or a flat direction gives a descent step,
    not an ascent), cut to the trust radius; the best of the step and two
    shorter ones along it is accepted where it lowers the objective (the
    radius grows), otherwise the radius shrinks.  An item stops when its
    radius falls below 1e-9 or a step changes it by less than 1e-12.
    At most ``iterations`` steps (a generalised EM step needs only a few).
    Returns the final points and values (never worse than the starts).
    """
    M, L = th0.shape
    th = th0.copy()
    f = np.where(np.isnan(f0), np.inf, f0)
    radius = np.full(M, NEWTON_RADIUS)
    active = np.isfinite(f)
    offsets = _stencil(L, NEWTON_H)
    fractions = np.array([1.0, 0.25, 1.0 / 16.0])
    for _ in range(iterations):
        items = np.flatnonzero(active)
        if not len(items):
            break
        x = th[items]
        pts = np.clip(x[None] + offsets[:, None], -LOG_RHO_BOUND - 1.0, LOG_RHO_BOUND + 1.0)
        fs = objective(pts.reshape(-1, L), np.tile(items, len(offsets))).reshape(len(offsets), -1)
        fs[0] = f[items]
        grad, hess = _derivatives(fs, L, NEWTON_H)
        ok = np.isfinite(grad).all(1) & np.isfinite(hess).all((1, 2))
        grad = np.where(ok[:, None], grad, 0.0)
        hess = np.where(ok[:, None, None], hess, 0.0)
        pinned = ((x <= -LOG_RHO_BOUND) & (grad > 0)) | ((x >= LOG_RHO_BOUND) & (grad < 0))
        grad = np.where(pinned, 0.0, grad)
        keep = ~pinned[:, :, None] & ~pinned[:, None, :]
        hess = np.where(keep, hess, 0.0) + np.where(pinned, 1.0, 0.0)[:, :, None] * np.eye(L)
        e, V = np.linalg.eigh(hess)
        scale = np.maximum(np.abs(e).max(1, keepdims=True), 1e-300)
        e = np.maximum(np.abs(e), 1e-8 * scale)
        step = -np.einsum("mij,mj->mi", V, np.einsum("mji,mj->mi", V, grad) / e)
        big = np.abs(step).max(1)
        r = radius[items]
        step *= np.where(big > r, r / np.where(big > 0, big, 1.0), 1.0)[:, None]
        trial = np.clip(
            x[None] + fractions[:, None, None] * step[None], -LOG_RHO_BOUND, LOG_RHO_BOUND
        )
        ft = objective(trial.reshape(-1, L), np.tile(items, len(fractions)))
        ft = np.where(np.isnan(ft), np.inf, ft).reshape(len(fractions), -1)
        pick = np.argmin(ft, axis=0)
        f_new = ft[pick, np.arange(len(items))]
        x_new = trial[pick, np.arange(len(items))]
        better = f_new < f[items]
        moved = np.abs(x_new - x).max(1)
        gain = np.where(better, f[items] - f_new, 0.0)
        th[items] = np.where(better[:, None], x_new, x)
        f[items] = np.where(better, f_new, f[items])
        radius[items] = np.where(
            better & (pick == 0), np.minimum(2.0 * r, 8.0), np.where(better, r, r / 16.0)
        )
        done = (radius[items] < 1e-9) | (
            better & (gain <= 1e-12 * np.maximum(1.0, np.abs(f[items])))
        )
        done |= better & (moved < 1e-10)
        active[items[done]] = False
    return th, f


def _fit_chunk_levels(W, runs: RunTable, cells: pd.DataFrame, B: int, L: int, lapse=False):
    """Joint log-likelihoods and per-level parameters (METHOD §10) for one chunk.

    With ``lapse``, every variant is refitted with one lapse rate per cell
    (:func:`_lapse_levels`).

    Returns ``ll (D, V)``, ``n (D,)``, ``n_level (D, L)``, ``params`` with
    ``(D, V, L)`` arrays and ``few (D, V)``: a level has too few responses.
    """
    D = W.shape[0]
    V = len(VARIANTS)
    cell_of = np.repeat(np.arange(len(cells)), 1 + B)
    ll = np.full((D, V), np.nan)
    few = np.zeros((D, V), dtype=bool)
    par = {p: np.full((D, V, L), np.nan) for p in _PARAMS}
    n_level = np.zeros((D, L))
    for log in (False, True):
        z, u, obs, _, centre_run = _transformed(runs, cells, log)
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
            floors.append(_variance_floor(Gd, qfloor))
            Gds.append(Gd)
            results.append(closed_forms(Gd))
        Gds, jacs, floors = np.stack(Gds), np.stack(jacs), np.stack(floors)
        n = Gds[..., _N]  # (L, D)
        n_level = n.T
        kal = _fit_kalman_levels(
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
    """Refit the variants of one transform with a lapse rate (METHOD §10 with §11), in place.

    One ``lambda`` per cell (a lapse of attention whatever the level), each
    level its own observer parameters and ``sigma_c``
    (:func:`bayesobs.lapse.fit_lapse_levels`).  Where the EM optimum does not
    beat the no-lapse fit, that fit stays, with ``lapse = 0``.
    """
    from .lapse import LevelPairs, fit_lapse_levels

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


def profiled_loglik(rss, n, floor, jac=0.0):
    """Profiled variance and log-likelihood of a Gaussian fit (METHOD §2, §8).

    ``sigma^2 = max(RSS / n, floor)`` and
    ``LL = -n/2 log(2 pi sigma^2) - RSS / (2 sigma^2) - jac``.  ``RSS`` is
    first clipped at 0: computed from sums (``sum u^2 - 2 sum mu u + ...``) an
    exact fit can come out a rounding error below 0, and a negative RSS under
    the floor would lift the LL above ``-n/2 log(2 pi floor)``, the most the
    floor allows.  Every variant's LL goes through here.  Returns
    ``(sigma^2, LL)``; NaN where ``n = 0``.
    """
    rss = np.maximum(rss, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        s2 = np.maximum(rss / n, floor)
        loglik = -0.5 * n * np.log(2 * np.pi * s2) - 0.5 * rss / s2 - jac
    return s2, loglik


def _variance_floor(Gd: np.ndarray, qfloor: np.ndarray) -> np.ndarray:
    """Per-dataset floor of the profiled variance.

    The response quantum's Sheppard variance, and at least ``1e-12`` times
    the response variance (no infinite LL).
    """
    n = Gd[:, _N]
    nn = np.where(n > 0, n, 1)
    vu = Gd[:, _SUU] - Gd[:, _SU] ** 2 / nn
    return np.maximum(VARIANCE_FLOOR * np.maximum(vu / nn, 1e-300), qfloor)


def quantum_floor(cells: pd.DataFrame, log: bool) -> np.ndarray:
    """Per-cell variance floor from the response quantum (Sheppard, METHOD §8).

    ``delta**2 / 12`` on the response scale; for log variants
    ``(delta / (median y + eps))**2 / 12``, the same rounding seen in log space.
    """
    delta = cells["delta"].to_numpy(float)
    if log:
        with np.errstate(invalid="ignore", divide="ignore"):
            delta = delta / (cells["y_median"].to_numpy(float) + cells["eps"].to_numpy(float))
        delta = np.where(np.isfinite(delta), delta, 0.0)
    return delta**2 / 12.0


def _fit_chunk(W, runs: RunTable, cells: pd.DataFrame, B: int):
    """Log-likelihoods and parameters of every variant for one chunk."""
    D = W.shape[0]
    cell_of = np.repeat(np.arange(len(cells)), 1 + B)
    ll = np.full((D, len(VARIANTS)), np.nan)
    n_out = np.zeros(D)
    par = {p: np.full((D, len(VARIANTS)), np.nan) for p in _PARAMS}
    for log in (False, True):
        z, u, obs, jac_run, centre_run = _transformed(runs, cells, log)
        G = gram_stats(z, u, runs.present, obs)
        Gd = np.asarray(W @ G)
        jac = np.asarray(W @ jac_run)
        # cell centring constant, per dataset
        centre_cell = np.zeros(len(cells))
        centre_cell[runs.cell] = centre_run
        centre = centre_cell[cell_of]
        n = Gd[:, _N]
        n_out = n
        floor = _variance_floor(Gd, quantum_floor(cells, log)[cell_of])
        results = closed_forms(Gd)
        results.update(_fit_kalman(W, Gd, z.T.copy(), u.T.copy(), obs.T.copy()))
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
    """Refit every variant with a lapse rate (METHOD §11), in place of ``ll``/``par``.

    Where the EM optimum does not beat the no-lapse fit, the no-lapse fit
    stays, with ``lapse = 0``.
    """
    from .lapse import _Pairs, fit_lapse

    D = W.shape[0]
    cell_of = np.repeat(np.arange(len(cells)), 1 + B)
    uniform = _lapse_uniform(runs, cells, B)
    par["lapse"][:] = np.where(np.isnan(ll), np.nan, 0.0)
    for log in (False, True):
        z, u, obs, _, centre_run = _transformed(runs, cells, log)
        jac_trial = np.where(obs, u + centre_run[:, None], 0.0) if log else np.zeros_like(u)
        G = np.asarray(W @ gram_stats(z, u, runs.present, obs))
        floor = _variance_floor(G, quantum_floor(cells, log)[cell_of])
        pairs = _Pairs(W, z, u, obs, runs.present, jac_trial, uniform, floor, D)
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

    Returns
    -------
    FitBatch
    """
    if bootstrap < 0:
        raise ValueError("bootstrap must be >= 0")
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
    from .distributed import map_tasks, scheduler_address

    remote = scheduler_address() is not None
    if remote:  # a Dask cluster: at least 8 tasks (every dataset is fitted on its own)
        step = min(step, max(1, -(-n_cells // 8)))
    chunks = [np.arange(s, min(s + step, n_cells)) for s in range(0, n_cells, step)]
    bar = None
    if progress:
        from tqdm.auto import tqdm

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
        from tqdm.auto import tqdm

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


def collapse_levels(batch: FitBatch) -> FitBatch:
    """One row per cell of an interleaved fit (METHOD §10); other batches unchanged.

    ``loglik``, ``aic``, ``n`` and ``k`` are the joint fit's (the same on
    every level's row); the per-level parameters have no single value per
    cell and become NaN.
    """
    if "level" not in batch.cells.columns or len(batch.cells.attrs.get("levels", [])) < 2:
        return batch
    first = ~batch.cells.duplicated(list(CELL_KEYS)).to_numpy()
    cells = batch.cells.loc[first].drop(columns=["level", "n_level"]).reset_index(drop=True)
    return FitBatch(
        cells,
        batch.loglik[first],
        batch.aic[first],
        batch.n[first],
        {p: np.full_like(v[first], np.nan) for p, v in batch.params.items()},
        batch.skipped[first],
        None if batch.k is None else batch.k[first],
    )


def encode_params(params: dict) -> str:
    """``params`` as strict JSON: an infinite value becomes ``null`` plus a flag.

    ``rho = inf`` (the Kalman filter that copies the stimulus) is written
    ``"rho": null, "rho_limit": "inf"``, so R, JavaScript and every other
    strict JSON parser can read ``fits.csv``; :func:`decode_params` restores it.
    """
    out = {}
    for name, value in params.items():
        if isinstance(value, float) and math.isinf(value):
            out[name] = None
            out[f"{name}_limit"] = "inf" if value > 0 else "-inf"
        else:
            out[name] = value
    return json.dumps(out, allow_nan=False)


def decode_params(text: str) -> dict:
    """Parameters written by :func:`encode_params` (``*_limit`` flags restored)."""
    params = json.loads(text) if text else {}
    for name in [k for k in params if k.endswith("_limit")]:
        params[name[: -len("_limit")]] = float(params.pop(name))
    return params


def fits_table(batch: FitBatch) -> pd.DataFrame:
    """``fits.csv`` rows (DESIGN contract) of the full-data fits."""
    rows = []
    cells = batch.cells
    # column values read once (element access on Arrow-backed columns is slow)
    key_cols = {k: list(cells[k]) for k in CELL_KEYS}
    extra_cols = {k: list(cells[k]) for k in ("level", "n_level") if k in cells.columns}
    lapse = batch.params.get("lapse")
    for c in range(len(cells)):
        key = {k: col[c] for k, col in key_cols.items()}
        extra = {k: col[c] for k, col in extra_cols.items()}
        for j, v in enumerate(VARIANTS):
            if batch.skipped[c, j]:
                params = {"skipped": batch.skipped[c, j]}
            else:
                params = {p: float(batch.params[p][c, 0, j]) for p in v.param_names}
                if lapse is not None and np.isfinite(lapse[c, 0, j]):
                    params["lapse"] = float(lapse[c, 0, j])
            rows.append(
                {
                    **key,
                    "variant": v.name,
                    **{f: bool(getattr(v, f)) for f in FACTORS},
                    "n": int(batch.n[c, 0, j]),
                    "k": v.k if batch.k is None else int(batch.k[c, j]),
                    "loglik": batch.loglik[c, 0, j],
                    "aic": batch.aic[c, 0, j],
                    "params": encode_params(params),
                    **extra,
                }
            )
    return pd.DataFrame(rows)
