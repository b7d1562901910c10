"""QUEST+ level placement (issue 53): against brute force, and on a simulated observer."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from bayesobs.errors import BayesobsInputError
from bayesobs.placement import choose_levels, posterior, threshold_interval
from bayesobs.scores import psychometric_bayes

GUESS = 0.25


@pytest.fixture
def small_grid(monkeypatch):
    """The score's grid, made small so that a brute-force loop over it is quick."""
    monkeypatch.setattr(psychometric_bayes, "COARSE", (12, 10, 4, 3))
    monkeypatch.setattr(psychometric_bayes, "FINE", (10, 8, 4, 3))


def observer(levels, rng, threshold=20.0, width=8.0, lapse=0.02, guess=GUESS):
    """Right (1) or wrong (0) of a decreasing normal psychometric observer of known threshold."""
    z = -2 * stats.norm.ppf(0.95) * (np.asarray(levels, float) - threshold) / width
    p = guess + (1 - guess - lapse) * stats.norm.cdf(z)
    return (rng.random(len(p)) < p).astype(int)


def brute_force_entropy(mass, axes, level, guess=GUESS, of="all"):
    """Expected entropy of the posterior (``all``: threshold, width, lapse; or a marginal) after one trial at ``level``."""
    scale = 2 * stats.norm.ppf(0.95)
    kept = {"all": 3, "threshold_width": 2, "threshold": 1}[of]
    shape = mass.shape[:kept]
    joint = {1: np.zeros(shape), 0: np.zeros(shape)}
    for i, t in enumerate(axes[0]):
        for j, w in enumerate(axes[1]):
            for a, lapse in enumerate(axes[2]):
                p = guess + (1 - guess - lapse) * stats.norm.cdf(-scale * (level - t) / w)
                where = (i, j, a)[:kept]
                for e in range(len(axes[3])):
                    joint[1][where] += mass[i, j, a, e] * p
                    joint[0][where] += mass[i, j, a, e] * (1 - p)
    h = 0.0
    for marg in joint.values():
        total = marg.sum()
        h -= sum(v * math.log(v / total) for v in marg.ravel() if v > 0)
    return h


@pytest.mark.parametrize(
    ("per_level", "of"),
    [(False, "all"), (True, "all"), (False, "threshold"), (False, "threshold_width")],
)
def test_chosen_level_is_the_brute_force_argmin(small_grid, per_level, of):
    rng = np.random.default_rng(1)
    candidates = np.arange(0, 40, 3)
    x = np.repeat(candidates, 2) if per_level else rng.integers(0, 40, 30)
    chance = (lambda v: 1 / (2 + np.asarray(v) / 5)) if per_level else (lambda v: GUESS)
    correct = observer(x, rng, guess=chance(x))
    mass, axes = posterior(x, correct, chance(x) if per_level else GUESS)
    brute = [brute_force_entropy(mass, axes, c, chance(c), of) for c in candidates]
    chosen = choose_levels(x, correct, chance(x) if per_level else GUESS, candidates, 1, of=of)
    assert chosen[0] == candidates[int(np.argmin(brute))]


def test_placed_levels_concentrate_near_the_threshold(small_grid):
    rng = np.random.default_rng(3)
    candidates = np.arange(0, 50)
    x = rng.integers(0, 50, 12)  # a first run at uniform levels, as the fixed protocol asks
    correct = observer(x, rng)
    placed = []
    for r in range(5):
        levels = choose_levels(x, correct, GUESS, candidates, 8, seed=r)
        placed.extend(levels)
        x, correct = np.r_[x, levels], np.r_[correct, observer(levels, rng)]
    near = np.mean(np.abs(np.array(placed) - 20.0) <= 8.0)
    # uniform levels on 0..49 put 17 of 50 (34%) within one width of the threshold
    assert near >= 0.7, (near, placed)


def test_same_rows_and_seed_give_the_same_levels_and_a_batch_spreads(small_grid):
    rng = np.random.default_rng(5)
    x = rng.integers(0, 30, 20)
    correct = observer(x, rng, threshold=12.0, width=6.0)
    a = choose_levels(x, correct, GUESS, np.arange(30), 10, seed=4)
    assert np.array_equal(a, choose_levels(x, correct, GUESS, np.arange(30), 10, seed=4))
    assert len(np.unique(a)) >= 3
    best = choose_levels(x, correct, GUESS, np.arange(30), 10, batch="best")
    assert len(np.unique(best)) == 10


def test_placement_refuses_too_few_levels():
    with pytest.raises(BayesobsInputError, match="at least 3 distinct levels"):
        choose_levels([1, 1, 2], [1, 0, 1], GUESS, np.arange(5), 2)
    with pytest.raises(BayesobsInputError, match="of is one of"):
        choose_levels([1, 2, 3], [1, 0, 1], GUESS, np.arange(5), 2, of="width")


def test_the_stop_rules_interval_is_the_one_the_score_reports(small_grid):
    rng = np.random.default_rng(7)
    x = rng.integers(0, 40, 60)
    correct = observer(x, rng)
    u = np.unique(x)
    k = np.array([correct[x == v].sum() for v in u])
    n = np.array([(x == v).sum() for v in u])
    fit = psychometric_bayes.fit_bayes(u, k, n, GUESS)
    lo, hi = threshold_interval(*posterior(x, correct, GUESS))
    assert (lo, hi) == pytest.approx((fit["threshold_lo"], fit["threshold_hi"]), abs=1e-9)
    assert hi - lo > 1  # a real interval, not a point
