"""Posterior files ArviZ can check: observed data, constant data, posterior predictive (issue 54)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import make_cell
from scipy import stats

az = pytest.importorskip("arviz")

from bayesobs.fits.observers.variants import get_variant  # noqa: E402
from bayesobs.fits.posterior import PosteriorFiles, read_fit  # noqa: E402
from bayesobs.fits.posterior.batching import _inference_data  # noqa: E402
from bayesobs.fits.posterior.model import prepare  # noqa: E402
from bayesobs.fits.posterior.predictive import predictive_groups  # noqa: E402
from bayesobs.trials import normalize_trials  # noqa: E402

W, SIGMA = 0.4, 0.03  # the simulated static observer


def _static_fit(log: bool, chains=2, draws=300):
    """A static fit built by hand from known draws, as the sampler's groups would hold it."""
    rng = np.random.default_rng(1)
    trials = normalize_trials(make_cell(rng, "static", {"w_prior": W, "sigma": SIGMA}, n_per=25))
    trials.loc[3, "response"] = np.nan  # an unanswered trial is neither observed nor predicted
    variant = get_variant("static_log" if log else "static")
    data = prepare(trials, variant)
    # draws on the model's (standardised) scale around the truth
    sd = SIGMA / data.s[0] if not log else 0.08
    draws_std = {
        "w_prior": rng.uniform(0.35, 0.45, (chains, draws, 1)),
        "sigma_std": np.full((chains, draws, 1), sd),
    }
    groups = predictive_groups(variant, draws_std, data, seed=0)
    return trials, variant, data, draws_std, groups


@pytest.mark.parametrize("log", [False, True])
def test_observed_and_constant_data_are_the_trials_on_the_response_scale(log):
    trials, _, _, _, groups = _static_fit(log)
    answered = trials[trials["response"].notna()]
    np.testing.assert_allclose(groups["observed_data"]["y"], answered["response"], rtol=1e-9)
    np.testing.assert_allclose(groups["constant_data"]["x"], answered["stimulus"], rtol=1e-9)
    assert groups["posterior_predictive"]["y"].shape == (2, 300, len(answered))
    runs = groups["constant_data"]["run"].values
    assert (np.diff(groups["constant_data"]["trial"].values)[np.diff(runs) == 0] > 0).all()


def test_the_predictive_draws_follow_the_static_observer_in_closed_form():
    """Each trial's predictive draws: mean (1-w) x + w xbar(run), SD sigma (within Monte Carlo error)."""
    trials, _, _, draws, groups = _static_fit(False, chains=4, draws=2000)
    const = groups["constant_data"]
    x, run = const["x"].values, const["run"].values
    xbar = trials.groupby("session", sort=False)["stimulus"].mean().to_numpy()[run]
    w = draws["w_prior"][..., 0][..., None]
    expected = ((1 - w) * x + w * xbar).mean(axis=(0, 1))
    ppc = groups["posterior_predictive"]["y"].values
    n = ppc.shape[0] * ppc.shape[1]
    assert np.abs(ppc.mean(axis=(0, 1)) - expected).max() < 5 * SIGMA / np.sqrt(n) * 1.2
    spread = np.sqrt(SIGMA**2 + ((1 - w) * x + w * xbar).var(axis=(0, 1)))
    np.testing.assert_allclose(ppc.std(axis=(0, 1)), spread, rtol=0.1)


def _complete_fit():
    """The hand-built static fit with its pointwise log-likelihood: every group a file holds."""
    _, _, data, draws, groups = _static_fit(False)
    y = groups["observed_data"]["y"].values
    x, run = groups["constant_data"]["x"].values, groups["constant_data"]["run"].values
    zbar = data.zbar[run, 0] * data.s[0] + data.c[0]
    w = draws["w_prior"]
    sigma = draws["sigma_std"] * data.s[0]
    mean = (1 - w) * x + w * zbar
    ll = stats.norm.logpdf(y, mean, sigma)
    div = np.zeros(w.shape[:2], bool)
    nat = {"w_prior": w, "sigma": sigma}
    idata = _inference_data(nat, ll, div, data.subjects)
    idata.add_groups(groups)
    return idata


def test_a_posterior_file_keeps_the_groups_and_arviz_checks_run_on_it(tmp_path):
    """az.plot_ppc, az.loo_pit, az.plot_loo_pit and az.compare on fits read back from their file;
    the LOO-PIT of a fit of the true model is uniform (KS test)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    idata = _complete_fit()
    key = ("s", "t", "text", "base")
    PosteriorFiles(tmp_path)([((*key, "static"), idata)])
    back = read_fit(tmp_path / "static__s__t__text__base.nc", "/".join(key))
    for group in ("observed_data", "constant_data", "posterior_predictive"):
        assert back[group].identical(idata[group]), group
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # arviz: few draws for the KDE bandwidth
        # ArviZ 0.23's plots call a matplotlib API that matplotlib 3.11 deprecates (theirs, not ours)
        warnings.simplefilter("ignore", DeprecationWarning)
        ax = az.plot_ppc(back, num_pp_samples=20)
        pit = az.loo_pit(back, y="y")
        az.plot_loo_pit(back, y="y")
        other = back.copy()
        other.log_likelihood["y"] = (
            other.log_likelihood["y"] - 0.5
        )  # a worse model of the same data
        table = az.compare({"static": back, "worse": other})
    plt.close("all")
    assert ax is not None and len(pit) == back.observed_data["y"].size
    assert stats.kstest(np.asarray(pit), "uniform").pvalue > 0.001
    assert list(table.index) == ["static", "worse"]


@pytest.mark.slow  # compiles NumPyro's sampler
def test_fit_posterior_files_hold_every_group_arviz_checks(tmp_path):
    """fit --method posterior on a simulated static observer: its file passes ArviZ's checks."""
    from bayesobs.cli import main

    df = pd.concat(
        [
            make_cell(
                np.random.default_rng(s), "static", {"w_prior": W, "sigma": SIGMA}, subject=f"P{s}"
            )
            for s in (0, 1)
        ]
    )
    df.to_csv(tmp_path / "t.csv", index=False)
    argv = ["fit", str(tmp_path / "t.csv"), "--out", str(tmp_path / "o"), "--method", "posterior"]
    argv += ["--chains", "2", "--warmup", "200", "--draws", "200", "--no-progress"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # short chains: diagnostics notes
        assert main([*argv, "--variant", "static", "--variant", "linear"]) == 0
    files = sorted((tmp_path / "o" / "posterior").glob("*.nc"))
    cell = next(c for c in az.from_netcdf(files[0]).posterior["cell"].values if c.startswith("P0/"))
    fits = {f.name.split("__")[0]: read_fit(f, cell) for f in files}
    for idata in fits.values():
        assert {"observed_data", "constant_data", "posterior_predictive"} <= set(idata.groups())
        np.testing.assert_allclose(idata.observed_data["y"], df[df.subject == "P0"]["response"])
    pit = az.loo_pit(fits["static"], y="y")
    assert stats.kstest(np.asarray(pit), "uniform").pvalue > 0.001
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # arviz 0.23 on pandas 3.1 (theirs)
        assert set(az.compare(fits).index) == {"static", "linear"}


def test_a_hierarchical_fits_groups_name_each_responses_subject():
    rng = np.random.default_rng(2)
    cells = [
        make_cell(rng, "static", {"w_prior": W, "sigma": SIGMA}, n_per=10, subject=s) for s in "ab"
    ]
    data = prepare(normalize_trials(pd.concat(cells, ignore_index=True)), get_variant("static"))
    draws = {"w_prior": np.full((1, 5, 2), W), "sigma_std": np.full((1, 5, 2), 1e-9)}
    groups = predictive_groups(get_variant("static"), draws, data)
    sub = groups["constant_data"]["subject_index"].values
    assert [data.subjects[i][0] for i in sub] == ["a"] * 30 + ["b"] * 30
    # with sigma ~ 0 every draw is the static observer's mean, subject by subject
    x, run = groups["constant_data"]["x"].values, groups["constant_data"]["run"].values
    xbar = pd.Series(x).groupby(run).transform("mean").to_numpy()
    np.testing.assert_allclose(
        groups["posterior_predictive"]["y"][0, 0], (1 - W) * x + W * xbar, rtol=1e-5
    )
