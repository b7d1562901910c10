"""PSIS-LOO of many fits at once, vectorised over observations and fits.

Pareto-smoothed importance sampling (Vehtari et al. 2024): per observation, the
``M`` largest importance ratios are replaced by the expected order statistics of a
generalized Pareto fit (Zhang and Stephens 2009, with a weakly informative prior on
``k``).  ``arviz.loo`` smooths one observation at a time in a Python loop (about
0.7 ms each), which at the scale of a whole benchmark (7,830 fits of 120
observations) takes longer than the sampling; here every observation whose tail has
the same length is smoothed in one NumPy call.  The values agree with ``arviz.loo``
within the tolerances ``tests/fits/test_psis.py`` states (tied draws, as MCMC
repeats them, may get their smoothed values in another order; the sums are the same).
"""

from __future__ import annotations

import numpy as np

PRIOR_BS = 3  # Zhang and Stephens (2009): the grid's scale
PRIOR_K = 10  # Vehtari et al. (2024): prior weight of k = 0.5
_EPS = np.finfo(float).eps
_CUTOFF_MIN = np.log(np.finfo(float).tiny)


def _logsumexp_rows(a: np.ndarray, b_inv: float | None = None) -> np.ndarray:
    """log(sum(exp(row)) / b_inv) of each row of ``a``."""
    amax = a.max(axis=-1, keepdims=True)
    out = np.log(np.exp(a - amax).sum(axis=-1)) + amax[..., 0]
    return out if b_inv is None else out - np.log(b_inv)


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


def _gpdfit_rows(tails: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Generalized Pareto ``k`` and ``sigma`` of each row of sorted, positive tails ``(rows, n)``."""
    n = tails.shape[1]
    m_est = 30 + int(n**0.5)
    b = 1 - np.sqrt(m_est / (np.arange(1, m_est + 1, dtype=float) - 0.5))  # (m,)
    b = b[None, :] / (PRIOR_BS * tails[:, int(n / 4 + 0.5) - 1])[:, None]
    b += (1 / tails[:, -1])[:, None]  # (rows, m)
    k_ary = np.log1p(-b[:, :, None] * tails[:, None, :]).mean(axis=2)
    len_scale = n * (np.log(-(b / k_ary)) - k_ary - 1)
    weights = 1 / np.exp(len_scale[:, None, :] - len_scale[:, :, None]).sum(axis=2)
    weights = np.where(weights >= 10 * _EPS, weights, 0.0)  # negligible weights dropped
    b_post = (b * weights).sum(axis=1) / weights.sum(axis=1)
    k_post = np.log1p(-b_post[:, None] * tails).mean(axis=1)
    sigma = -k_post / b_post
    return (n * k_post + PRIOR_K * 0.5) / (n + PRIOR_K), sigma


def _gpinv_rows(probs: np.ndarray, k: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """Generalized Pareto quantiles at ``0 < probs < 1``, one ``(k, sigma)`` per row."""
    k, sigma = k[:, None], sigma[:, None]
    lp = np.log1p(-probs)[None, :]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        x = np.where(np.abs(k) < _EPS, -lp, np.expm1(-k * lp) / k)
    return np.where(sigma <= 0, np.nan, x * sigma)


def psislw_rows(log_weights: np.ndarray, reff) -> tuple[np.ndarray, np.ndarray]:
    """Pareto-smoothed, normalised log weights and ``k`` of each row (``arviz.psislw``'s).

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
        ``(rows,)`` Pareto shape estimates (``inf`` where the tail is too short to fit).
    """
    x = np.array(log_weights, dtype=np.float64)
    rows, S = x.shape
    M = np.array([tail_length(S, float(r)) for r in np.broadcast_to(reff, (rows,))])
    k = np.full(rows, np.inf)
    x -= x.max(axis=1, keepdims=True)
    for m in np.unique(M[M > 4]):  # a tail of M draws fits; shorter, k = inf and no smoothing
        rows_m = np.flatnonzero(M == m)
        xm = x[rows_m]
        # the M + 1 largest draws in order: the cut-off, then the tail
        top = np.argpartition(xm, S - m - 1, axis=1)[:, S - m - 1 :]
        order = np.take_along_axis(top, np.argsort(np.take_along_axis(xm, top, 1), 1), 1)
        xs = np.take_along_axis(xm, order, axis=1)
        cutoff = np.maximum(xs[:, 0], _CUTOFF_MIN)
        n_tail = (xs > cutoff[:, None]).sum(axis=1)  # draws tied with the cut-off stay out
        for n in np.unique(n_tail[n_tail > 4]):  # tails of one length together
            sel = np.flatnonzero(n_tail == n)
            expcut = np.exp(cutoff[sel])
            kk, sigma = _gpdfit_rows(np.exp(xs[sel, -n:]) - expcut[:, None])
            k[rows_m[sel]] = kk
            fin = np.isfinite(kk)
            sel, kk, sigma, expcut = sel[fin], kk[fin], sigma[fin], expcut[fin]
            with np.errstate(divide="ignore"):
                smooth = np.log(_gpinv_rows(np.arange(0.5, n) / n, kk, sigma) + expcut[:, None])
            part = xm[sel]
            np.put_along_axis(part, order[sel, -n:], np.minimum(smooth, 0.0), axis=1)
            xm[sel] = part
        x[rows_m] = xm
    x -= _logsumexp_rows(x)[:, None]
    return x, k


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
        (``(n,)`` arrays), as ``arviz.loo`` reports them.
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
