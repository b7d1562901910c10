"""Interleaved fits (METHOD §10): one ``rho_c`` per level of an interleaved column.

The Kalman variants' objective over the vector of ``log rho_c``: a grid over
``[-18, 18]^L`` (:func:`level_grid`), the grid's best local minima
(:func:`grid_local_minima`), then a joint projected Newton refinement
(:func:`newton_levels`).  :func:`level_evaluator` is the objective on blocks
of columns; the lapse EM (:mod:`bayesobs.fits.lapse`) reuses it.
"""

from __future__ import annotations

import numpy as np

from .kernel import G_N, rss_kalman

# ------------------------------------------------- interleaved levels (§10)
LEVEL_GRID_CANDIDATES = 6000  # grid points over the vector of log rho_c


LEVEL_STARTS = 3  # best local minima of the grid refined per (variant, dataset)


LOG_RHO_BOUND = 18.0  # the grid's box of log rho_c, [-18, 18]


# the refinement's box: beyond +-18 the objective still moves (up to 0.11 LL on Qu & Shi); by
# +-40 it is flat to double precision (K ~ 1e-15 or K = 1), and a coordinate that ends beyond
# the grid's box is evaluated at its limit, rho = 0 or inf, and reported as such
LOG_RHO_SEARCH = 40.0


NEWTON_ITERATIONS = 60


NEWTON_H = 2e-3  # finite-difference step in log rho


NEWTON_RADIUS = 2.0  # first trust radius (largest step per coordinate, log rho)


LEVEL_BLOCK_COLUMNS = 8192  # (item, run) columns per filter call: bounded memory


def level_grid(L: int) -> np.ndarray:
    """Candidate vectors of ``log rho_c``: ``(Q, L)``, the ends -18 and 18 included.

    Parameters
    ----------
    L : int
        Number of levels, 1 or more.

    Returns
    -------
    ndarray, shape (Q, L)
        The full grid of ``per`` evenly spaced values of ``[-18, 18]`` per
        level, ``per = max(5, round(LEVEL_GRID_CANDIDATES ** (1 / L)))`` and
        ``Q = per**L``, the last level varying fastest.
    """
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
    or EM responsibilities (METHOD §11).

    Parameters
    ----------
    z, u : ndarray, shape (T, R)
        Stimuli and responses on the model scale, time-major.
    obs : ndarray, shape (T, R)
        Weight of each trial (mask or responsibilities).
    lev : ndarray of int, shape (T, R)
        Level code of each trial, in ``[0, L)``.
    rho : ndarray, shape (..., L)
        Noise ratio of each level; the leading shape broadcasts against ``(R,)``.
    L : int
        Number of levels.

    Returns
    -------
    s1, s2, s3 : ndarray, shape (L, *lead)
        ``sum mu``, ``sum mu^2`` and ``sum mu u`` over each level's trials.
    """
    rho = np.clip(np.asarray(rho, dtype=float), 1e-300, 1e300)  # the limits 0 and inf
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
        with np.errstate(over="ignore"):
            rp = r * pm  # inf only at the limits: K = 1, P = 0
        k = 1.0 / (1.0 + 1.0 / rp)
        P = pm / (rp + 1.0)
        mu += k * (z[t] - mu)
        accumulate(t)
    return s1, s2, s3


def level_objective(rss, n, floor):
    """``sum_c [n_c log s2_c + RSS_c / s2_c]`` (minus twice the profiled LL, up to constants).

    Parameters
    ----------
    rss : ndarray, shape (L, ...)
        Residual sum of squares per level (clipped at 0).
    n : ndarray, shape (L, ...)
        Observed responses per level; a level with none adds 0.
    floor : ndarray, shape (L, ...)
        Variance floor per level; ``s2_c = max(RSS_c / n_c, floor_c)``.

    Returns
    -------
    ndarray
        The objective summed over the levels (axis 0).
    """
    rss = np.maximum(rss, 0.0)  # a sum of squares: rounding can take it below 0
    with np.errstate(invalid="ignore", divide="ignore"):
        s2 = np.maximum(rss / np.where(n > 0, n, 1.0), floor)
        term = np.where(n > 0, n * np.log(s2) + rss / s2, 0.0)
    return term.sum(axis=0)


def fit_kalman_levels(W, Gds, floors, z, u, obs, lev, L):
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
    joint Newton step does not.

    Parameters
    ----------
    W : scipy.sparse matrix, shape (D, runs)
        Run counts per dataset.
    Gds : ndarray, shape (L, D, 10)
        Dataset Gram statistics per level.
    floors : ndarray, shape (L, D)
        Variance floors per level and dataset.
    z, u : ndarray, shape (T, runs)
        Centred stimuli and responses on the model scale, time-major.
    obs : ndarray, shape (T, runs)
        Observed responses.
    lev : ndarray of int, shape (T, runs)
        Level code of each trial.
    L : int
        Number of levels.

    Returns
    -------
    dict of str to tuple
        ``{"kalman": (rss, {"rho"}), "kalman_gain": (rss, {"rho", "g",
        "delta"})}``, each array of shape ``(L, D)``.
    """
    D = W.shape[0]
    n = Gds[..., G_N]  # (L, D)
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

    th, f = newton_levels(objective, th0, f0, bound=LOG_RHO_SEARCH)
    th, f = _at_limits(objective, th, f)
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

    Parameters
    ----------
    values : ndarray, shape (..., per**L)
        Objective on the grid.
    per : int
        Grid points per axis.
    L : int
        Number of axes (levels).
    K : int
        How many minima to return.

    Returns
    -------
    ndarray of int, shape (..., K)
        Flat grid indices of the minima, lowest value first, ``-1`` padding.
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
    :data:`LEVEL_BLOCK_COLUMNS` columns.

    Parameters
    ----------
    W : scipy.sparse matrix, shape (D, runs)
        Run counts per dataset.
    Gds : ndarray, shape (L, D, 10)
        Dataset Gram statistics per level.
    floors : ndarray, shape (L, D)
        Variance floors per level and dataset.
    z, u, obs, lev : ndarray, shape (T, runs)
        As in :func:`fit_kalman_levels`.
    L : int
        Number of levels.

    Returns
    -------
    callable
        ``evaluate(th, j, d) -> (f, rss, g, delta)``: the objective
        (:func:`level_objective`) ``f`` of shape ``(M,)`` and ``(L, M)``
        arrays of RSS, ``g`` and ``delta``.
    """
    D = W.shape[0]
    coo = W.tocoo()
    d_p, r_p, w_p = coo.row, coo.col, coo.data  # (dataset, run) pairs, by dataset (CSR order)
    first = np.searchsorted(d_p, np.arange(D + 1))
    n = Gds[..., G_N]

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


def _at_limits(objective, th: np.ndarray, f: np.ndarray):
    """Coordinates beyond the grid's box to their limit (``+-inf``), else to ``+-LOG_RHO_SEARCH``, where no worse."""
    for _ in range(2):  # a second pass: a limit taken by one level can free another's
        for c in range(th.shape[1]):
            items = np.flatnonzero(np.abs(th[:, c]) > LOG_RHO_BOUND - 1e-9)
            tol = 1e-9 * np.maximum(1.0, np.abs(f[items]))
            for end in (np.inf, LOG_RHO_SEARCH):
                if not len(items):
                    break
                lim = th[items].copy()
                lim[:, c] = np.copysign(end, lim[:, c])
                fl = objective(lim, items)
                ok = fl <= f[items] + tol
                th[items[ok]], f[items[ok]] = lim[ok], np.minimum(fl[ok], f[items[ok]])
                items, tol = items[~ok], tol[~ok]
    return th, f


def newton_levels(
    objective,
    th0: np.ndarray,
    f0: np.ndarray,
    iterations: int = NEWTON_ITERATIONS,
    bound: float = LOG_RHO_BOUND,
):
    """Minimise ``objective`` from every start at once: projected trust-region Newton.

    ``objective(th (M', L), items (M',))`` evaluates items ``items`` at
    ``th``; ``th0 (M, L)`` are starts in ``[-bound, bound]^L`` with values ``f0``.
    Each iteration: central finite differences give gradient and Hessian;
    coordinates at a bound whose gradient points outward stay there; the
    step is Newton's on the others with each Hessian eigenvalue replaced by
    its absolute value (a saddle or a flat direction gives a descent step,
    not an ascent), cut to the trust radius; the best of the step and two
    shorter ones along it is accepted where it lowers the objective (the
    radius grows), otherwise the radius shrinks.  An item stops when its
    radius falls below 1e-9 or a step changes it by less than 1e-12.
    At most ``iterations`` steps (a generalised EM step needs only a few).

    Parameters
    ----------
    objective : callable
        ``objective(th, items)``: values of shape ``(M',)`` at points ``th``
        ``(M', L)`` for the items ``items``.
    th0 : ndarray, shape (M, L)
        Starting points in ``[-18, 18]^L``.
    f0 : ndarray, shape (M,)
        Objective at the starts (NaN: the item is not refined).
    iterations : int, default NEWTON_ITERATIONS
        Most Newton steps.
    bound : float, default LOG_RHO_BOUND
        The box ``[-bound, bound]^L`` the points stay in.

    Returns
    -------
    th : ndarray, shape (M, L)
        The final points.
    f : ndarray, shape (M,)
        Their values, never above ``f0`` (NaN starts come back as ``inf``).
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
        pts = np.clip(x[None] + offsets[:, None], -bound - 1.0, bound + 1.0)
        fs = objective(pts.reshape(-1, L), np.tile(items, len(offsets))).reshape(len(offsets), -1)
        fs[0] = f[items]
        grad, hess = _derivatives(fs, L, NEWTON_H)
        ok = np.isfinite(grad).all(1) & np.isfinite(hess).all((1, 2))
        grad = np.where(ok[:, None], grad, 0.0)
        hess = np.where(ok[:, None, None], hess, 0.0)
        pinned = ((x <= -bound) & (grad > 0)) | ((x >= bound) & (grad < 0))
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
        trial = np.clip(x[None] + fractions[:, None, None] * step[None], -bound, bound)
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
