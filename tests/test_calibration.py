"""Simulation-based calibration (issue 31 §4): ranks, the chi-square, the CLI."""

import numpy as np
import pandas as pd
import pytest

import bayesobs.calibration as calibration
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


def test_each_simulation_is_fitted_with_its_own_sampler_seed(monkeypatch):
    """One shared key makes the simulations' ranks dependent (issue 49 §2): one seed each."""
    seen = {}

    def fake(variant, z, u, obs, zbar, chains, warmup, draws, seed, prior_scale):
        seen["seed"] = np.asarray(seed)
        shape = (len(z), chains, draws, 1)
        return {s: np.zeros(shape) for s in ("w", "b_std", "sigma_std")}, np.zeros(shape[:3], bool)

    monkeypatch.setattr(calibration, "sample_padded", fake)
    calibration.simulate_and_rank("linear", n_sims=50, draws=9, seed=2)
    assert seen["seed"].shape == (50,) and len(np.unique(seen["seed"])) == 50


@pytest.mark.slow  # one calibration fitted twice: alone and beside others
def test_per_cell_seeds_fit_each_cell_as_if_alone():
    """sample_padded with one seed per data set: each set's draws are its own fit with its seed."""
    from bayesobs.fits.posterior import sample_padded

    d = sbc_design(runs=1, trials=12)
    u = prior_draws("linear", d, 1, seed=0)["u"]
    two = [np.broadcast_to(a, (2, *a.shape)) for a in (d.z, u[0], d.obs, d.zbar)]
    kw = {"chains": 2, "warmup": 20, "draws": 10}
    both, _ = sample_padded("linear", *two, seed=[3, 4], **kw)
    alone, _ = sample_padded("linear", *(a[:1] for a in two), seed=4, **kw)
    np.testing.assert_array_equal(both["w"][1], alone["w"][0])
    assert not np.array_equal(both["w"][0], both["w"][1])  # same data, other seed: other draws


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


@pytest.mark.slow  # about a minute per case on a loaded 2-core machine
@pytest.mark.parametrize(
    "variant, seed", [("linear", 0), ("linear", 1), ("static", 0), ("static", 2)]
)
def test_400_simulations_pass_at_several_seeds(tmp_path, capsys, variant, seed):
    """With one sampler key per simulation, 400 simulations pass (issue 49 §2: one shared key
    failed `static` at seed 0, w_prior p = 1.2e-3)."""
    argv = ["calibrate", "--variant", variant, "--sims", "400", "--seed", str(seed)]
    rc = main([*argv, "--out", str(tmp_path)])
    assert rc == 0, capsys.readouterr().out


@pytest.mark.slow
def test_400_simulations_catch_a_prior_scale_half_the_truth(tmp_path, capsys):
    """A fit whose prior scales are half the simulating priors' fails at 400 simulations."""
    argv = ["calibrate", "--variant", "static", "--sims", "400", "--prior-scale", "0.5"]
    assert main([*argv, "--out", str(tmp_path)]) == 1
    out = " ".join(capsys.readouterr().out.split())  # the power sentence is wrapped
    assert "not calibrated: static sigma" in out
    assert "Power (measured" in out and "does not rule out prior scales wrong" in out
