"""Observer functions against independent references (loops, scipy.stats)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import RTOL
from naive import loop_kalman, naive_loglik
from scipy import stats

from bayesobs.fits.observers import (
    VARIANT_NAMES,
    VARIANTS,
    get_variant,
    kalman_gains,
    kalman_means,
    loglik,
    predict_mean,
    predict_response,
    simulate,
)

PARAMS = {
    "linear": {"w": 0.8, "b": 0.1, "sigma": 0.05},
    "static": {"w_prior": 0.35, "sigma": 0.05},
    "static_gain": {"w_prior": 0.35, "g": 1.2, "delta": -0.05, "sigma": 0.05},
    "kalman": {"rho": 0.7, "sigma": 0.05},
    "kalman_gain": {"rho": 0.7, "g": 0.9, "delta": 0.02, "sigma": 0.05},
}
PARAMS.update(
    {k.replace("_gain", "_log_gain") if "gain" in k else k + "_log": v for k, v in PARAMS.items()}
)


def test_variant_table_matches_method():
    assert len(VARIANTS) == 10
    ks = {v.name: v.k for v in VARIANTS}
    assert ks == {
        "linear": 3,
        "static": 2,
        "static_gain": 4,
        "kalman": 2,
        "kalman_gain": 4,
        "linear_log": 3,
        "static_log": 2,
        "static_log_gain": 4,
        "kalman_log": 2,
        "kalman_log_gain": 4,
    }
    assert [v.name for v in VARIANTS if v.bayesian] == [
        n for n in VARIANT_NAMES if n.startswith(("static", "kalman"))
    ]
    assert {v.name for v in VARIANTS if v.sequential} == {
        "kalman",
        "kalman_gain",
        "kalman_log",
        "kalman_log_gain",
    }
    with pytest.raises(ValueError, match="unknown observer variant"):
        get_variant("bogus")


def test_kalman_gain_limits_closed_form():
    T = 30
    t = np.arange(1, T + 1)
    np.testing.assert_allclose(kalman_gains(0.0, T), 1.0 / t, rtol=RTOL)
    np.testing.assert_allclose(kalman_gains(np.inf, T), np.ones(T))
    # rho -> inf approaches 1, rho -> 0 approaches 1/t
    np.testing.assert_allclose(kalman_gains(1e9, T), np.ones(T), rtol=1e-8)
    np.testing.assert_allclose(kalman_gains(1e-12, T), 1.0 / t, rtol=1e-9)


@pytest.mark.parametrize("rho", [0.0, 1e-3, 0.3, 2.0, 50.0, np.inf])
def test_kalman_means_match_loop(rho):
    z = np.random.default_rng(1).normal(size=25)
    np.testing.assert_allclose(kalman_means(z, rho), loop_kalman(z, rho), rtol=RTOL, atol=1e-12)


def test_kalman_rho_zero_is_running_mean():
    z = np.random.default_rng(2).normal(size=20)
    np.testing.assert_allclose(kalman_means(z, 0.0), np.cumsum(z) / np.arange(1, 21), rtol=RTOL)


def test_kalman_means_batch_over_rho():
    z = np.random.default_rng(3).normal(size=15)
    rhos = np.array([0.0, 0.5, 5.0])
    batch = kalman_means(z, rhos[:, None][:, 0])
    for i, r in enumerate(rhos):
        np.testing.assert_allclose(batch[i], loop_kalman(z, r), rtol=RTOL)


@pytest.fixture
def data():
    rng = np.random.default_rng(4)
    x = rng.uniform(1.0, 10.0, 60)
    run = np.repeat(["a", "b", "c"], 20)
    y = x * rng.uniform(0.8, 1.2, 60)
    y[[5, 33]] = np.nan  # missing responses
    return x, y, run


@pytest.mark.parametrize("name", VARIANT_NAMES)
def test_loglik_matches_scipy_reference(name, data):
    x, y, run = data
    eps = 1e-3 * x.max()
    ours = loglik(name, PARAMS[name], x, y, run)
    ref = naive_loglik(name, PARAMS[name], x, y, run, eps)
    np.testing.assert_allclose(ours, ref, rtol=RTOL)


@pytest.mark.parametrize("name", [n for n in VARIANT_NAMES if "log" in n])
def test_log_variant_jacobian_is_lognormal_density(name, data):
    """With the Jacobian, a log variant is a shifted log-normal density of y."""
    x, y, run = data
    eps = 1e-3 * x.max()
    m = predict_mean(name, PARAMS[name], x, run)
    obs = ~np.isnan(y)
    ref = stats.lognorm.logpdf(y[obs] + eps, s=PARAMS[name]["sigma"], scale=np.exp(m[obs])).sum()
    np.testing.assert_allclose(loglik(name, PARAMS[name], x, y, run), ref, rtol=RTOL)


def test_static_prior_mean_is_run_mean(data):
    x, _, run = data
    m = predict_mean("static", {"w_prior": 1.0, "sigma": 1.0}, x, run)
    for r in "abc":
        np.testing.assert_allclose(m[run == r], x[run == r].mean(), rtol=RTOL)


def test_missing_response_stays_in_sequence(data):
    """A NaN response still updates the Kalman observer and the run mean."""
    x, y, run = data
    full = loglik("kalman", PARAMS["kalman"], x, np.where(np.isnan(y), 1.0, y), run)
    miss = loglik("kalman", PARAMS["kalman"], x, y, run)
    m = predict_mean("kalman", PARAMS["kalman"], x, run)
    term = stats.norm.logpdf(1.0, m[[5, 33]], PARAMS["kalman"]["sigma"]).sum()
    np.testing.assert_allclose(full - term, miss, rtol=RTOL)


@pytest.mark.parametrize("name", ["static", "kalman_gain", "linear_log"])
def test_simulate_matches_model_moments(name):
    rng = np.random.default_rng(5)
    x = np.tile(np.linspace(1, 9, 30), 1)
    run = np.zeros(30)
    draws = np.stack([simulate(name, PARAMS[name], x, run, rng=rng) for _ in range(4000)])
    v = get_variant(name)
    u = np.log(draws + 1e-3 * x.max()) if v.log else draws
    m = predict_mean(name, PARAMS[name], x, run)
    np.testing.assert_allclose(u.mean(0), m, atol=4 * PARAMS[name]["sigma"] / np.sqrt(4000) * 1.5)
    np.testing.assert_allclose(u.std(0).mean(), PARAMS[name]["sigma"], rtol=0.03)
    if v.log:  # the central prediction is the median on the response scale
        np.testing.assert_allclose(
            np.median(draws, 0), predict_response(name, PARAMS[name], x, run), rtol=0.02
        )
