"""Vectorised posterior summaries (fits.posterior.mcmcstats) against arviz.summary, to a tolerance."""

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


# the stated tolerances (relative): the draws' own moments and HDI to float32 rounding; ESS and
# the MCSEs (which divide by an ESS) to 5%: ArviZ adds the last autocorrelation pair's tail
# term to Geyer's sum, NumPyro does not; R-hat is the same formula (rank-normalised split)
TOLERANCE = {"mean": 1e-6, "sd": 1e-6, "hdi_3%": 1e-6, "hdi_97%": 1e-6, "r_hat": 1e-9}
ESS_TOLERANCE = 0.05


@pytest.mark.parametrize(
    ("chains", "draws", "phi", "dtype"),
    [
        (4, 500, 0.0, np.float32),  # the benchmark's shape and the sampler's dtype
        (4, 500, 0.95, np.float64),  # long autocorrelation: Geyer's sequences run far
        (4, 200, -0.7, np.float64),  # antithetic chains: ESS above the draws, capped at S log10 S
        (1, 100, 0.3, np.float64),  # one chain: no R-hat
    ],
)
def test_vectorised_summary_agrees_with_arviz_summary(chains, draws, phi, dtype):
    """mcmcstats.summary_stats of many (chain, draw) arrays at once = az.summary and az.ess of
    each, within TOLERANCE (ESS and MCSE within ESS_TOLERANCE)."""
    import arviz as az
    import xarray as xr

    from bayesobs.fits.posterior.mcmcstats import summary_stats

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
        rtol = TOLERANCE.get(col, ESS_TOLERANCE)
        np.testing.assert_allclose(got[col], ref[col].to_numpy(), rtol=rtol, err_msg=col)
    np.testing.assert_allclose(got["ess_mean"], ess_mean, rtol=ESS_TOLERANCE)
    assert np.isnan(got["r_hat"]).all() == (chains == 1)


@pytest.mark.parametrize(("chains", "draws"), [(2, 7), (3, 4)])
def test_the_fewest_draws_give_finite_diagnostics(chains, draws):
    """An odd number of draws (split chains drop the middle one) and the fewest ArviZ accepts:
    the same moments and R-hat as ArviZ's, and a positive ESS at most S log10 S."""
    import arviz as az
    import xarray as xr

    from bayesobs.fits.posterior.mcmcstats import summary_stats

    a = _ar1_draws(np.random.default_rng(draws + chains), 12, chains, draws, 0.3, np.float64)
    got = summary_stats(a)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = az.summary(xr.Dataset({"x": (("cell", "chain", "draw"), a)}), round_to="none")
    for col in ("mean", "sd", "r_hat"):
        np.testing.assert_allclose(got[col], ref[col].to_numpy(), rtol=0.05, err_msg=col)
    S = chains * draws
    for col in ("ess_bulk", "ess_tail", "ess_mean"):
        assert ((got[col] > 0) & (got[col] <= S * np.log10(S) + 1e-9)).all(), col


def test_vectorised_summary_hands_constant_and_non_finite_draws_to_arviz():
    """A constant parameter (ESS = its size); a NaN and an infinity are summarised by ArviZ itself."""
    import arviz as az
    import xarray as xr

    from bayesobs.fits.posterior.mcmcstats import summary_stats

    a = _ar1_draws(np.random.default_rng(3), 5, 4, 50, 0.2, np.float64)
    a[0] = 3.0
    a[1, 0, 5] = np.nan
    a[2, 1, 1] = np.inf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # arviz warns about the NaN and divides by zero
        got = summary_stats(a)
        ref = az.summary(xr.Dataset({"x": (("cell", "chain", "draw"), a)}), round_to="none")
    for col in ref.columns:  # the non-finite rows are ArviZ's own; the rest within tolerance
        np.testing.assert_array_equal(got[col][1:3], ref[col].to_numpy()[1:3], err_msg=col)
        rtol = TOLERANCE.get(col, ESS_TOLERANCE)
        np.testing.assert_allclose(got[col][3:], ref[col].to_numpy()[3:], rtol=rtol, err_msg=col)
    assert got["ess_bulk"][0] == 200 and np.isnan(got["mean"][1])
    with pytest.raises(ValueError, match="hdi_prob"):
        summary_stats(a, hdi_prob=1.5)
    with pytest.raises(ValueError, match=r"\(n, chains, draws\)"):
        summary_stats(a[0])
