"""The model scale shared by the MLE and posterior fits (`bayesobs.fits.observers.scale`)."""

import numpy as np

from bayesobs.fits.observers.scale import cell_moments, model_scale


def _runs(rng):
    x = rng.uniform(0.1, 0.9, (5, 7))
    y = rng.uniform(0.1, 0.9, (5, 7))
    present = np.ones((5, 7), bool)
    present[1, 5:] = False
    present[3, 6:] = False
    x[~present] = np.nan
    y[~present] = np.nan
    y[2, 3] = np.nan  # a missing response
    return x, y, present


def test_log_scale_and_jacobian_by_hand():
    x, y, present = _runs(np.random.default_rng(0))
    z, u, obs, jac = model_scale(x, y, present, 0.01, log=True)
    assert not obs[2, 3] and not obs[1, 5] and obs.sum() == present.sum() - 1
    np.testing.assert_allclose(z[present], np.log(x[present] + 0.01), rtol=1e-15)
    np.testing.assert_allclose(u[obs], np.log(y[obs] + 0.01), rtol=1e-15)
    assert (z[~present] == 0).all() and (u[~obs] == 0).all()
    np.testing.assert_array_equal(jac, u)  # -log(y + eps) enters the likelihood per response
    lin = model_scale(x, y, present, 0.01, log=False)
    np.testing.assert_array_equal(lin[0][present], x[present])
    assert (lin[3] == 0).all()


def test_skipped_cells_stay_zero():
    x, y, present = _runs(np.random.default_rng(1))
    ok = np.array([True, False, True, True, True])[:, None]
    z, u, _, jac = model_scale(x, y, present, 0.01, log=True, ok=ok)
    assert (z[1] == 0).all() and (u[1] == 0).all() and (jac[1] == 0).all()


def test_cell_moments_match_numpy():
    x, _, present = _runs(np.random.default_rng(2))
    cell = np.array([0, 1, 0, 1, 1])
    mean, sd = cell_moments(np.where(present, x, 0.0), present, cell, 3)
    for k in (0, 1):
        values = x[cell == k][present[cell == k]]
        np.testing.assert_allclose([mean[k], sd[k]], [values.mean(), values.std()], rtol=1e-12)
    assert np.isnan(mean[2])  # a cell without trials
