"""ArviZ's summary statistics of many posteriors at once: its arithmetic, vectorised over them.

:func:`arviz.summary` computes the diagnostics of each parameter (rank-normalised
split R-hat, bulk and tail ESS, MCSE of the mean and SD) in a Python call per
``(chain, draw)`` array, and Geyer's truncation of the autocorrelations in a
Python loop per lag: about 60 s of CPU time at the scale of a whole benchmark
(7,830 fits, about 30,000 parameters), about 14 s here.  :func:`summary_stats` does
the same operations on the same numbers for a stack of ``(chain, draw)`` arrays
in one NumPy call per step (ArviZ 0.23's ``_multichain_statistics``, ``_ess``,
``_rhat``, ``_z_scale``, ``_split_chains``, ``autocov``, ``_hdi`` and the
type-7 quantile of ``scipy.stats.mstats.mquantiles``), with every reduction over
the same elements in the same order, so that the values are ArviZ's
(``tests/test_posterior.py`` compares them; rtol 1e-10 is the contract, and on
the draws tested they are equal bit for bit).  A stack holding a NaN or an
infinity is handed to :func:`arviz.summary` itself, element by element.
"""

from __future__ import annotations

import numpy as np

SUMMARY_COLUMNS = ("mean", "sd", "mcse_mean", "mcse_sd", "ess_bulk", "ess_tail", "r_hat")
_RESOLUTION = np.finfo(float).resolution
_BLOM = 3 / 8  # arviz's _backtransform_ranks offset


def split_chains(ary: np.ndarray) -> np.ndarray:
    """``(..., C, D)`` to ``(..., 2C, D // 2)``: each chain's first and last halves (ArviZ's ``_split_chains``).

    Parameters
    ----------
    ary : ndarray
        Draws, chains and draws on the last two axes.

    Returns
    -------
    ndarray
        The first halves of all chains, then their last halves (the middle
        draw of an odd count is left out, as ArviZ leaves it).
    """
    half = ary.shape[-1] // 2
    return np.concatenate((ary[..., :half], ary[..., ary.shape[-1] - half :]), axis=-2)


def average_ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks along the last axis, ties given their average rank (``scipy.stats.rankdata``'s ``average``).

    Parameters
    ----------
    x : ndarray
        Values ranked along the last axis (no NaN).

    Returns
    -------
    ndarray
        float64 ranks, ``0.5 * (end + start + 1)`` of each value's run of ties,
        as SciPy computes them.
    """
    order = np.argsort(x, axis=-1)  # any sort: tied values share one rank
    s = np.take_along_axis(x, order, axis=-1)
    n = x.shape[-1]
    new = np.ones(s.shape, dtype=bool)
    new[..., 1:] = s[..., 1:] != s[..., :-1]
    pos = np.broadcast_to(np.arange(n), s.shape)
    start = np.maximum.accumulate(np.where(new, pos, 0), axis=-1)  # first index of each run
    end_new = np.ones(s.shape, dtype=bool)
    end_new[..., :-1] = new[..., 1:]
    end = np.minimum.accumulate(np.where(end_new, pos + 1, n)[..., ::-1], axis=-1)[..., ::-1]
    ranks = np.empty(s.shape)
    np.put_along_axis(ranks, order, 0.5 * (end + start + 1), axis=-1)
    return ranks


def z_scale(ary: np.ndarray) -> np.ndarray:
    """Rank-normalised values of each ``(..., C, D)`` block (ArviZ's ``_z_scale``).

    Parameters
    ----------
    ary : ndarray
        Blocks on the last two axes (ranked over the whole block).

    Returns
    -------
    ndarray
        ``norm.ppf((rank - 3/8) / (size - 3/4 + 1))``, average ranks, float64.
    """
    from scipy.special import ndtri  # norm.ppf of the standard normal, without its checks

    flat = ary.reshape(*ary.shape[:-2], -1)
    rank = average_ranks(flat)
    size = flat.shape[-1]
    return ndtri((rank - _BLOM) / (size - 2 * _BLOM + 1)).reshape(ary.shape)


def rhat(ary: np.ndarray) -> np.ndarray:
    """Potential scale reduction of each ``(..., chains, draws)`` block (ArviZ's ``_rhat``).

    Parameters
    ----------
    ary : ndarray
        Blocks of finite draws on the last two axes.

    Returns
    -------
    ndarray
        R-hat per block (float64).
    """
    ary = np.asarray(ary, dtype=float)
    n = ary.shape[-1]
    chain_mean = np.mean(ary, axis=-1)
    chain_var = np.var(ary, axis=-1, ddof=1)
    between = n * np.var(chain_mean, axis=-1, ddof=1)
    within = np.mean(chain_var, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):  # a constant block: NaN, as ArviZ's
        return np.sqrt((between / within + n - 1) / n)


def autocov(ary: np.ndarray) -> np.ndarray:
    """Autocovariance at every lag along the last axis, by FFT (ArviZ's ``autocov``).

    Parameters
    ----------
    ary : ndarray
        Series on the last axis.

    Returns
    -------
    ndarray
        Same shape: the biased autocovariance at lags ``0 .. n - 1``.
    """
    from scipy.fft import next_fast_len  # start-up time: loaded where it is used

    n = ary.shape[-1]
    m = next_fast_len(2 * n)
    ary = ary - ary.mean(-1, keepdims=True)
    f = np.fft.rfft(ary, n=m, axis=-1)
    f *= np.conjugate(f)
    cov = np.fft.irfft(f, n=m, axis=-1)[..., :n]
    cov /= n
    return cov


def ess(ary: np.ndarray) -> np.ndarray:
    """Effective sample size of each ``(..., chains, draws)`` block (ArviZ's ``_ess``).

    Geyer's initial positive and initial monotone sequences are taken one
    pair of lags at a time for all blocks together, with ArviZ's comparisons;
    the final sums are NumPy sums over the same elements as ArviZ's.

    Parameters
    ----------
    ary : ndarray
        Blocks of finite draws (booleans are taken as 0 and 1).

    Returns
    -------
    ndarray
        ESS per block (float64); the block's size where it is constant.
    """
    ary = np.asarray(ary, dtype=float)
    lead = ary.shape[:-2]
    n_chain, n_draw = ary.shape[-2:]
    ary = ary.reshape(-1, n_chain, n_draw)
    K = ary.shape[0]
    const = (ary.max(axis=(1, 2)) - ary.min(axis=(1, 2))) < _RESOLUTION
    acov = autocov(ary)
    chain_mean = ary.mean(axis=-1)
    # mean over chains of each lag, chains contiguous (as ArviZ's np.mean(acov[:, t]) sums them)
    acov_mean = np.ascontiguousarray(np.swapaxes(acov, 1, 2)).mean(axis=-1)  # (K, n_draw)
    mean_var = acov_mean[:, 0] * n_draw / (n_draw - 1.0)
    var_plus = mean_var * (n_draw - 1.0) / n_draw
    if n_chain > 1:
        var_plus = var_plus + np.var(chain_mean, axis=-1, ddof=1)
    with np.errstate(invalid="ignore", divide="ignore"):  # constant blocks: their size, below
        rho = 1.0 - (mean_var[:, None] - acov_mean) / var_plus[:, None]

    out = np.zeros((K, n_draw))  # ArviZ's rho_hat_t
    out[:, 0] = 1.0
    out[:, 1] = rho[:, 1]
    even, odd = np.ones(K), rho[:, 1].copy()
    going = np.ones(K, dtype=bool)
    t = 1
    last = np.full(K, 1)  # t after the positive-sequence loop
    while t < n_draw - 3:
        going &= (even + odd) > 0.0
        if not going.any():
            break
        even = np.where(going, rho[:, t + 1], even)
        odd = np.where(going, rho[:, t + 2], odd)
        keep = going & ((even + odd) >= 0)
        out[keep, t + 1] = even[keep]
        out[keep, t + 2] = odd[keep]
        t += 2
        last[going] = t
    max_t = last - 2
    idx = np.arange(K)
    up = even > 0
    out[idx[up], max_t[up] + 1] = even[up]
    t = 1
    while t <= max_t.max() - 2:  # Geyer's initial monotone sequence
        on = t <= max_t - 2
        prev = out[:, t - 1] + out[:, t]
        on &= (out[:, t + 1] + out[:, t + 2]) > prev
        out[on, t + 1] = prev[on] / 2.0
        out[on, t + 2] = out[on, t + 1]
        t += 2
    n_all = n_chain * n_draw
    tau = np.empty(K)
    for m in np.unique(max_t):  # the sums over ArviZ's slices, rows of one length at a time
        rows = max_t == m
        head = out[rows, : m + 1].sum(axis=-1)
        tail = out[rows, m + 1 : m + 2].sum(axis=-1)
        tau[rows] = -1.0 + 2.0 * head + tail
    floor = 1 / np.log10(n_all)
    tau = np.where(floor > tau, floor, tau)
    res = n_all / tau
    res[np.isnan(out).any(axis=-1)] = np.nan
    res[const] = ary.shape[1] * ary.shape[2]
    return res.reshape(lead)


def type7_quantiles(ary: np.ndarray, probs) -> np.ndarray:
    """Quantiles of each flattened ``(..., C, D)`` block as ``scipy.stats.mstats.mquantiles(alphap=1, betap=1)``.

    Parameters
    ----------
    ary : ndarray
        Blocks on the last two axes.
    probs : sequence of float
        Probabilities.

    Returns
    -------
    ndarray
        ``(..., len(probs))`` float64 quantiles (R's type 7).
    """
    x = np.sort(ary.reshape(*ary.shape[:-2], -1), axis=-1)
    n = x.shape[-1]
    p = np.atleast_1d(np.asarray(probs))
    m = 1 + p * (1.0 - 1 - 1)
    aleph = n * p + m
    k = np.floor(aleph.clip(1, n - 1)).astype(int)
    gamma = (aleph - k).clip(0, 1)
    return (1.0 - gamma) * x[..., k - 1] + gamma * x[..., k]


def hdi(ary: np.ndarray, prob: float) -> tuple[np.ndarray, np.ndarray]:
    """Highest-density interval of each flattened ``(..., C, D)`` block (ArviZ's ``_hdi``, unimodal).

    Parameters
    ----------
    ary : ndarray
        Blocks on the last two axes.
    prob : float
        The interval's probability.

    Returns
    -------
    tuple of ndarray
        Lower and upper ends (the draws' dtype).
    """
    x = np.sort(ary.reshape(*ary.shape[:-2], -1), axis=-1)
    n = x.shape[-1]
    inc = int(np.floor(prob * n))
    width = np.subtract(x[..., inc:], x[..., : n - inc], dtype=np.float64)
    lo = np.argmin(width, axis=-1)[..., None]
    return np.take_along_axis(x, lo, -1)[..., 0], np.take_along_axis(x, lo + inc, -1)[..., 0]


def multichain_statistics(ary: np.ndarray) -> dict[str, np.ndarray]:
    """``mcse_mean, mcse_sd, ess_bulk, ess_tail, r_hat`` and ``ess_mean`` of each block.

    ArviZ's ``_multichain_statistics`` (``focus="mean"``), vectorised over
    the leading axes; ``ess_mean`` is ``arviz.ess(method="mean")``.  The
    blocks must hold finite draws (:func:`summary_stats` sees to it).

    Parameters
    ----------
    ary : ndarray
        ``(..., chains, draws)``, at least 4 draws.

    Returns
    -------
    dict of str to ndarray
        Each statistic per block (float64; ``r_hat`` NaN with one chain).
    """
    C = ary.shape[-2]
    z_split = z_scale(split_chains(ary))
    q = type7_quantiles(ary, [0.05, 0.95])
    q05 = ess(split_chains(ary <= q[..., 0, None, None]))
    q95 = ess(split_chains(ary <= q[..., 1, None, None]))
    ess_tail = np.where(q95 < q05, q95, q05)  # Python's min(q05, q95)
    if C < 2:
        r_hat = np.full(ary.shape[:-2], np.nan)
    else:
        bulk = rhat(z_split)
        flat = ary.reshape(*ary.shape[:-2], -1)
        med = np.median(flat, axis=-1)
        tail = rhat(z_scale(split_chains(np.abs(ary - med[..., None, None]))))
        r_hat = np.where(tail > bulk, tail, bulk)  # Python's max(bulk, tail)
    ess_mean = ess(split_chains(ary))
    flat = ary.reshape(*ary.shape[:-2], -1)
    sims_c2 = (flat - flat.mean(axis=-1, keepdims=True)) ** 2
    sims_c2_sum = sims_c2.sum(axis=-1)
    var = sims_c2_sum / (sims_c2.shape[-1] - 1)
    mcse_mean = np.sqrt(var / ess_mean)
    ess_bulk = ess(z_split)
    evar = sims_c2_sum / sims_c2.shape[-1]
    ess_sims = ess(split_chains(sims_c2.reshape(ary.shape)))
    with np.errstate(invalid="ignore", divide="ignore"):  # a constant block: NaN, as ArviZ's
        varvar = ((sims_c2**2).mean(axis=-1) - evar**2) / ess_sims
        varsd = varvar / evar / 4
    return {
        "mcse_mean": np.asarray(mcse_mean, dtype=float),
        "mcse_sd": np.asarray(np.sqrt(varsd), dtype=float),
        "ess_bulk": ess_bulk,
        "ess_tail": ess_tail,
        "r_hat": r_hat,
        "ess_mean": ess_mean,
    }


def _arviz_rows(ary: np.ndarray, hdi_prob: float) -> list[dict]:
    """:func:`arviz.summary` of each ``(chain, draw)`` block of ``ary`` itself (the rare, non-finite ones)."""
    import arviz as az  # start-up time: ArviZ loads only for the blocks it summarises itself
    import xarray as xr  # start-up time: loaded with ArviZ

    out = []
    for block in ary.reshape(-1, *ary.shape[-2:]):
        ds = xr.Dataset({"x": (("chain", "draw"), block)})
        s = az.summary(ds, hdi_prob=hdi_prob, round_to="none").iloc[0]
        ess_mean = az.ess(ds, method="mean")["x"].item()
        out.append({**s.to_dict(), "ess_mean": ess_mean})
    return out


def summary_stats(ary: np.ndarray, hdi_prob: float = 0.94) -> dict[str, np.ndarray]:
    """The columns of :func:`arviz.summary` (unrounded) for each ``(chain, draw)`` block of ``ary``.

    Parameters
    ----------
    ary : ndarray
        ``(n, chains, draws)`` draws of ``n`` scalar parameters.
    hdi_prob : float, default 0.94
        Probability of the highest-density interval.

    Returns
    -------
    dict of str to ndarray
        ``mean``, ``sd``, ``hdi_{lo}%``, ``hdi_{hi}%`` (named as ArviZ names
        them), ``mcse_mean``, ``mcse_sd``, ``ess_bulk``, ``ess_tail``,
        ``r_hat`` and ``ess_mean`` (``arviz.ess(method="mean")``), each
        ``(n,)`` float64.
    """
    if not 0 < hdi_prob <= 1:
        raise ValueError(f"hdi_prob must lie in (0, 1], not {hdi_prob!r}")
    ary = np.asarray(ary)
    if ary.ndim != 3:
        raise ValueError(f"draws must be (n, chains, draws), not {ary.shape}")
    n = ary.shape[0]
    alpha = 1 - hdi_prob
    lo_name, hi_name = f"hdi_{100 * alpha / 2:g}%", f"hdi_{100 * (1 - alpha / 2):g}%"
    names = ["mean", "sd", lo_name, hi_name, "mcse_mean", "mcse_sd", "ess_bulk", "ess_tail"]
    out = {k: np.full(n, np.nan) for k in [*names, "r_hat", "ess_mean"]}
    finite = np.isfinite(ary).all(axis=(1, 2))
    good = ary[finite]
    if ary.shape[2] >= 4 and len(good):
        flat = good.reshape(len(good), -1)
        # xarray's mean and std over (chain, draw) with skipna (NumPy's nan-functions), as ArviZ calls them
        out["mean"][finite] = np.nanmean(flat, axis=-1)
        out["sd"][finite] = np.nanstd(flat, axis=-1, ddof=1)
        lo, hi = hdi(good, hdi_prob)
        out[lo_name][finite], out[hi_name][finite] = lo, hi
        for k, v in multichain_statistics(good).items():
            out[k][finite] = v
        rest = np.flatnonzero(~finite)
    else:
        rest = np.arange(n)
    if len(rest):
        for i, row in zip(rest, _arviz_rows(ary[rest], hdi_prob), strict=True):
            for k in out:
                out[k][i] = row.get(k, np.nan)
    return out


__all__ = [
    "SUMMARY_COLUMNS",
    "autocov",
    "average_ranks",
    "ess",
    "hdi",
    "multichain_statistics",
    "rhat",
    "split_chains",
    "summary_stats",
    "type7_quantiles",
]
