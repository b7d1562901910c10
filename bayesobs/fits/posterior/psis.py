"""PSIS-LOO of many fits at once: ArviZ's arithmetic, vectorised over observations and fits.

:func:`arviz.loo` smooths the importance weights of each observation in a
Python loop (``_psislw``: a sort, a generalized Pareto fit, about 0.7 ms per
observation), which at the scale of a whole benchmark (7,830 fits of 120
observations) takes longer than the sampling.  :func:`loo_many` does the same
operations on the same numbers, one NumPy call over every observation of
every fit (an observation whose largest draws are tied, as repeated MCMC draws
are, gets its tail and its order from ArviZ's own calls, row by row), and hands
the rare observation its vectorised form cannot follow exactly (no Pareto
weight above ArviZ's negligible level) to ArviZ's own per-observation functions, so that every
value is the one :func:`arviz.loo` gives, bit for bit
(``tests/test_psis.py`` compares them).
"""

from __future__ import annotations

import numpy as np

PRIOR_BS = 3  # arviz's _gpdfit
PRIOR_K = 10
_EPS = np.finfo(float).eps
_CUTOFF_MIN = np.log(np.finfo(float).tiny)


def _logsumexp_rows(a: np.ndarray, b_inv: float | None = None) -> np.ndarray:
    """``arviz.stats.stats_utils.logsumexp`` of each row of ``a`` (same operations)."""
    a = np.array(a, dtype=np.float64, order="C")  # rows contiguous, as arviz sums them
    amax = a.max(axis=-1, keepdims=True)
    a -= amax
    np.exp(a, out=a)
    out = a.sum(axis=-1)
    np.log(out, out=out)
    if b_inv is not None:
        amax -= np.log(b_inv)
    return out + amax[..., 0]


def tail_length(n_samples: int, reff: float) -> int:
    """Draws in the Pareto tail: ``ceil(min(S / 5, 3 sqrt(S / reff)))`` (Vehtari et al. 2024).

    Parameters
    ----------
    n_samples : int
        ``S``, the posterior draws (all chains together).
    reff : float
        Relative efficiency of the fit (ESS over ``S``).

    Returns
    -------
    int
        ``M``, the number of largest weights that are Pareto-smoothed.
    """
    return int(np.ceil(min(n_samples / 5.0, 3 * (n_samples / reff) ** 0.5)))


def _gpdfit_rows(tails: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``arviz``'s ``_gpdfit`` of each row of sorted tails ``(rows, n)``.

    Returns ``k``, ``sigma`` and whether the row kept a weight (the rows
    where this vectorised form is exactly ArviZ's; the others are redone by
    ArviZ's own function).
    """
    n = tails.shape[1]
    m_est = 30 + int(n**0.5)
    b = 1 - np.sqrt(m_est / (np.arange(1, m_est + 1, dtype=float) - 0.5))  # (m,)
    b = b[None, :] / (PRIOR_BS * tails[:, int(n / 4 + 0.5) - 1])[:, None]
    b += (1 / tails[:, -1])[:, None]  # (rows, m)
    k_ary = np.log1p(-b[:, :, None] * tails[:, None, :]).mean(axis=2)
    len_scale = n * (np.log(-(b / k_ary)) - k_ary - 1)
    weights = 1 / np.exp(len_scale[:, None, :] - len_scale[:, :, None]).sum(axis=2)
    # arviz drops the negligible weights and sums the rest: the kept ones are moved to the
    # front of their row (in order) and summed over the row's first `kept`, rows of one count
    # together, so that every sum adds the same numbers in the same order as arviz's
    keep = weights >= 10 * _EPS
    kept = keep.sum(axis=1)
    exact = kept > 0
    front = np.argsort(~keep, axis=1, kind="stable")
    weights = np.take_along_axis(weights, front, axis=1)
    b = np.take_along_axis(b, front, axis=1)
    b_post = np.full(len(tails), np.nan)
    for m in np.unique(kept[exact]):
        rows = np.flatnonzero(kept == m)
        w = weights[rows, :m]
        w /= w.sum(axis=1, keepdims=True)
        b_post[rows] = np.sum(b[rows, :m] * w, axis=1)
    k_post = np.log1p(-b_post[:, None] * tails).mean(axis=1)
    sigma = -k_post / b_post
    k_post = (n * k_post + PRIOR_K * 0.5) / (n + PRIOR_K)
    return k_post, sigma, exact


def _gpinv_rows(probs: np.ndarray, k: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """``arviz``'s ``_gpinv`` for ``0 < probs < 1``, one ``(k, sigma)`` per row."""
    k, sigma = k[:, None], sigma[:, None]
    lp = np.log1p(-probs)[None, :]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        x = np.where(np.abs(k) < _EPS, -lp, np.expm1(-k * lp) / k)
    x = x * sigma
    return np.where(sigma <= 0, np.nan, x)


CHUNK_ROWS = 1024  # observations smoothed together (memory: rows x ~45 x tail length doubles)


def psislw_rows(log_weights: np.ndarray, reff) -> tuple[np.ndarray, np.ndarray]:
    """Pareto-smoothed, normalised log weights and ``k`` of each row, as ``arviz.psislw``.

    Parameters
    ----------
    log_weights : ndarray
        ``(rows, S)`` raw log weights, one observation a row.
    reff : float or ndarray
        Relative efficiency of each row's fit (``(rows,)``, or one for all).

    Returns
    -------
    lw : ndarray
        ``(rows, S)`` smoothed log weights.
    k : ndarray
        ``(rows,)`` Pareto shape estimates.
    """
    raw = np.ascontiguousarray(log_weights, dtype=np.float64)
    rows, S = raw.shape
    M = np.array([tail_length(S, float(r)) for r in np.broadcast_to(reff, (rows,))])
    x = raw.copy()
    k = np.full(rows, np.inf)
    slow = M <= 4  # arviz: too short a tail for the fit (k = inf, no smoothing)
    with np.errstate(all="ignore"):
        x -= x.max(axis=1, keepdims=True)
        for m in np.unique(M[~slow]):
            idx = np.flatnonzero(M == m)
            for lo in range(0, len(idx), CHUNK_ROWS):
                part = idx[lo : lo + CHUNK_ROWS]
                slow[part] = ~_smooth_tails(x, k, part, int(m))
        x -= _logsumexp_rows(x)[:, None]
    if slow.any():
        import arviz as az  # start-up time: ArviZ only for the rare rows it smooths itself

        for m in np.unique(M[slow]):  # arviz's own function for the rows it alone can do
            idx = np.flatnonzero(slow & (M == m))
            # any reff with this tail length gives arviz the same cut-off
            reff_m = float(np.broadcast_to(reff, (rows,))[idx[0]])
            x[idx], k[idx] = az.psislw(raw[idx], reff_m)
    return x, k


def _smooth_tails(x: np.ndarray, k: np.ndarray, part: np.ndarray, M: int) -> np.ndarray:
    """Smooth the ``M``-draw tails of rows ``part`` of ``x`` in place; which rows it could do.

    A row is done here when some Pareto weight is not negligible: then every
    operation is the one arviz's ``_psislw`` makes on the row (negligible
    weights are dropped as arviz drops them); rows with ties among their
    largest draws take :func:`_smooth_tied`.
    """
    xp = x[part]
    # only the M + 1 largest draws of a row are needed, in order: partition, then sort those
    # (the same values and, where a row is done here, the same tail positions as a full sort)
    top = np.argpartition(xp, xp.shape[1] - M - 1, axis=1)[:, -M - 1 :]
    order = np.take_along_axis(top, np.argsort(np.take_along_axis(xp, top, axis=1), axis=1), 1)
    xs = np.take_along_axis(xp, order, axis=1)
    cutoff = np.maximum(xs[:, 0], _CUTOFF_MIN)
    tail = xs[:, 1:]
    ok = (tail[:, 0] > cutoff) & (np.diff(tail, axis=1) > 0).all(axis=1)
    tied = _smooth_tied(xp, k, part, np.flatnonzero(~ok), cutoff)
    expcut = np.exp(cutoff)
    kk, sigma, exact = _gpdfit_rows(np.exp(tail[ok]) - expcut[ok, None])
    ok[ok] = exact
    kk, sigma = kk[exact], sigma[exact]
    rows = np.flatnonzero(ok)
    k[part[rows]] = kk
    fin = np.isfinite(kk)
    rows, kk, sigma = rows[fin], kk[fin], sigma[fin]
    smooth = np.log(_gpinv_rows(np.arange(0.5, M) / M, kk, sigma) + expcut[rows, None])
    xr = xp[rows]
    np.put_along_axis(xr, order[rows, -M:], smooth, axis=1)
    xr[xr > 0] = 0
    xp[rows] = xr
    x[part] = xp
    return ok | tied


def _smooth_tied(xp, k, part, rows, cutoff) -> np.ndarray:
    """Smooth rows ``rows`` of ``xp`` whose largest draws are tied, in place; which it did.

    MCMC draws repeat (a trajectory can end where it began), so most rows
    of a fit hold equal weights among their largest.  The tail is then the
    draws above the cut-off (fewer than ``M`` when the cut-off value itself
    repeats), and which tied draw gets which smoothed value is the order of
    ``numpy.argsort`` of the tail as ArviZ takes it: both are found row by
    row with ArviZ's own calls (cheap), and the Pareto fits of the rows
    with tails of one length are made together (:func:`_gpdfit_rows`, ArviZ's
    arithmetic).  Returns a mask over ``part``.
    """
    done = np.zeros(len(part), bool)
    by_length: dict[int, list] = {}
    for i in rows:
        x = xp[i]
        tailinds = np.flatnonzero(x > cutoff[i])  # np.where(x > xcutoff), as arviz
        if len(tailinds) <= 4:
            k[part[i]] = np.inf  # arviz: too few tail draws for a fit, no smoothing
            done[i] = True
            continue
        x_tail = x[tailinds]
        order = tailinds[np.argsort(x_tail)]  # arviz's x_tail_si, the same call
        by_length.setdefault(len(tailinds), []).append((i, order))
    for length, items in by_length.items():
        idx = np.array([i for i, _ in items])
        order = np.stack([o for _, o in items])
        expcut = np.exp(cutoff[idx])
        kk, sigma, exact = _gpdfit_rows(
            np.exp(np.take_along_axis(xp[idx], order, 1)) - expcut[:, None]
        )
        k[part[idx[exact]]] = kk[exact]
        done[idx[exact]] = True
        fin = exact & np.isfinite(kk)
        if fin.any():
            smooth = np.log(
                _gpinv_rows(np.arange(0.5, length) / length, kk[fin], sigma[fin])
                + expcut[fin, None]
            )
            xr = xp[idx[fin]]
            np.put_along_axis(xr, order[fin], smooth, axis=1)
            xr[xr > 0] = 0
            xp[idx[fin]] = xr
    return done


def loo_many(lls, reff) -> dict[str, list]:
    """PSIS-LOO of many fits, as ``arviz.loo(idata, pointwise=True)`` of each.

    Parameters
    ----------
    lls : list of ndarray
        Each fit's ``(chains, draws, n)`` pointwise log-likelihood (the same
        ``chains x draws`` for all; ``n`` may differ).
    reff : sequence of float
        Each fit's relative efficiency (``arviz.loo``'s: the mean ESS of the
        posterior variables over the number of draws; 1 for one chain).

    Returns
    -------
    dict
        Per fit: ``elpd_loo``, ``se``, ``p_loo`` (floats) and ``pareto_k``
        (``(n,)`` arrays), the values of ``arviz.loo``.
    """
    # arviz stacks (chain, draw) into one sample axis, observations first
    lik = [np.asarray(a, np.float64).reshape(-1, a.shape[-1]).T for a in lls]
    sizes = [a.shape[0] for a in lik]
    lik = np.ascontiguousarray(np.concatenate(lik))
    S = lik.shape[1]
    lw, k = psislw_rows(-lik, np.repeat(np.asarray(reff, float), sizes))
    lw += lik
    loo_i = _logsumexp_rows(lw)
    lppd_i = _logsumexp_rows(lik, b_inv=S)
    out: dict[str, list] = {"elpd_loo": [], "se": [], "p_loo": [], "pareto_k": []}
    lo = 0
    for n in sizes:
        li = loo_i[lo : lo + n]
        elpd = li.sum()
        out["elpd_loo"].append(elpd)
        out["se"].append((n * np.var(li)) ** 0.5)
        out["p_loo"].append(lppd_i[lo : lo + n].sum() - elpd)
        out["pareto_k"].append(k[lo : lo + n])
        lo += n
    return out


__all__ = ["loo_many", "psislw_rows", "tail_length"]
