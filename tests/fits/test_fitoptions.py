"""FitOptions: the fit's options built and checked once (issue 29)."""

import dataclasses

import numpy as np
import pandas as pd
import pytest
from conftest import make_cell

import bayesobs
from bayesobs.errors import BayesobsInputError
from bayesobs.fits.fitoptions import FitOptions, fit_options


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("bootstrap", -1),
        ("bootstrap", 2.5),
        ("bootstrap", True),
        ("seed", -3),
        ("seed", "0"),
        ("progress", 1),
        ("lapse", "yes"),
        ("resample", "bogus"),
        ("interleaved", ""),
        ("interleaved", 3),
    ],
)
def test_bad_options_are_refused_on_construction(field, value):
    with pytest.raises(BayesobsInputError, match=field):
        FitOptions(**{field: value})


def test_options_are_frozen_and_numpy_integers_become_ints():
    opts = FitOptions(bootstrap=np.int64(3), seed=np.int32(2))
    assert type(opts.bootstrap) is int and type(opts.seed) is int
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.seed = 1  # type: ignore[misc]
    assert fit_options(opts, bootstrap=99) is opts
    assert fit_options(None, bootstrap=4) == FitOptions(bootstrap=4)


def test_options_give_what_the_keywords_give():
    rng = np.random.default_rng(1)
    params = {"w_prior": 0.5, "sigma": 0.05}
    cell = pd.concat([make_cell(rng, "static", params, run=r) for r in range(2)])
    by_keywords = bayesobs.fit(cell, bootstrap=3, seed=5)
    by_options = bayesobs.fit(cell, options=FitOptions(bootstrap=3, seed=5))
    for a, b in zip(by_keywords, by_options, strict=True):
        pd.testing.assert_frame_equal(a, b)
