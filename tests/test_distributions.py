"""Non-uniform stimulus distributions of a session (the prior an observer can learn)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import bayesobs
from bayesobs.cli import main
from bayesobs.stimuli import get_task
from bayesobs.stimuli.distributions import draw_value, draw_values, label, prior_mean

SPEC = """task = "line_ratio"
seed = 7
trials = 30
modalities = ["text"]
conditions = ["base", "noise_text"]

[[sessions]]
name = "gauss"
range = [0.1, 0.9]
distribution = "gaussian"
mean = 0.35
sd = 0.1
[[sessions]]
name = "skew"
range = [0.1, 0.9]
distribution = "skewed"
[[sessions]]
name = "bi"
range = [0.1, 0.9]
distribution = "bimodal"
[[sessions]]
name = "flat"
range = [0.3, 0.7]
"""


def _mixture_mean(modes=(0.2, 0.7), sd=0.05, low=0.1, high=0.9):
    """Mean of an equal two-normal mixture truncated to [low, high] (scipy's truncnorm)."""
    mass = [stats.norm.cdf(high, m, sd) - stats.norm.cdf(low, m, sd) for m in modes]
    means = [stats.truncnorm((low - m) / sd, (high - m) / sd, m, sd).mean() for m in modes]
    return float(np.dot(mass, means) / np.sum(mass))


@pytest.mark.parametrize(
    "options, reference",
    [
        (
            {"distribution": "gaussian", "mean": 0.35, "sd": 0.1},
            stats.truncnorm((0.1 - 0.35) / 0.1, (0.9 - 0.35) / 0.1, 0.35, 0.1).mean(),
        ),
        ({"distribution": "skewed"}, 0.1 + 0.8 * 2 / 7),
        ({"distribution": "skewed", "alpha": 5, "beta": 2}, 0.1 + 0.8 * 5 / 7),
        ({"distribution": "bimodal", "modes": [0.2, 0.7], "sd": 0.05}, _mixture_mean()),
        ({}, 0.5),
    ],
)
def test_prior_mean_and_draws_match_independent_references(options, reference):
    assert prior_mean(0.1, 0.9, options) == pytest.approx(reference, abs=2e-4)
    v = draw_values(np.random.default_rng(0), 0.1, 0.9, 40_000, options)
    assert v.min() >= 0.1 and v.max() <= 0.9
    assert v.mean() == pytest.approx(reference, abs=0.004)


def test_bimodal_has_two_modes_and_skewed_is_skewed():
    rng = np.random.default_rng(1)
    v = draw_values(rng, 0.0, 1.0, 20_000, {"distribution": "bimodal"})
    hist, _ = np.histogram(v, bins=10, range=(0, 1))
    assert hist[2] > 3 * hist[5] and hist[7] > 3 * hist[5]
    s = draw_values(rng, 0.0, 1.0, 20_000, {"distribution": "skewed"})
    assert stats.skew(s) > 0.3


def test_uniform_sessions_draw_exactly_as_before():
    a, b = np.random.default_rng(3), np.random.default_rng(3)
    assert draw_value(a, 0.1, 0.5, {}) == b.uniform(0.1, 0.5)
    one = get_task("line_ratio").generate(np.random.default_rng(9), 0.1, 0.5, 20, {})
    two = get_task("line_ratio").generate(
        np.random.default_rng(9), 0.1, 0.5, 20, {"distribution": "uniform"}
    )
    assert [s.text for s in one] == [s.text for s in two]
    assert label(0.1, 0.5, {}) == "uniform"


@pytest.mark.parametrize(
    "extra, message",
    [
        ('distribution = "lognormal"', "unknown distribution"),
        ('distribution = "gaussian"\nsd = 0.0', "sd must be > 0"),
        ('distribution = "skewed"\nsd = 0.1', "not a parameter"),
        ('distribution = "bimodal"\nmodes = [0.0, 0.5]', "modes must be two values"),
    ],
)
def test_bad_distributions_are_one_line_errors(tmp_path, capsys, extra, message):
    spec = tmp_path / "s.toml"
    spec.write_text(
        f'task = "line_ratio"\nseed = 1\ntrials = 5\n[[sessions]]\nname = "a"\n'
        f"range = [0.1, 0.9]\n{extra}\n"
    )
    assert main(["run", str(spec), "--subject", "sim:bayesian", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert message in err and "sessions[0]" in err and err.count("\n") == 1


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("dist")
    (root / "spec.toml").write_text(SPEC)
    argv = ["run", str(root / "spec.toml"), "--subject", "sim:bayesian", "--subject", "sim:linear"]
    assert main([*argv, "--out", str(root / "run"), "--no-progress"]) == 0
    return root


def test_trials_keep_the_session_bounds_and_log_the_distribution(run):
    t = pd.DataFrame(bayesobs.read_trials(run / "run"))
    g = t.groupby("session")
    assert g["range_low"].min().to_dict() == g["range_low"].max().to_dict()
    assert g["range_low"].min().to_dict() == {"bi": 0.1, "flat": 0.3, "gauss": 0.1, "skew": 0.1}
    assert g["range_high"].max().to_dict() == {"bi": 0.9, "flat": 0.7, "gauss": 0.9, "skew": 0.9}
    dist = g["distribution"].first()
    assert dist["gauss"] == "gaussian(mean=0.35, sd=0.1)"
    assert dist["skew"] == "skewed(alpha=2, beta=5)"
    assert dist["bi"].startswith("bimodal(modes=[0.3, 0.7]")
    assert dist["flat"] == "uniform"
    assert g["stimulus"].mean()["gauss"] == pytest.approx(0.35, abs=0.05)


def test_sweep_score_report_run_on_non_uniform_priors(run, tmp_path):
    proto = run / "proto.toml"  # beside its spec: a protocol reads specs in its folder only
    proto.write_text('[[experiment]]\nspec = "spec.toml"\n')
    sweep = ["sweep", str(proto), "--subject", "sim:bayesian", "--trials", "12"]
    assert main([*sweep, "--out", str(tmp_path / "sw"), "--no-progress"]) == 0
    score = ["score", str(run / "run"), "--out", str(tmp_path / "sc"), "--bootstrap", "5"]
    assert main([*score, "--no-probe", "--no-progress"]) == 0
    fits = pd.read_csv(tmp_path / "sc" / "fits.csv")
    assert set(fits["condition"]) == {"base", "noise_text"}
    extra = pd.read_csv(tmp_path / "sc" / "bcs_extra.csv").set_index("subject")
    assert extra.loc["sim:bayesian", "delta_w"] > 0
    assert (
        main(["report", str(run / "run"), "--out", str(tmp_path / "rep"), "--bootstrap", "0"]) == 0
    )


def test_the_simulated_bayesian_centres_on_the_true_prior_mean(run):
    """Its static-Bayes answers shrink toward the distribution's mean, not the range midpoint."""
    t = pd.DataFrame(bayesobs.read_trials(run / "run"))
    g = t[(t["subject"] == "sim:bayesian") & (t["condition"] == "base") & (t["session"] == "gauss")]
    g = g[g["trial"] >= 2]  # a prior needs two context trials
    # the fixed point of the shrinkage: where the response equals the stimulus
    slope, intercept = np.polyfit(g["stimulus"], g["response"], 1)
    assert slope < 0.95
    assert intercept / (1 - slope) == pytest.approx(0.35, abs=0.05)


def test_design_draws_from_the_specs_distribution(run):
    from bayesobs.design import _stimuli, _structure

    (exp,) = _structure(run / "spec.toml", [400], None)
    x, sess, _ = _stimuli(exp["sessions"], 400, 1, np.random.default_rng(0), exp["options"])
    assert x[sess == "gauss"].mean() == pytest.approx(
        prior_mean(0.1, 0.9, exp["options"][0]), abs=0.02
    )
    assert x[sess == "flat"].min() >= 0.3
