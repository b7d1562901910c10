"""The columns of ``arviz.summary`` for many posteriors at once, through ``numpyro.diagnostics``.

``arviz.summary`` computes each parameter's diagnostics in Python calls per
``(chain, draw)`` array (about 60 s of CPU time for the 30,000 parameters of a
whole benchmark); NumPyro's ``effective_sample_size``, ``split_gelman_rubin`` and
``hpdi`` take any trailing dimensions, so all parameters go through one call.  The
statistics are those of Vehtari et al. (2021), as ArviZ reports them: rank-normalised
split R-hat (bulk and folded, the larger), bulk and tail ESS, MCSE of the mean and
SD.  They agree with ``arviz.summary`` within the tolerances
``tests/fits/test_mcmcstats.py`` states (ESS to a few percent: ArviZ adds the last
autocorrelation pair's tail term and floors ``tau`` at ``1 / log10(S)``).  A
parameter with a non-finite draw is handed to ``arviz.summary`` itself.
"""

from __future__ import annotations

import numpy as np

_BLOM = 3 / 8  # rank normalisation's offset (Blom 1958), as Vehtari et al. (2021) take it


def _split(a: np.ndarray) -> np.ndarray:
    """``(n, C, D)`` to ``(n, 2C, D // 2)``: each chain's halves (the middle draw of odd ``D`` left out)."""
    half = a.shape[-1] // 2
    return np.concatenate((a[..., :half], a[..., a.shape[-1] - half :]), axis=-2)


def _z_scale(a: np.ndarray) -> np.ndarray:
    """Rank-normalised draws of each ``(C, D)`` block (average ranks for ties)."""
    from scipy.special import ndtri  # start-up time: SciPy's part loads where used
    from scipy.stats import rankdata

    flat = a.reshape(len(a), -1)
    ranks = rankdata(flat, axis=-1)
    return ndtri((ranks - _BLOM) / (flat.shape[-1] - 2 * _BLOM + 1)).reshape(a.shape)


def _ess(a: np.ndarray) -> np.ndarray:
    """Effective sample size of each ``(C, D)`` block; its size where it is constant."""
    # optional weight: NumPyro (and JAX) load only here
    from numpyro.diagnostics import effective_sample_size

    a = np.asarray(a, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = effective_sample_size(np.moveaxis(a, 0, -1))
    size = a.shape[1] * a.shape[2]
    cap = size * np.log10(size)  # tau = S / ESS at least 1 / log10(S) (Stan, ArviZ)
    out = np.where((out < 0) | (out > cap), cap, out)
    const = np.ptp(a, axis=(1, 2)) < np.finfo(float).resolution
    return np.where(const, size, out)


def _rhat(a: np.ndarray) -> np.ndarray:
    """Split R-hat of each ``(C, D)`` block."""
    # optional weight: NumPyro (and JAX) load only here
    from numpyro.diagnostics import split_gelman_rubin

    with np.errstate(invalid="ignore", divide="ignore"):
        return split_gelman_rubin(np.moveaxis(a, 0, -1))


def _finite_stats(a: np.ndarray, hdi_prob: float) -> dict[str, np.ndarray]:
    """Every column for blocks of finite draws."""
    from numpyro.diagnostics import hpdi  # optional weight: NumPyro (and JAX) load only here

    n, C = a.shape[:2]
    flat = a.reshape(n, -1)
    mean, sd = flat.mean(axis=-1, dtype=float), flat.std(axis=-1, ddof=1, dtype=float)
    lo, hi = hpdi(flat, hdi_prob, axis=-1).T
    q05, q95 = np.quantile(flat, [0.05, 0.95], axis=-1)
    ess_tail = np.minimum(
        _ess(_split(a <= q05[:, None, None])), _ess(_split(a <= q95[:, None, None]))
    )
    if C < 2:
        r_hat = np.full(n, np.nan)
    else:
        folded = np.abs(a - np.median(flat, axis=-1)[:, None, None])
        r_hat = np.maximum(_rhat(_z_scale(a)), _rhat(_z_scale(folded)))
    ess_mean = _ess(_split(a))
    dev2 = (flat - mean[:, None]) ** 2
    var_pop = dev2.mean(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):  # a constant block: NaN, as ArviZ's
        varvar = ((dev2**2).mean(axis=-1) - var_pop**2) / _ess(_split(dev2.reshape(a.shape)))
        mcse_sd = np.sqrt(varvar / var_pop / 4)
    return {
        "mean": mean,
        "sd": sd,
        "lo": lo,
        "hi": hi,
        "mcse_mean": sd / np.sqrt(ess_mean),
        "mcse_sd": mcse_sd,
        "ess_bulk": _ess(_split(_z_scale(a))),
        "ess_tail": ess_tail,
        "r_hat": r_hat,
        "ess_mean": ess_mean,
    }


def _arviz_rows(ary: np.ndarray, hdi_prob: float) -> list[dict]:
    """:func:`arviz.summary` of each ``(chain, draw)`` block of ``ary`` itself (the non-finite ones)."""
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
        ``r_hat`` and ``ess_mean`` (the ESS of the mean), each ``(n,)`` float64.
    """
    if not 0 < hdi_prob <= 1:
        raise ValueError(f"hdi_prob must lie in (0, 1], not {hdi_prob!r}")
    ary = np.asarray(ary)
    if ary.ndim != 3:
        raise ValueError(f"draws must be (n, chains, draws), not {ary.shape}")
    alpha = 1 - hdi_prob
    lo_name, hi_name = f"hdi_{100 * alpha / 2:g}%", f"hdi_{100 * (1 - alpha / 2):g}%"
    names = ["mean", "sd", lo_name, hi_name, "mcse_mean", "mcse_sd", "ess_bulk", "ess_tail"]
    out = {k: np.full(len(ary), np.nan) for k in [*names, "r_hat", "ess_mean"]}
    finite = np.isfinite(ary).all(axis=(1, 2))
    if ary.shape[2] >= 4 and finite.any():
        stats = _finite_stats(ary[finite], hdi_prob)
        stats[lo_name], stats[hi_name] = stats.pop("lo"), stats.pop("hi")
        for k, v in stats.items():
            out[k][finite] = v
        rest = np.flatnonzero(~finite)
    else:
        rest = np.arange(len(ary))
    for i, row in zip(rest, _arviz_rows(ary[rest], hdi_prob), strict=True):
        for k in out:
            out[k][i] = row.get(k, np.nan)
    return out


__all__ = ["summary_stats"]
