"""``bayesobs design``: model recovery, factor calibration, parameter recovery, BCS power."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from bayesobs.cli import main
from bayesobs.design import BAYESIAN_FLOOR, CANDIDATES, TRUE_MODELS, confusion_figure
from bayesobs.fits.controls import simulate_anchor

TABLES = ("confusion", "calibration", "factors", "recovery", "power", "controls", "summary")


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    d = tmp_path_factory.mktemp("design") / "d"
    assert (
        main(
            [
                "design",
                "tasks/bayesbench.toml",
                "--reps",
                "20",
                "--trials",
                "20,40,80",
                "--bootstrap",
                "20",
                "--out",
                str(d),
            ]
        )
        == 0
    )
    return d


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """The same command at two replicates and no study-sized bootstrap: the fast tier's run."""
    d = tmp_path_factory.mktemp("design-small") / "d"
    argv = ["design", "tasks/bayesbench.toml", "--reps", "2", "--trials", "20,40"]
    assert main([*argv, "--bootstrap", "2", "--out", str(d), "--cost-for", "openai:gpt-4o"]) == 0
    return d


def _read(out, name):
    return pd.read_csv(out / f"{name}.csv")


@pytest.mark.slow  # the recovery study (20 replicates x 3 trial counts)
def test_writes_every_table_and_figure(out):
    for name in TABLES:
        assert (out / f"{name}.csv").stat().st_size > 0
    assert (out / "figures" / "confusion.png").stat().st_size > 0
    assert (out / "figures" / "power.png").stat().st_size > 0
    conf = _read(out, "confusion")
    # every (task, trials, true) row sums to one over the candidates
    sums = conf.groupby(["task", "trials", "true"])["rate"].sum()
    assert np.allclose(sums, 1.0)
    assert set(conf["true"]) == set(TRUE_MODELS) and set(conf["best"]) == set(CANDIDATES)
    assert set(conf["task"]) == {
        "line_ratio",
        "marker_location",
        "maze_distance",
        "duration",
        "all",
    }


def test_a_small_design_writes_every_table_and_figure(small):
    for name in TABLES:
        assert (small / f"{name}.csv").stat().st_size > 0
    assert (small / "figures" / "confusion.png").stat().st_size > 0
    assert (small / "figures" / "power.png").stat().st_size > 0
    conf = _read(small, "confusion")
    sums = conf.groupby(["task", "trials", "true"])["rate"].sum()
    assert np.allclose(sums, 1.0)
    assert set(conf["true"]) == set(TRUE_MODELS) and set(conf["best"]) <= set(CANDIDATES)
    assert set(conf["trials"]) == {20, 40}
    assert list(_read(small, "summary")["trials"]) == [20, 40]


def test_design_prices_each_trial_count_by_the_closed_form(small):
    """``--cost-for``: the calls of the protocol (11,760 at 40 trials, issue 53) at gpt-4o's price."""
    cost = _read(small, "costs")
    assert list(cost["trials"]) == [20, 40] and list(cost["calls"]) == [5880, 11760]
    assert list(cost["output_tokens"]) == list(cost["calls"] * 64)  # --max-tokens 64 a reply
    # gpt-4o: $2.50 in, $10 out per million tokens; low: one output token a reply
    low = (cost["input_tokens"] * 2.5 + cost["calls"] * 10) / 1e6
    high = (cost["input_tokens"] * 2.5 + cost["output_tokens"] * 10) / 1e6
    assert np.allclose(cost["cost_low"], low) and np.allclose(cost["cost_high"], high)


@pytest.mark.slow  # the recovery study (20 replicates x 3 trial counts)
def test_confusion_diagonal_at_the_papers_design(out):
    """40 trials x 3 session types x 1 run, noise 0.1 of the session width."""
    conf = _read(out, "confusion")
    diag = conf[(conf["task"] == "all") & (conf["trials"] == 40) & (conf["true"] == conf["best"])]
    assert len(diag) == len(TRUE_MODELS)
    assert diag["rate"].mean() >= 0.8
    assert diag["rate"].min() >= 0.6
    # the anchoring control recovers its own observer
    assert diag.set_index("true").loc["anchor", "rate"] >= 0.8


@pytest.mark.slow  # the recovery study (20 replicates x 3 trial counts)
def test_bayesian_floor_and_gain_reading_of_linear_observers(out):
    f = _read(out, "factors")
    lin = f[(f["true"] == "linear") & (f["factor"] == "bayesian")]
    # static_gain nests linear with one more parameter: P(bayesian) >= e^-1 / (1 + e^-1)
    assert BAYESIAN_FLOOR == pytest.approx(math.exp(-1) / (1 + math.exp(-1)))
    assert (lin["p_min"] >= BAYESIAN_FLOOR - 1e-9).all()
    assert (np.abs(lin["p_min"] - BAYESIAN_FLOOR) < 0.02).all()
    # P(gain) compares variants inside the Bayesian families: it reads ~1 for linear observers
    gain = f[(f["true"].isin(["linear", "linear_log"])) & (f["factor"] == "gain")]
    assert (gain["p_mean"] > 0.95).all()
    cal = _read(out, "calibration")
    assert set(cal["factor"]) == {"bayesian", "weber", "sequential", "gain"}
    w = cal[cal["factor"] == "weber"]
    assert (w["p_present"] > 0.9).all() and (w["p_absent"] < 0.1).all()


@pytest.mark.slow  # the recovery study (20 replicates x 3 trial counts)
def test_parameter_recovery_improves_with_trials(out):
    r = _read(out, "recovery").set_index(["variant", "param", "trials"]).sort_index()
    for variant, param in (("static", "w_prior"), ("kalman", "log_rho"), ("static_gain", "g")):
        sd = r.loc[(variant, param), "sd"]
        assert sd.loc[80] < sd.loc[20]
        assert abs(r.loc[(variant, param, 80), "bias"]) < 2 * sd.loc[80]


@pytest.mark.slow  # the recovery study (20 replicates x 3 trial counts)
def test_bcs_power_rises_with_trials(out):
    p = _read(out, "power")
    pw = p[p["shift"] == 0.05].groupby("trials")[["right_s", "right_s_p"]].mean()
    assert pw.loc[80, "right_s_p"] > pw.loc[20, "right_s_p"]
    assert pw.loc[80, "right_s"] > pw.loc[20, "right_s"]
    s = _read(out, "summary").set_index("trials")
    assert list(s.index) == [20, 40, 80]
    assert s.loc[80, "diagonal_mean"] >= s.loc[20, "diagonal_mean"]


@pytest.mark.slow  # the recovery study (20 replicates x 3 trial counts)
def test_controls_summary_separates_anchor_from_kalman(out):
    c = _read(out, "controls").set_index(["trials", "true"]).sort_index()
    assert c.loc[(80, "anchor"), "beats_kalman"] > 0.9
    assert c.loc[(80, "kalman"), "beats_kalman"] < 0.1


def test_confusion_figure_draws_into_given_axes(small):
    from matplotlib.figure import Figure

    fig = Figure()
    axes = fig.subplots(1, 3)
    assert confusion_figure(_read(small, "confusion"), axes=axes) is fig
    assert axes[0].get_title() == "all: 20 trials per run"


def test_simulate_anchor_follows_its_recursion():
    x = np.array([1.0, 2.0, 3.0, 1.0, 2.0])
    run = np.array([0, 0, 0, 1, 1])
    y = simulate_anchor(0.5, 0.0, x, run)
    assert y == pytest.approx([1.0, 1.5, 2.25, 1.0, 1.5])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--reps", "1"], "--reps"),
        (["--trials", "20,x"], "--trials"),
        (["--trials", "1"], "--trials"),
        (["--noise", "0"], "--noise"),
        (["--missing", "1.5"], "--missing"),
        (["--shifts", "a"], "--shifts"),
    ],
)
def test_bad_options_are_one_line_errors(tmp_path, capsys, argv, message):
    code = main(["design", "tasks/line_ratio.toml", "--out", str(tmp_path / "d"), *argv])
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
