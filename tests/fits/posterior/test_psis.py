"""Vectorised PSIS-LOO (fits.posterior.psis) against arviz.loo and arviz.psislw, to a tolerance.

Stated tolerances: elpd_loo, se, p_loo and Pareto k to rtol 1e-8 (the same estimator; only
the order of floating-point sums differs); smoothed log weights compared as each row's sorted
values (tied draws may get their smoothed values in another order: the sums are unchanged).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from bayesobs.fits.posterior.psis import loo_many, psislw_rows, tail_length

az = pytest.importorskip("arviz")
RTOL = 1e-8


def _assert_loo_close(got: dict, i: int, ref) -> None:
    for key in ("elpd_loo", "se", "p_loo"):
        np.testing.assert_allclose(got[key][i], getattr(ref, key), rtol=RTOL, err_msg=key)
    np.testing.assert_allclose(got["pareto_k"][i], ref.pareto_k.values, rtol=RTOL, atol=1e-12)


def _assert_lw_close(got_lw, got_k, ref_lw, ref_k) -> None:
    np.testing.assert_allclose(got_k, ref_k, rtol=RTOL, atol=1e-12)
    np.testing.assert_allclose(np.sort(got_lw, axis=1), np.sort(ref_lw, axis=1), rtol=RTOL)


def _arviz_loo(ll, post):
    import xarray as xr

    C, D, _ = ll.shape
    cd = {"chain": np.arange(C), "draw": np.arange(D)}
    idata = az.InferenceData(
        posterior=xr.Dataset({k: (("chain", "draw"), v) for k, v in post.items()}, coords=cd),
        log_likelihood=xr.Dataset({"y": (("chain", "draw", "obs"), ll)}, coords=cd),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return az.loo(idata, pointwise=True)


def _fits(rng, n_fits=6, C=4, D=500, n=40):
    out = []
    for f in range(n_fits):
        theta = rng.normal(size=(C, D))
        y = rng.normal(size=n) * (1 + f)  # later fits: outlying observations, heavy tails
        ll = -0.5 * (y[None, None, :] - theta[..., None]) ** 2 * (0.3 + 0.2 * f)
        if f == 1:  # repeated draws (a rejected NUTS step): ties in the tail
            ll[:, 1::3] = ll[:, 0:-1:3]
        if f == 2:  # a far outlier: Pareto k above 0.7
            ll[..., 0] *= 40
        out.append((ll, {"a": theta, "b": np.exp(theta[:, ::-1])}))
    return out


def _reff(post, C, D):
    import xarray as xr

    ess = az.ess(xr.Dataset({k: (("chain", "draw"), v) for k, v in post.items()}), method="mean")
    return np.hstack([ess[v].values.flatten() for v in ess.data_vars]).mean() / (C * D)


def test_loo_many_agrees_with_arviz_loo_of_each_fit():
    rng = np.random.default_rng(3)
    fits = _fits(rng)
    ref = [_arviz_loo(ll, post) for ll, post in fits]
    got = loo_many(
        [ll for ll, _ in fits],
        [_reff(post, *ll.shape[:2]) for ll, post in fits],
    )
    assert any(np.max(r.pareto_k.values) > 0.7 for r in ref)  # the heavy tail is in the test
    for i, r in enumerate(ref):
        _assert_loo_close(got, i, r)


def test_one_chain_and_mixed_observation_counts():
    rng = np.random.default_rng(4)
    lls = [rng.normal(size=(1, 400, 7)) - 2, rng.normal(size=(1, 400, 12)) * 3]
    got = loo_many(lls, [1.0, 1.0])
    for i, ll in enumerate(lls):
        r = _arviz_loo(ll, {"a": rng.normal(size=(1, 400))})
        _assert_loo_close(got, i, r)


def test_psislw_rows_agrees_with_arviz_psislw():
    rng = np.random.default_rng(5)
    lw = rng.standard_t(3, size=(50, 1000))
    lw[3, :10] = lw[3, -10:]  # a tie
    lw[7] = 0.0  # all equal: no tail, k = inf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref_lw, ref_k = az.psislw(lw.copy(), 0.7)
    got_lw, got_k = psislw_rows(lw, 0.7)
    _assert_lw_close(got_lw, got_k, ref_lw, ref_k)


def test_rows_with_negligible_pareto_weights_agree_with_arviz():
    """Narrow posteriors: the generalized Pareto fit drops negligible grid weights."""
    rng = np.random.default_rng(6)
    fits = []
    for f in range(6):
        theta = rng.normal(size=(4, 500)) * (0.05 + 0.05 * (f % 3))
        y = rng.normal(size=30) * (1 + f % 2)
        fits.append((-0.5 * (y[None, None, :] - theta[..., None]) ** 2, {"a": theta}))
    got = loo_many([ll for ll, _ in fits], [_reff(post, 4, 500) for _, post in fits])
    for i, (ll, post) in enumerate(fits):
        ref = _arviz_loo(ll, post)
        _assert_loo_close(got, i, ref)


def test_fits_give_the_same_numbers_together_or_in_parts():
    """slice_results computes PSIS-LOO a few cells at a time (memory): the parts change nothing."""
    rng = np.random.default_rng(7)
    fits = _fits(rng, n_fits=5)
    lls, reff = [ll for ll, _ in fits], [0.6, 0.7, 0.8, 0.9, 1.1]
    whole = loo_many(lls, reff)
    parts = [loo_many(lls[:2], reff[:2]), loo_many(lls[2:], reff[2:])]
    for key in ("elpd_loo", "se", "p_loo"):
        np.testing.assert_allclose(whole[key], parts[0][key] + parts[1][key], rtol=1e-12)
    for a, b in zip(whole["pareto_k"], parts[0]["pareto_k"] + parts[1]["pareto_k"], strict=True):
        np.testing.assert_array_equal(a, b)


def test_repeated_draws_are_smoothed_as_arviz_smooths_them():
    """MCMC draws repeat (a NUTS trajectory may end where it began): most rows of a real fit
    have equal weights among their largest, and the tail is shorter when the cut-off value
    itself repeats; the smoothed weights agree with arviz.psislw's."""
    rng = np.random.default_rng(8)
    lw = rng.standard_t(4, size=(60, 1000))
    reps = rng.integers(1, 4, size=(60, 1000))  # each draw kept 1-3 times, as a chain does
    lw = np.take_along_axis(lw, np.minimum(np.cumsum(reps, axis=1) // 2, 999), axis=1)
    M = tail_length(1000, 0.8)  # the tail; the cut-off is the (M + 1)-th largest draw
    for i in range(0, 60, 5):  # the cut-off value repeated inside the tail
        order = np.argsort(lw[i])
        lw[i, order[-M]] = lw[i, order[-M - 1]]
    x = np.sort(lw, axis=1)[:, -M - 1 :]
    assert (x[::5, 1] == x[::5, 0]).all()  # cut-off ties
    assert (np.diff(x[:, 1:], axis=1) == 0).any(axis=1).mean() > 0.5  # ties inside the tail
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref_lw, ref_k = az.psislw(lw.copy(), 0.8)
    got_lw, got_k = psislw_rows(lw, 0.8)
    _assert_lw_close(got_lw, got_k, ref_lw, ref_k)
