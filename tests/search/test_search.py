"""Visual-search analyses against scipy/scikit-learn and simulated searchers with known strategies."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.linear_model import LogisticRegression

from bayesobs.search.scores import (
    logistic_slope,
    response_bias,
    search_accuracy,
    set_size_effect,
    wilson,
)

CELLS = ["1,1", "1,2", "2,1", "2,2"]


def searcher(
    kind: str, n: int = 800, seed: int = 0, subject: str = "s", condition: str = "c"
) -> pd.DataFrame:
    """Simulated trials: ``parallel`` (flat 90%), ``serial`` (capacity-limited), ``random`` (guessing)."""
    rng = np.random.default_rng(seed)
    set_size = rng.integers(0, 50, n)
    target = rng.choice(CELLS, n)
    if kind == "parallel":
        p = np.full(n, 0.9)
    elif kind == "serial":
        p = 0.25 + 0.7 * np.minimum(1.0, 4.0 / (1 + set_size))  # checks ~4 items, then guesses
    else:
        p = np.full(n, 0.0)
    found = rng.uniform(size=n) < p
    guess = rng.choice(CELLS, n)
    resp = np.where(found, target, guess)
    return pd.DataFrame(
        {
            "subject": subject,
            "task": "circle_sizes",
            "condition": condition,
            "set_size": set_size,
            "target_cell": target,
            "response_cell": resp,
            "correct": (resp == target).astype(int),
        }
    )


def test_point_biserial_and_bonferroni_match_scipy():
    t = pd.concat(
        [searcher("serial", seed=1, condition="a"), searcher("parallel", seed=2, condition="b")]
    )
    out = set_size_effect(t).set_index("condition")
    for cond, g in t.groupby("condition"):
        r, p = stats.pointbiserialr(g["correct"], g["set_size"])
        assert out.loc[cond, "r"] == pytest.approx(r, rel=1e-12)
        assert out.loc[cond, "p_bonferroni"] == pytest.approx(min(1.0, 2 * p), rel=1e-12)


def test_logistic_slope_matches_unpenalised_sklearn():
    t = searcher("serial", n=600, seed=3)
    ref = (
        LogisticRegression(C=np.inf, tol=1e-10, max_iter=10_000)
        .fit(t[["set_size"]], t["correct"])
        .coef_[0, 0]
    )
    assert logistic_slope(t["set_size"], t["correct"]) == pytest.approx(ref, rel=1e-4)
    assert np.isnan(
        logistic_slope(t["set_size"], np.ones(len(t)))
    )  # perfect accuracy: not identified


def test_wilson_interval_closed_form():
    lo, hi = wilson(np.array([0, 50]), np.array([10, 100]))
    assert lo[0] == 0 and hi[0] == pytest.approx(0.2775, abs=1e-4)  # 0/10
    assert lo[1] == pytest.approx(0.4038, abs=1e-4) and hi[1] == pytest.approx(0.5962, abs=1e-4)


def test_known_strategies_are_recovered():
    t = pd.concat(
        [
            searcher("parallel", seed=4, subject="sim:parallel"),
            searcher("serial", seed=5, subject="sim:serial"),
            searcher("random", seed=6, subject="random"),
        ]
    )
    eff = set_size_effect(t).set_index("subject")
    assert (
        abs(eff.loc["sim:parallel", "r"]) < 0.1 and eff.loc["sim:parallel", "p_bonferroni"] > 0.05
    )
    assert eff.loc["sim:serial", "r"] < -0.3 and eff.loc["sim:serial", "p_bonferroni"] < 1e-6
    assert eff.loc["sim:serial", "logistic_slope"] < 0
    assert abs(eff.loc["random", "accuracy"] - 0.25) < 0.05
    bias = response_bias(t).set_index(["subject", "cell"])
    rnd = bias.loc["random"]
    assert (rnd["selected"] - 0.25).abs().max() < 0.06 and (
        rnd["precision"] - 0.25
    ).abs().max() < 0.08
    assert (rnd["invalid"] == 0).all()
    acc = search_accuracy(t)
    # the interval is scipy's Wilson interval of the same counts
    from scipy.stats import binomtest

    for r in acc.itertuples(index=False):
        k = round(r.accuracy * r.n)
        ci = binomtest(k, int(r.n)).proportion_ci(confidence_level=0.95, method="wilson")
        assert (r.acc_lo, r.acc_hi) == pytest.approx((ci.low, ci.high), abs=1e-9)


def test_invalid_answers_are_counted():
    t = searcher("parallel", n=200, seed=7)
    t.loc[t.index[:20], "response_cell"] = "invalid"
    t.loc[t.index[:20], "correct"] = 0
    b = response_bias(t)
    assert (b["invalid"] == 0.1).all()
    assert b["selected"].sum() == pytest.approx(0.9)


def test_coordinate_error_interval():
    t = searcher("parallel", n=300, seed=8).assign(
        set_size=5, error_px=np.random.default_rng(9).gamma(2.0, 20.0, 300)
    )
    acc = search_accuracy(t).iloc[0]
    mean, sem = t["error_px"].mean(), t["error_px"].std() / np.sqrt(300)
    assert acc["error_px"] == pytest.approx(mean)
    # a percentile bootstrap of the mean of 300 values: close to the normal-theory interval
    assert acc["error_hi"] - acc["error_px"] == pytest.approx(
        stats.t.ppf(0.975, 299) * sem, rel=0.12
    )
    assert acc["error_px"] - acc["error_lo"] == pytest.approx(
        stats.t.ppf(0.975, 299) * sem, rel=0.12
    )
    again = search_accuracy(t).iloc[0]  # seeded by the group: reproducible
    assert (again["error_lo"], again["error_hi"]) == (acc["error_lo"], acc["error_hi"])
