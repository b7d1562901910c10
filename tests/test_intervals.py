"""One Wilson interval (bayesobs.intervals.wilson), checked against statsmodels, edges included."""

import numpy as np
import pytest

from bayesobs.intervals import wilson
from bayesobs.search import scores as search
from bayesobs.tunnel import scores as perception

N = np.array([1, 2, 3, 7, 10, 10, 10, 37, 100, 100, 1000])
K = np.array([0, 2, 1, 7, 0, 5, 10, 36, 0, 100, 999])


@pytest.mark.parametrize("fn", [wilson, search.wilson, perception.wilson])
def test_wilson_is_statsmodels_wilson_with_exact_edges(fn):
    # imported here, not at collection: statsmodels costs ~1 s of CPU per process
    from statsmodels.stats.proportion import proportion_confint

    lo, hi = fn(K, N)
    ref_lo, ref_hi = proportion_confint(K, N, alpha=0.05, method="wilson")
    np.testing.assert_allclose(lo, ref_lo, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(hi, ref_hi, rtol=1e-12, atol=1e-15)
    # k = 0: the lower bound is 0, k = n: the upper bound is 1, exactly
    assert (lo[K == 0] == 0.0).all() and (hi[K == N] == 1.0).all()
    p = K / N
    assert (lo <= p).all() and (p <= hi).all()


def test_wilson_of_no_trials_is_nan_without_a_warning():
    lo, hi = wilson(np.array([0, 3]), np.array([0, 4]))
    assert np.isnan(lo[0]) and np.isnan(hi[0]) and np.isfinite([lo[1], hi[1]]).all()


def test_every_wilson_is_the_one():
    assert search.wilson is wilson and perception.wilson is wilson
