"""Simulation-based calibration (issue 31 §4): ranks, the chi-square, the CLI."""

import numpy as np
import pandas as pd
import pytest

from bayesobs.calibration import prior_draws, rank_uniformity, sbc_design, sbc_ranks
from bayesobs.cli import main


def test_ranks_count_draws_below_the_truth():
    draws = np.array([[0.1, 0.5, 0.9], [0.1, 0.5, 0.9]])
    assert sbc_ranks(np.array([0.0, 0.6]), draws).tolist() == [0, 2]


def test_uniform_ranks_pass_and_piled_ranks_fail():
    rng = np.random.default_rng(1)
    p = rank_uniformity(rng.integers(0, 100, 500), 99)[1]
    assert p > 0.01
    piled = np.r_[np.zeros(250, int), np.full(250, 99)]  # an overconfident posterior
    assert rank_uniformity(piled, 99)[1] < 1e-10
    middle = np.full(500, 50)  # an underdispersed rank distribution (too-wide posterior)
    assert rank_uniformity(middle, 99)[1] < 1e-10


def test_uneven_bins_get_their_own_expected_counts():
    # 101 rank values in 10 bins: one bin holds 11 values; exact uniform counts give chi2 = 0
    ranks = np.arange(101).repeat(7)
    chi2, p = rank_uniformity(ranks, 100)
    assert chi2 == pytest.approx(0.0, abs=1e-9) and p == pytest.approx(1.0)
    with pytest.raises(ValueError, match="ranks must lie"):
        rank_uniformity(np.array([101]), 100)


def _conjugate_sbc(fit_scale: float, n_sims=200, M=99, n_obs=3, seed=0):
    """SBC of a Normal mean with known noise: exact posterior draws under a prior of sd fit_scale."""
    rng = np.random.default_rng(seed)
    mu = rng.normal(0.0, 1.0, n_sims)  # the true prior: Normal(0, 1)
    y = mu[:, None] + rng.normal(0.0, 1.0, (n_sims, n_obs))
    prec = 1 / fit_scale**2 + n_obs
    post = rng.normal(y.sum(1)[:, None] / prec, 1 / np.sqrt(prec), (n_sims, M))
    return rank_uniformity(sbc_ranks(mu, post), M)[1]


def test_the_check_fails_a_fit_with_the_wrong_prior_scale():
    assert _conjugate_sbc(1.0) > 0.01
    assert _conjugate_sbc(0.2) < 1e-6  # prior too narrow: the truth falls outside the posterior
    assert _conjugate_sbc(1.0, seed=3) > 0.01


def test_prior_draws_come_from_the_variants_priors():
    d = sbc_design()
    draws = prior_draws("static", d, 4000, seed=0)
    assert draws["u"].shape == (4000, *d.z.shape)
    assert np.mean(draws["w_prior"]) == pytest.approx(0.5, abs=0.02)  # Beta(1.1, 1.1)
    assert np.mean(draws["sigma_std"]) == pytest.approx(
        np.sqrt(2 / np.pi), abs=0.03
    )  # HalfNormal(1)
    # u = (1 - w) z + w zbar + sigma eps: the residual's SD is sigma
    w, s = draws["w_prior"][:, :, None], draws["sigma_std"][:, :, None]
    resid = (draws["u"] - ((1 - w) * d.z + w * d.zbar)) / s
    assert np.std(resid) == pytest.approx(1.0, abs=0.02)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--variant", "nope"], "unknown observer variant"),
        (["--sims", "20"], "at least 5 simulations per rank bin"),
        (["--prior-scale", "0"], "prior_scale must be positive"),
    ],
)
def test_calibrate_bad_options_are_one_line(tmp_path, capsys, argv, message):
    assert main(["calibrate", "--out", str(tmp_path / "o"), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_miscalibrated_variant_fails(tmp_path, capsys):
    rc = main(["calibrate", "--variant", "linear", "--prior-scale", "0.2", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 1
    assert "not calibrated: linear w" in out and "not calibrated: linear sigma" in out
    table = pd.read_csv(tmp_path / "sbc.csv")
    assert not table["uniform"].any()


@pytest.mark.slow
def test_every_variant_is_calibrated(tmp_path, capsys):
    rc = main(["calibrate", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    table = pd.read_csv(tmp_path / "sbc.csv")
    assert set(table["variant"]) == {
        "linear", "static", "static_gain", "kalman", "kalman_gain",
        "linear_log", "static_log", "static_log_gain", "kalman_log", "kalman_log_gain",
    }  # fmt: skip
    assert table["uniform"].all(), out
    assert rc == 0
    assert (tmp_path / "figures" / "sbc_ranks.png").stat().st_size > 0
    ranks = pd.read_csv(tmp_path / "sbc_ranks.csv")
    assert len(ranks) == table["n_sims"].sum() and ranks["rank"].between(0, 99).all()


def _cell(seed=7):
    from conftest import make_cell

    return make_cell(np.random.default_rng(seed), "static", {"w_prior": 0.3, "sigma": 0.03})


def test_prior_predictive_covers_plausible_responses_and_flags_absurd_ones():
    from bayesobs.fits.posterior import prior_predictive

    trials = _cell()
    pp = prior_predictive(trials, ["static", "kalman_log"], draws=200)
    assert list(pp["variant"]) == ["static", "kalman_log"]
    assert pp["covers"].all()
    assert (pp["sim_min_q01"] <= pp["observed_min"]).all()
    assert (pp["sim_max_q99"] >= pp["observed_max"]).all()
    assert (pp["sim_min_q01"] < pp["q01"]).all() and (pp["q01"] < pp["q50"]).all()
    assert pp["observed_max"].iat[0] == pytest.approx(trials["response"].max())
    far = trials.copy()
    far.loc[far.index[5], "response"] = 1e4  # 10,000 times the stimuli's range: not a prior's
    pp = prior_predictive(far, ["static"], draws=200)
    assert not pp["covers"].any() and pp["observed_max"].iat[0] == pytest.approx(1e4)


def test_prior_predictive_needs_the_posterior_method(tmp_path, capsys):
    _cell().to_csv(tmp_path / "t.csv", index=False)
    argv = ["fit", str(tmp_path / "t.csv"), "--prior-predictive", "--out", str(tmp_path / "o")]
    assert main(argv) == 2
    assert "--prior-predictive checks the priors of --method posterior" in capsys.readouterr().err


@pytest.mark.slow
def test_fit_posterior_prior_predictive_writes_its_table(tmp_path, capsys):
    _cell().to_csv(tmp_path / "t.csv", index=False)
    argv = ["fit", str(tmp_path / "t.csv"), "--method", "posterior", "--prior-predictive"]
    argv += ["--variant", "static", "--chains", "2", "--warmup", "200", "--draws", "200"]
    assert main([*argv, "--no-progress", "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert (
        "prior predictive: 1 of 1 (cell, variant) fit(s) cover the observed response range" in out
    )
    pp = pd.read_csv(tmp_path / "o" / "prior_predictive.csv")
    assert len(pp) == 1 and pp["covers"].all()
    assert {"q01", "q50", "q99", "sim_min_q01", "sim_max_q99", "observed_max"} <= set(pp.columns)
