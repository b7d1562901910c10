"""Vectorised posterior summaries (bayesobs.fits.mcmcstats) against ArviZ's own, bit for bit."""

from __future__ import annotations

import warnings

import numpy as np
import pytest


def _ar1_draws(rng, n, chains, draws, phi, dtype):
    """``n`` parameters' AR(1) chains (autocorrelation ``phi``), each with its own scale and centre."""
    e = rng.standard_normal((n, chains, draws))
    x = np.empty_like(e)
    x[..., 0] = e[..., 0]
    for t in range(1, draws):
        x[..., t] = phi * x[..., t - 1] + e[..., t]
    return (x * rng.uniform(0.1, 3, (n, 1, 1)) + rng.normal(0, 5, (n, 1, 1))).astype(dtype)


@pytest.mark.parametrize(
    ("chains", "draws", "phi", "dtype"),
    [
        (4, 500, 0.0, np.float32),  # the benchmark's shape and the sampler's dtype
        (4, 500, 0.95, np.float64),  # long autocorrelation: Geyer's sequences run far
        (4, 200, -0.7, np.float64),  # antithetic chains: ESS above the draws
        (1, 100, 0.3, np.float64),  # one chain: no R-hat
        (2, 7, 0.3, np.float64),  # an odd number of draws: split chains drop the middle one
        (3, 4, 0.3, np.float32),  # the fewest draws ArviZ accepts
    ],
)
def test_vectorised_summary_is_arviz_summary(chains, draws, phi, dtype):
    """mcmcstats.summary_stats of many (chain, draw) arrays at once = az.summary and az.ess of
    each (rtol 1e-10, the contract; in fact equal bit for bit)."""
    import arviz as az
    import xarray as xr

    from bayesobs.fits.mcmcstats import summary_stats

    a = _ar1_draws(np.random.default_rng(draws + chains), 12, chains, draws, phi, dtype)
    a[0] = np.round(a[0])  # ties in the ranks
    got = summary_stats(a, hdi_prob=0.94)
    ds = xr.Dataset({"x": (("cell", "chain", "draw"), a)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # arviz's import-time announcement
        warnings.filterwarnings("ignore", message="Shape validation failed", category=UserWarning)
        ref = az.summary(ds, hdi_prob=0.94, round_to="none")
        ess_mean = az.ess(ds, method="mean")["x"].to_numpy()
    assert list(got) == [*ref.columns, "ess_mean"]
    for col in ref.columns:
        np.testing.assert_allclose(got[col], ref[col].to_numpy(), rtol=1e-10, atol=0, err_msg=col)
        np.testing.assert_array_equal(got[col], ref[col].to_numpy(), err_msg=col)
    np.testing.assert_array_equal(got["ess_mean"], ess_mean)
    assert np.isnan(got["r_hat"]).all() == (chains == 1)


def test_vectorised_summary_hands_constant_and_non_finite_draws_to_arviz():
    """A constant parameter (ESS = its size), a NaN and an infinity give ArviZ's numbers too."""
    import arviz as az
    import xarray as xr

    from bayesobs.fits.mcmcstats import summary_stats

    a = _ar1_draws(np.random.default_rng(3), 5, 4, 50, 0.2, np.float64)
    a[0] = 3.0
    a[1, 0, 5] = np.nan
    a[2, 1, 1] = np.inf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # arviz warns about the NaN and divides by zero
        got = summary_stats(a)
        ref = az.summary(xr.Dataset({"x": (("cell", "chain", "draw"), a)}), round_to="none")
    for col in ref.columns:
        np.testing.assert_array_equal(got[col], ref[col].to_numpy(), err_msg=col)
    assert got["ess_bulk"][0] == 200 and np.isnan(got["mean"][1])
    with pytest.raises(ValueError, match="hdi_prob"):
        summary_stats(a, hdi_prob=1.5)
    with pytest.raises(ValueError, match=r"\(n, chains, draws\)"):
        summary_stats(a[0])
