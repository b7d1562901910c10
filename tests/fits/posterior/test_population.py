"""The hierarchical posterior has ONE population (issue 54): every subject's core parameter is
drawn from the same ``Normal(mu_pop, tau_pop)``, whose draws the fit keeps."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import make_cell

pytest.importorskip("numpyro")


def test_the_hierarchical_model_draws_one_population_for_all_subjects():
    import jax
    from numpyro import handlers

    from bayesobs.fits.observers import get_variant
    from bayesobs.fits.posterior import model, prepare
    from bayesobs.trials import normalize_trials

    rng = np.random.default_rng(0)
    df = pd.concat([make_cell(rng, n_per=5, subject=f"s{i}", task="line_ratio") for i in range(4)])
    static = get_variant("static")
    data = prepare(normalize_trials(df.assign(modality="text", condition="base")), static)
    trace = handlers.trace(handlers.seed(model, jax.random.PRNGKey(0))).get_trace(
        static, data, True
    )
    assert trace["mu_pop"]["value"].shape == () and trace["tau_pop"]["value"].shape == ()
    assert trace["eta"]["value"].shape == (4,)  # each subject's own offset
