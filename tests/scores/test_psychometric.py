"""Psychometric functions (issue 31 item 1): closed forms, psignifit's results, recovery, score, report."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import PSIGNIFIT_DEMO_2AFC
from scipy import stats

from bayesobs.errors import BayesobsInputError
from bayesobs.scores.psychometric import (
    COLUMNS,
    fit_many,
    fit_psychometric,
    log_likelihood,
    psi,
    psychometric_levels,
    psychometric_table,
    sigmoid_value,
)

CELLS = ["1,1", "1,2", "2,1", "2,2"]


# ------------------------------------------------------------------ closed forms
@pytest.mark.parametrize("sigmoid", ["norm", "logistic"])
@pytest.mark.parametrize("direction", ["decreasing", "increasing"])
def test_width_is_the_distance_between_f_005_and_f_095(sigmoid, direction):
    m, w = 7.0, 4.0
    F = sigmoid_value(np.array([m - w / 2, m, m + w / 2]), m, w, sigmoid, direction)
    want = [0.05, 0.5, 0.95] if direction == "increasing" else [0.95, 0.5, 0.05]
    assert F == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize("sigmoid", ["norm", "logistic"])
@pytest.mark.parametrize("direction", ["decreasing", "increasing"])
def test_noise_free_counts_at_three_levels_recover_the_parameters_exactly(sigmoid, direction):
    """Three levels, three free parameters: expected counts are fitted exactly (deviance 0)."""
    x = np.array([2.0, 4.0, 8.0])
    guess = np.array([0.25, 0.2, 0.125])  # chance that depends on the level
    m, w, lapse = 5.0, 4.0, 0.05
    n = np.full(3, 1000.0)
    k = n * psi(x, m, w, lapse, guess, sigmoid, direction)
    r = fit_psychometric(x, k, n, guess, sigmoid, direction, bootstrap=0)
    assert r["threshold"] == pytest.approx(m, abs=1e-6)
    assert r["width"] == pytest.approx(w, abs=1e-6)
    assert r["lapse"] == pytest.approx(lapse, abs=1e-8)
    assert r["deviance"] == pytest.approx(0, abs=1e-8)
    assert np.isnan(r["gof_p_chi2"])  # saturated: no degrees of freedom left
    assert r["at_bound"] == ""


def test_log_likelihood_is_the_sum_of_binomial_logpmf():
    x = np.array([1.0, 3.0, 5.0, 9.0])
    k, n = np.array([19, 15, 9, 4]), np.array([20, 20, 18, 16])
    guess = 1 / (x + 1)
    p = psi(x, 4.0, 5.0, 0.03, guess)
    want = stats.binom.logpmf(k, n, p).sum()
    assert log_likelihood(x, k, n, guess, 4.0, 5.0, 0.03) == pytest.approx(want, rel=1e-12)
    # the fit's own number is the same function at its estimates
    r = fit_psychometric(x, k, n, guess, bootstrap=0)
    p_hat = psi(x, r["threshold"], r["width"], r["lapse"], guess)
    assert r["log_likelihood"] == pytest.approx(stats.binom.logpmf(k, n, p_hat).sum(), rel=1e-10)
    # and it is a maximum: no better than the generating parameters' likelihood is missed
    assert r["log_likelihood"] >= want


# ------------------------------------------------------------------ psignifit's published results
# The demo data of psignifit (demo_001, the docs' "basic usage": a 2AFC experiment) and the
# MATLAB reference results that python-psignifit's tests compare against
# (github.com/wichmann-lab/python-psignifit, tests/test_psignifit.py: test_psignifit_fixed_fit,
# test_psignifit_matlab_test1, test_psignifit_matlab_2afc_logistic).  psignifit reports the MAP
# under its priors (flat inside the data range for threshold and width, Beta(1, 10) on the
# lapse); where its lapse estimate is 0 the maximum-likelihood fit agrees.
DEMO = PSIGNIFIT_DEMO_2AFC
TEST_X = np.array([0.25, 5 / 12, 7 / 12, 0.75, 11 / 12, 13 / 12, 1.25, 17 / 12, 19 / 12, 1.75])


def test_psignifit_demo_data_threshold_and_width():
    r = fit_psychometric(DEMO[:, 0], DEMO[:, 1], DEMO[:, 2], 0.5, "norm", "increasing", 0)
    assert r["threshold"] == pytest.approx(0.0046448472488663396, rel=2e-3)  # ours 0.0046478
    assert r["width"] == pytest.approx(0.004683837353547434, rel=1e-2)  # ours 0.0046591
    assert r["lapse"] == pytest.approx(0.0, abs=1e-6)  # psignifit 1.07e-07


def test_psignifit_matlab_test1():
    k = np.array([4, 6, 3, 8, 7, 5, 8, 9, 9, 10])
    r = fit_psychometric(TEST_X, k, np.full(10, 10), 0.5, "norm", "increasing", 0)
    assert r["threshold"] == pytest.approx(1.19233664, rel=1e-2)
    assert r["width"] == pytest.approx(1.13590185, rel=1e-2)
    assert r["lapse"] == pytest.approx(0.0, abs=1e-6)


def test_psignifit_logistic_case_our_maximum_beats_its_map():
    """psignifit's MAP (lapse 0) is not the likelihood's maximum: its prior shapes it."""
    k = np.array([5, 5, 5, 6, 5, 7, 9, 9, 8, 10])
    n = np.full(10, 10)
    r = fit_psychometric(TEST_X, k, n, 0.5, "logistic", "increasing", 0)
    at_map = log_likelihood(
        TEST_X, k, n, 0.5, 1.18954146, 1.34590649, 9.16e-14, "logistic", "increasing"
    )
    # a step at 1.08 with a 10% lapse: 0.36 log-likelihood units above psignifit's MAP
    assert r["log_likelihood"] > at_map + 0.3
    assert r["lapse"] == pytest.approx(0.0997, abs=1e-3) and "width" in r["at_bound"]


# ------------------------------------------------------------------ recovery
TRUTH = {"threshold": 8.0, "width": 6.0, "lapse": 0.08}


def _observer(seed: int, n: int = 40) -> tuple:
    """Problem sizes 1..20, chance 1/(size + 3), accuracy falling with size."""
    x = np.arange(1, 21.0)
    guess = 1 / (x + 3)
    rng = np.random.default_rng(seed)
    k = rng.binomial(n, psi(x, TRUTH["threshold"], TRUTH["width"], TRUTH["lapse"], guess))
    return x, k, np.full(20, n), guess


def test_threshold_and_lapse_are_recovered_from_simulated_observers():
    """Five seeds, 40 trials per level: the sampling sd is 0.30 (threshold) and 0.021 (lapse).

    Measured over 100 seeds (mean 7.99 and 0.079: unbiased); tolerances are about 3.3 sd,
    and the 95% bootstrap interval holds the truth in at least 4 of 5 seeds.
    """
    fits = fit_many([_observer(s) for s in range(5)], bootstrap=200, seed=1)
    for r in fits:
        assert abs(r["threshold"] - TRUTH["threshold"]) < 1.0
        assert abs(r["lapse"] - TRUTH["lapse"]) < 0.07
        assert abs(r["width"] - TRUTH["width"]) < 3.0
        assert r["threshold_lo"] < r["threshold"] < r["threshold_hi"]
        assert r["lapse_lo"] <= r["lapse"] <= r["lapse_hi"]
    for p in ("threshold", "lapse"):
        covered = sum(r[f"{p}_lo"] <= TRUTH[p] <= r[f"{p}_hi"] for r in fits)
        assert covered >= 4, p
    assert np.mean([r["threshold"] for r in fits]) == pytest.approx(TRUTH["threshold"], abs=0.5)


def test_goodness_of_fit_flags_data_no_monotone_function_fits():
    x = np.arange(1, 9.0)
    n = np.full(8, 60)
    good = fit_psychometric(*_observer(7)[:3], 1 / (np.arange(1, 21.0) + 3), bootstrap=200)
    zigzag = np.array([58, 20, 57, 18, 55, 17, 50, 15])  # up and down: no sigmoid fits
    bad = fit_psychometric(x, zigzag, n, 0.25, bootstrap=200)
    assert bad["gof_p"] < 0.01 and bad["gof_p_chi2"] < 1e-6
    assert good["gof_p"] > 0.01
    assert 1 / 201 <= bad["gof_p"]  # the Monte Carlo p is never 0


def test_the_bootstrap_is_reproducible_and_seeded():
    a = fit_psychometric(*_observer(3), bootstrap=50, seed=5)
    b = fit_psychometric(*_observer(3), bootstrap=50, seed=5)
    c = fit_psychometric(*_observer(3), bootstrap=50, seed=6)
    assert a == b and a["threshold_lo"] != c["threshold_lo"]
    assert a["threshold"] == c["threshold"]


@pytest.mark.parametrize(
    "args,message",
    [
        (dict(sigmoid="weibull"), "unknown sigmoid"),
        (dict(direction="down"), "unknown direction"),
        (dict(bootstrap=-1), "bootstrap"),
        (dict(x=[1, 2]), "at least 3"),
        (dict(guess=1.0), "guess rate"),
        (dict(k=[1, 2, 30]), "right <= trials"),
    ],
)
def test_bad_input_is_one_clear_error(args, message):
    kw = dict(x=[1, 2, 3], k=[9, 5, 2], n=[10, 10, 10], guess=0.25) | args
    x, k, n, guess = (kw.pop(v) for v in ("x", "k", "n", "guess"))
    if len(x) != len(k):
        k, n = k[: len(x)], n[: len(x)]
    with pytest.raises(BayesobsInputError, match=message):
        fit_psychometric(x, k, n, guess, bootstrap=kw.pop("bootstrap", 0), **kw)


# ------------------------------------------------------------------ trial tables and score
def search_trials(n: int = 900, seed: int = 0) -> pd.DataFrame:
    """Cell answers of one simulated searcher: accuracy falls with the set size."""
    rng = np.random.default_rng(seed)
    k = rng.integers(1, 31, n)
    target = rng.choice(CELLS, n)
    p_find = 1 - sigmoid_value(k, 12.0, 10.0)  # then 25% by guessing
    found = rng.uniform(size=n) < 0.97 * p_find
    resp = np.where(found, target, rng.choice(CELLS, n))
    return pd.DataFrame(
        {
            "subject": "sim:searcher",
            "task": "circle_sizes",
            "condition": "small",  # a human-style file: condition is the search condition
            "set_size": k,
            "modality": "image",
            "stimulus": k,  # as the runner logs a search trial
            "response": (resp == target).astype(float),
            "target_cell": target,
            "response_cell": resp,
            "correct": (resp == target).astype(int),
        }
    )


def perception_trials(seed: int = 0) -> pd.DataFrame:
    """Circuits with 4..10 components (chance 1/n) and a two-size variant (too few levels)."""
    rng = np.random.default_rng(seed)
    rows = []
    for variant, sizes in (("wires", range(4, 11)), ("two_sizes", (4, 5))):
        for size in sizes:
            for _ in range(30):
                chance = 1 / size
                p = chance + (1 - chance - 0.05) * sigmoid_value(
                    size, 7.0, 4.0, "norm", "decreasing"
                )
                right = int(rng.uniform() < p)
                rows.append(
                    {
                        "paradigm": "perception",
                        "subject": "sim:looker",
                        "task": "circuits",
                        "variant": variant,
                        "modality": "image",
                        "condition": "base",
                        "problem_size": size,
                        "stimulus": size,  # as the runner logs a perception trial
                        "response": float(right),
                        "chance": chance,
                        "correct": right,
                        "valid": True,
                        "gold": "1",
                        "response_value": "1" if right else "2",
                    }
                )
    return pd.DataFrame(rows)


def test_levels_table_counts_and_wilson_intervals():
    lv = psychometric_levels(search_trials())
    assert set(lv["paradigm"]) == {"search"} and (lv["level"] == "set_size").all()
    assert (lv["guess"] == 0.25).all() and (lv["variant"] == "small").all()
    assert (lv["condition"] == "base").all()  # the runner's condition (search.csv: ablation)
    assert lv["n"].sum() == 900 and len(lv) == 30
    assert ((lv["lo"] <= lv["accuracy"]) & (lv["accuracy"] <= lv["hi"])).all()


def test_too_few_levels_and_no_chance_go_to_missing():
    lv = psychometric_levels(perception_trials())
    lv.loc[lv["variant"] == "wires", "guess"] = np.nan
    table, missing = psychometric_table(lv, bootstrap=0)
    assert table.empty and list(table.columns) == COLUMNS
    reasons = dict(zip(missing["component"], missing["reason"], strict=True))
    assert "2 level(s) of problem_size" in reasons["psychometric perception two_sizes image base"]
    assert reasons["psychometric perception wires image base"].startswith("no chance level")


def test_score_writes_psychometric_csv_for_search_and_perception(tmp_path):
    from bayesobs.cli import main

    pd.concat([search_trials(), perception_trials()], ignore_index=True).to_csv(
        tmp_path / "trials.csv", index=False
    )
    assert main(["score", str(tmp_path / "trials.csv"), "--out", str(tmp_path / "s")]) == 0
    t = pd.read_csv(tmp_path / "s" / "psychometric.csv")
    assert list(t.columns) == COLUMNS
    assert len(t) == 2 and set(t["paradigm"]) == {"search", "perception"}
    s = t.set_index("paradigm")
    assert s.loc["search", "n_levels"] == 30 and s.loc["search", "n_trials"] == 900
    assert s.loc["search", "guess"] == 0.25
    assert abs(s.loc["search", "threshold"] - 12.0) < 3.0
    assert s.loc["perception", "n_levels"] == 7 and s.loc["perception", "variant"] == "wires"
    assert s.loc["perception", "guess_max"] == pytest.approx(0.25)  # 1/n per level
    assert s.loc["perception", "guess_min"] == pytest.approx(0.1)
    # score's default --bootstrap (30), as every other interval (issue 32 §6)
    assert (t["bootstrap"] == 30).all() and t["threshold_lo"].notna().all()
    assert (t["threshold_lo"] <= t["threshold"]).all() and (
        t["threshold"] <= t["threshold_hi"]
    ).all()
    missing = pd.read_csv(tmp_path / "s" / "missing.csv")
    row = missing[missing["component"] == "psychometric perception two_sizes image base"]
    assert len(row) == 1 and "needs at least 3" in row["reason"].iloc[0]


def test_report_draws_the_fitted_curves(tmp_path):
    from bayesobs.report.html import build_report
    from bayesobs.report.psychometric import psychometric_curve

    trials = search_trials()
    lv = psychometric_levels(trials)
    table, _ = psychometric_table(lv, bootstrap=0)
    fig = psychometric_curve(table.iloc[0], lv)
    ax = fig.axes[0]
    (curve,) = (line.get_ydata() for line in ax.lines if line.get_gid() == "fit")
    (guess,) = (line.get_ydata() for line in ax.lines if line.get_gid() == "guess")
    assert (guess == 0.25).all()
    assert len(curve) == 200 and curve[0] > 0.8 and curve[-1] == pytest.approx(0.25, abs=0.05)
    assert len(ax.collections) == 1  # the Wilson error bars
    trials.to_csv(tmp_path / "t.csv", index=False)
    index = build_report([tmp_path / "t.csv"], tmp_path / "r", bootstrap=0)
    page = index.read_text()
    assert "Psychometric functions: circle_sizes" in page
    assert (tmp_path / "r" / "figures" / "psychometric_search_circle_sizes.png").stat().st_size
    assert (tmp_path / "r" / "tables" / "psychometric.csv").exists()


@pytest.mark.parametrize("B", [0, 7])
def test_psychometric_bootstrap_follows_the_bootstrap_option(tmp_path, B):
    """Issue 32 §6: ``score --bootstrap B`` gives psychometric.csv B replicates (0: no intervals, a note)."""
    from bayesobs.cli import main
    from bayesobs.scores.psychometric import NO_BOOTSTRAP_NOTE

    search_trials().to_csv(tmp_path / "trials.csv", index=False)
    out = tmp_path / "s"
    assert (
        main(["score", str(tmp_path / "trials.csv"), "--out", str(out), "--bootstrap", str(B)]) == 0
    )
    t = pd.read_csv(out / "psychometric.csv", keep_default_na=False, na_values=[""])
    assert (t["bootstrap"] == B).all()
    if B:
        assert t["threshold_lo"].notna().all() and t["gof_p"].notna().all()
        assert (t["interval_note"].isna()).all()
    else:
        assert (
            t[[f"{p}_{e}" for p in ("threshold", "width", "lapse") for e in ("lo", "hi")]]
            .isna()
            .all()
            .all()
        )
        assert t["gof_p"].isna().all() and t["threshold"].notna().all()
        assert (t["interval_note"] == NO_BOOTSTRAP_NOTE).all()
