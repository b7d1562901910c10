"""The fitting kernel: closed forms, Kalman moments and the 1-D search (METHOD §2).

Public building blocks of every fit (the batched engine of
:mod:`bayesobs.fits.fitting`, the lapse EM of :mod:`bayesobs.fits.lapse`, the anchoring
controls, the design study and the interleaved fits of
:mod:`bayesobs.fits.levels`):

* :func:`transformed` puts a run table on a variant's scale, centred per cell;
* :func:`gram_stats` are the sufficient statistics of ``(z, zbar_r, 1, u)``
  (their columns are indexed by ``G_N`` ... ``G_SUU``), additive over runs;
* :func:`closed_forms` solves ``linear``, ``static`` and ``static_gain``
  exactly, :func:`rss_kalman` gives the Kalman variants' residual sum of
  squares from :func:`kalman_moments`; :func:`fit_kalman` searches them;
* :func:`golden` is the golden-section search of ``log rho``;
* :func:`profiled_loglik`, :func:`variance_floor` and :func:`quantum_floor`
  profile ``sigma`` out with a floor.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise

import numpy as np
import pandas as pd

from .observers.scale import cell_moments, model_scale
from .runtable import RunTable

LOG_RHO_GRID = np.arange(-18.0, 18.0 + 1e-9, 0.25)


GOLDEN_ITERATIONS = 32  # bracket 0.5 -> 1e-7 in log rho


VARIANCE_FLOOR = 1e-12
# zbar_r varies less than this fraction of z's variance: runs share one stimulus set and the
# per-run means differ only by rounding, so the prior term of static_gain is not identified
ZBAR_RTOL = 1e-18


_PHI = (math.sqrt(5.0) - 1.0) / 2.0


# Gram statistics of (z, zbar, 1, u) over observed trials.
G_N, G_SZ, G_SZB, G_SU, G_SZZ, G_SZZB, G_SZBZB, G_SZU, G_SZBU, G_SUU = range(10)


# ------------------------------------------------------------ statistics
def transformed(runs: RunTable, cells: pd.DataFrame, log: bool):
    """Centred ``z``, ``u`` (0 where not applicable), observed mask, Jacobian.

    Parameters
    ----------
    runs : RunTable
        The padded run table (:func:`bayesobs.fits.runtable.build_runs`).
    cells : DataFrame
        Its cells, with the ``eps`` and ``log_skipped`` columns.
    log : bool
        A log (Weber) variant: stimuli and responses are ``log(value + eps)``;
        cells whose log variants are skipped get ``z = u = 0``.

    Returns
    -------
    z : ndarray, shape (runs, T)
        Stimuli on the model scale minus their cell's mean, 0 where absent.
    u : ndarray, shape (runs, T)
        Responses on the model scale minus the same cell mean, 0 where not observed.
    obs : ndarray of bool, shape (runs, T)
        Observed responses (present and not missing).
    jac_run : ndarray, shape (runs,)
        The Jacobian term of each run (sum of ``log(y + eps)`` over its
        observed responses for a log variant, else 0).
    centre : ndarray, shape (runs,)
        The centring constant (cell mean of ``z``) of each run's cell.
    """
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

    Parameters
    ----------
    z : ndarray, shape (runs, T)
        Stimuli on the model scale, 0 where absent.
    u : ndarray, shape (runs, T)
        Responses on the model scale, 0 where not observed.
    present : ndarray of bool, shape (runs, T)
        Which trials exist (for ``zbar_r``).
    obs : ndarray, shape (runs, T)
        Weight of each trial in the sums (bool mask or weights in [0, 1]).

    Returns
    -------
    ndarray, shape (runs, 10)
        Per run, the weighted sums indexed by ``G_N, G_SZ, G_SZB, G_SU, G_SZZ,
        G_SZZB, G_SZBZB, G_SZU, G_SZBU, G_SUU`` (``n``, ``sum z``, ``sum zbar``,
        ``sum u``, ``sum z^2``, ``sum z zbar``, ``sum zbar^2``, ``sum z u``,
        ``sum zbar u``, ``sum u^2``).
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


def kalman_moments(z, u, obs, rho):
    """``sum mu``, ``sum mu^2``, ``sum mu u`` over observed trials.

    ``z``, ``u``, ``obs``: time-major ``(T, R)`` arrays; ``rho`` broadcasts
    against ``(R,)`` (e.g. ``(C, 1)`` for a grid, or ``(R,)``, one per run).
    The gains are computed inside the recursion; ``rho = inf`` is replaced by
    ``1e300``, for which ``K_t = p / (p + 1)`` is exactly 1 in floating point.

    Parameters
    ----------
    z : ndarray, shape (T, R)
        Stimuli on the model scale, time-major.
    u : ndarray, shape (T, R)
        Responses on the model scale.
    obs : ndarray, shape (T, R)
        Weight of each trial (bool mask or EM responsibilities).
    rho : float or ndarray
        Kalman process-to-measurement noise ratio, ``>= 0`` (``inf`` allowed);
        broadcasts against ``(R,)``.

    Returns
    -------
    s1, s2, s3 : ndarray
        ``sum mu``, ``sum mu^2`` and ``sum mu u`` over the (weighted) trials,
        each of shape ``broadcast(rho, (R,))``.
    """
    rho = np.asarray(rho, dtype=float)
    r = np.where(np.isinf(rho), 1e300, rho)
    lead = np.broadcast_shapes(r.shape, z.shape[1:])
    T = z.shape[0]
    o = obs.astype(float)
    k = np.ones(r.shape)  # the gains depend on rho alone: one per rho, broadcast in m *= k
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


def kalman_moments_blocked(z, u, obs, rho):
    """:func:`kalman_moments` with one ``rho`` per column, block by block.

    The same operations on every element (so the same numbers), on blocks of
    equal size, at most :data:`KALMAN_BLOCK` columns that stay in cache.  In
    one thread: each NumPy call of the recursion is short (a block of one
    time step), so a second thread mostly waits for the GIL (at BayesBench
    scale two threads took 27% more CPU for 4% less wall time); the fits use
    the second core through a worker process instead (:func:`bayesobs.distributed.submit`).

    Parameters
    ----------
    z, u, obs : ndarray, shape (T, R)
        As in :func:`kalman_moments`.
    rho : ndarray, shape (R,)
        One Kalman ratio per column.

    Returns
    -------
    list of ndarray
        ``[s1, s2, s3]``, each of shape ``(R,)`` (``(0,)`` when ``R = 0``).
    """
    R = z.shape[1]
    n = -(-R // KALMAN_BLOCK)  # blocks of equal size (the recursion runs column by column)
    edges = [R * i // n for i in range(n + 1)] if R else [0]
    blocks = [slice(a, b) for a, b in pairwise(edges)]
    if not blocks:
        return [np.zeros(0)] * 3
    one = lambda b: kalman_moments(z[:, b], u[:, b], obs[:, b], rho[b])  # noqa: E731
    return _by_columns(one, blocks, threaded=False)


def _by_columns(one, blocks: list[slice], threaded: bool) -> list[np.ndarray]:
    """``one(block)`` of each block of columns, the three moments joined along the last axis."""
    if threaded:
        with ThreadPoolExecutor(2) as pool:
            parts = list(pool.map(one, blocks))
    else:
        parts = [one(b) for b in blocks]
    return [np.concatenate(p, axis=-1) for p in zip(*parts, strict=True)]


def kalman_moments_grid(z, u, obs, rho):
    """:func:`kalman_moments` of every column at every ``rho`` of a grid.

    The columns in two halves, in two threads where there are two cores or
    more (the same operations on every element, so the same numbers).

    Parameters
    ----------
    z, u, obs : ndarray, shape (T, R)
        As in :func:`kalman_moments`.
    rho : ndarray, shape (C,)
        The grid.

    Returns
    -------
    list of ndarray
        ``[s1, s2, s3]``, each of shape ``(C, R)``.
    """
    R = z.shape[1]
    rho = np.asarray(rho, dtype=float)[:, None]
    if R < 2 * 256 or (os.cpu_count() or 1) < 2:
        return list(kalman_moments(z, u, obs, rho))
    halves = [slice(0, R // 2), slice(R // 2, R)]
    return _by_columns(
        lambda b: kalman_moments(z[:, b], u[:, b], obs[:, b], rho), halves, threaded=True
    )


def rss_kalman(G, s1, s2, s3):
    """RSS of ``kalman`` and ``kalman_gain`` given dataset moments.

    Parameters
    ----------
    G : ndarray, shape (..., 10)
        Dataset Gram statistics (:func:`gram_stats` summed over a dataset's
        runs), broadcastable to ``s1``'s shape.
    s1, s2, s3 : ndarray
        The dataset's Kalman moments (:func:`kalman_moments` summed over its runs).

    Returns
    -------
    rss_kalman : ndarray
        Residual sum of squares of ``kalman`` (``u`` against ``mu``).
    rss_kalman_gain : ndarray
        Residual sum of squares of ``kalman_gain`` (``u`` against ``g mu + delta``).
    g : ndarray
        The least-squares gain, clipped at 0 (0 where ``mu`` has no variance).
    delta : ndarray
        The least-squares offset; NaN where the dataset has no response.
    """
    n, su, suu = G[..., G_N], G[..., G_SU], G[..., G_SUU]
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

    Parameters
    ----------
    G : ndarray, shape (D, 10)
        Dataset Gram statistics (:func:`gram_stats` summed over each dataset's runs).

    Returns
    -------
    dict of str to tuple
        ``{name: (rss, params)}`` for ``"linear"`` (params ``w``, ``b``),
        ``"static"`` (``w_prior`` in [0, 1]) and ``"static_gain"``
        (``w_prior``, ``g >= 0``, ``delta``); ``rss`` and every parameter are
        arrays of shape ``(D,)``, on the centred scale.
    """
    n = G[:, G_N]
    with np.errstate(invalid="ignore", divide="ignore"):
        mz, mzb, mu_ = G[:, G_SZ] / n, G[:, G_SZB] / n, G[:, G_SU] / n
        vzz = G[:, G_SZZ] - n * mz * mz
        vbb = G[:, G_SZBZB] - n * mzb * mzb
        vzb = G[:, G_SZZB] - n * mz * mzb
        czu = G[:, G_SZU] - n * mz * mu_
        cbu = G[:, G_SZBU] - n * mzb * mu_
        vu = G[:, G_SUU] - n * mu_ * mu_
        tiny = 1e-13
        # linear
        w = np.where(vzz > tiny * G[:, G_SZZ], czu / vzz, 0.0)
        rss_lin = vu - w * czu
        b = mu_ - w * mz
        # static: residual e = u - z regressed on d = zbar - z, no intercept
        sdd = G[:, G_SZBZB] - 2 * G[:, G_SZZB] + G[:, G_SZZ]
        sde = G[:, G_SZBU] - G[:, G_SZZB] - G[:, G_SZU] + G[:, G_SZZ]
        see = G[:, G_SUU] - 2 * G[:, G_SZU] + G[:, G_SZZ]
        om = np.where(sdd > tiny * (G[:, G_SZZ] + G[:, G_SZBZB]), sde / sdd, 0.0)
        om = np.clip(om, 0.0, 1.0)
        rss_st = see - 2 * om * sde + om * om * sdd

        # static_gain: min over faces of {a >= 0, c >= 0}
        def rss(a, c):
            return vu - 2 * (a * czu + c * cbu) + a * a * vzz + 2 * a * c * vzb + c * c * vbb

        det = vzz * vbb - vzb * vzb
        vbb_ok = vbb > ZBAR_RTOL * np.abs(vzz)  # else zbar_r is the constant column: c = 0
        full_ok = vbb_ok & (det > 1e-10 * vzz * vbb)
        a_f = np.where(full_ok, (vbb * czu - vzb * cbu) / det, 0.0)
        c_f = np.where(full_ok, (vzz * cbu - vzb * czu) / det, 0.0)
        full_ok &= (a_f >= 0) & (c_f >= 0)
        a_1 = np.where(vzz > tiny * G[:, G_SZZ], np.maximum(czu / vzz, 0.0), 0.0)
        c_2 = np.where(vbb_ok & (vbb > tiny * G[:, G_SZBZB]), np.maximum(cbu / vbb, 0.0), 0.0)
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


def golden(evaluate, lo, hi, iterations=GOLDEN_ITERATIONS):
    """Vectorised golden-section minimisation of ``evaluate(theta)`` on [lo, hi].

    Parameters
    ----------
    evaluate : callable
        Maps an array of ``theta`` (the shape of ``lo``) to the objective, elementwise.
    lo, hi : ndarray
        The brackets, one per problem.
    iterations : int, default GOLDEN_ITERATIONS
        Golden-section steps (each shrinks the bracket by about 0.618).

    Returns
    -------
    theta : ndarray
        The best of the two final interior points of each bracket.
    value : ndarray
        ``evaluate`` at ``theta``.
    """
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


def fit_kalman(W, Gd, z, u, obs):
    """Profiled fits of ``kalman`` and ``kalman_gain`` for every dataset.

    ``log rho`` is searched on :data:`LOG_RHO_GRID` plus ``rho = 0`` and
    ``rho = inf``; an interior grid minimum is refined by :func:`golden`.

    Datasets with the same row of ``W`` (bootstrap draws of the same runs,
    as often as each other: a cell of three runs has ten distinct draws) are
    fitted once; every step is computed dataset by dataset, so each copy gets
    the same numbers.

    Parameters
    ----------
    W : scipy.sparse matrix, shape (D, runs)
        Run counts per dataset (:func:`bayesobs.fits.runtable.dataset_matrix`).
    Gd : ndarray, shape (D, 10)
        Dataset Gram statistics (``W @ gram_stats(...)``).
    z, u : ndarray, shape (T, runs)
        Centred stimuli and responses on the model scale, time-major.
    obs : ndarray, shape (T, runs)
        Observed responses (bool mask).

    Returns
    -------
    dict of str to tuple
        ``{"kalman": (rss, {"rho"}), "kalman_gain": (rss, {"rho", "g",
        "delta"})}``, each array of shape ``(D,)``.
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
    """The first of each distinct row of CSR ``W`` (same columns and values, in the same order)."""
    W = W.tocsr()
    n = W.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    nnz = np.diff(W.indptr)
    width = int(nnz.max())
    key = np.zeros((n, 1 + 2 * width))  # columns and counts are exact in float64
    key[:, 0] = nnz
    row = np.repeat(np.arange(n), nnz)
    pos = np.arange(len(W.indices)) - np.repeat(W.indptr[:-1], nnz)
    key[row, 1 + pos] = W.indices
    key[row, 1 + width + pos] = W.data
    _, first, inv = np.unique(key, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first)  # the distinct keys in the order of their first row
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return first[order].astype(np.int64), rank[inv.reshape(-1)].astype(np.int64)


def _fit_kalman_distinct(W, Gd, z, u, obs):
    """:func:`fit_kalman` of every row of ``W``."""
    theta = np.concatenate([[-np.inf], LOG_RHO_GRID, [np.inf]])
    s1, s2, s3 = kalman_moments_grid(z, u, obs, np.exp(theta))  # (C, R)
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
        m = kalman_moments_blocked(zc, uc, oc, np.exp(th)[item])
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

        th_r, f_r = golden(evaluate, lo[j_sel, d_sel], hi[j_sel, d_sel])
        better = f_r < best_rss[j_sel, d_sel]
        best_theta[j_sel[better], d_sel[better]] = th_r[better]
    rk, rg, g, delta = rss_kalman(Gd, *moments_at(best_theta))
    return {
        "kalman": (rk[0], {"rho": np.exp(best_theta[0])}),
        "kalman_gain": (rg[1], {"rho": np.exp(best_theta[1]), "g": g[1], "delta": delta[1]}),
    }


def profiled_loglik(rss, n, floor, jac=0.0):
    """Profiled variance and log-likelihood of a Gaussian fit (METHOD §2, §8).

    ``sigma^2 = max(RSS / n, floor)`` and
    ``LL = -n/2 log(2 pi sigma^2) - RSS / (2 sigma^2) - jac``.  ``RSS`` is
    first clipped at 0: computed from sums (``sum u^2 - 2 sum mu u + ...``) an
    exact fit can come out a rounding error below 0, and a negative RSS under
    the floor would lift the LL above ``-n/2 log(2 pi floor)``, the most the
    floor allows.  Every variant's LL goes through here.

    Parameters
    ----------
    rss : ndarray
        Residual sums of squares.
    n : ndarray
        Observed responses per dataset.
    floor : ndarray or float
        Variance floor (:func:`variance_floor`).
    jac : ndarray or float, default 0.0
        Jacobian term of a log variant (sum of ``log(y + eps)``).

    Returns
    -------
    sigma2 : ndarray
        The profiled variance ``max(RSS / n, floor)``.
    loglik : ndarray
        The log-likelihood; NaN where ``n = 0``.
    """
    rss = np.maximum(rss, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        s2 = np.maximum(rss / n, floor)
        loglik = -0.5 * n * np.log(2 * np.pi * s2) - 0.5 * rss / s2 - jac
    return s2, loglik


def variance_floor(Gd: np.ndarray, qfloor: np.ndarray) -> np.ndarray:
    """Per-dataset floor of the profiled variance.

    The response quantum's Sheppard variance, and at least ``1e-12`` times
    the response variance (no infinite LL).

    Parameters
    ----------
    Gd : ndarray, shape (D, 10)
        Dataset Gram statistics.
    qfloor : ndarray, shape (D,)
        The quantum floor of each dataset's cell (:func:`quantum_floor`).

    Returns
    -------
    ndarray, shape (D,)
        ``max(1e-12 * var(u), qfloor)`` per dataset.
    """
    n = Gd[:, G_N]
    nn = np.where(n > 0, n, 1)
    vu = Gd[:, G_SUU] - Gd[:, G_SU] ** 2 / nn
    return np.maximum(VARIANCE_FLOOR * np.maximum(vu / nn, 1e-300), qfloor)


def quantum_floor(cells: pd.DataFrame, log: bool) -> np.ndarray:
    """Per-cell variance floor from the response quantum (Sheppard, METHOD §8).

    ``delta**2 / 12`` on the response scale; for log variants
    ``(delta / (median y + eps))**2 / 12``, the same rounding seen in log space.

    Parameters
    ----------
    cells : DataFrame
        Cells with ``delta`` (response quantum), ``y_median`` and ``eps``
        (:func:`bayesobs.fits.runtable.build_runs`).
    log : bool
        Floors for the log (Weber) variants.

    Returns
    -------
    ndarray, shape (cells,)
        The variance floor of each cell; 0 where the quantum is 0 or not finite.
    """
    delta = cells["delta"].to_numpy(float)
    if log:
        with np.errstate(invalid="ignore", divide="ignore"):
            delta = delta / (cells["y_median"].to_numpy(float) + cells["eps"].to_numpy(float))
        delta = np.where(np.isfinite(delta), delta, 0.0)
    return delta**2 / 12.0
