"""Signatures of the Tunnel Vision simulated subjects on generated trials (seeded, deterministic).

Each subject looks at the pixels; accuracy is scored with the task's parser
against the generator's gold answer, and the effects are checked with
scipy (binomial tests, point-biserial correlations, a logistic fit).
"""

from __future__ import annotations

import dataclasses
from functools import cache

import numpy as np
import pytest
from scipy import stats

from bayesobs.tunnel import circuits, hunt, reid, sims
from bayesobs.tunnel.parse import parse

N_REID = 40  # per variant
N_CHAIN = 80  # per chain length
N_CIRCUIT = 100


@cache
def reid_trials(variant):
    return tuple(reid.make_trial(variant, 20_000 + s, with_demos=False) for s in range(N_REID))


@cache
def hunt_trials(variant, n):
    return tuple(hunt.make_trial(variant, 30_000 + s, with_demos=False) for s in range(n))


@cache
def circuit_trials(mode, n):
    return tuple(circuits.make_trial(mode, 40_000 + s, with_demos=False) for s in range(n))


_SCORED: dict = {}


def correct(sim, trials, seed=0, **kw):
    key = (sim, id(trials), seed, tuple(sorted(kw.items())))
    if key not in _SCORED:
        _SCORED[key] = _correct(sim, trials, seed, **kw)
    return _SCORED[key]


def _correct(sim, trials, seed=0, **kw):
    rng = np.random.default_rng(seed)
    fn = sims.SIMS[trials[0].task][sim]
    out = []
    for t in trials:
        value, why = parse(t.answer_format, fn(t, rng, **kw))
        assert why is None  # every simulated reply is well-formed
        out.append(value == t.answer)
    return np.array(out)


@pytest.mark.slow
@pytest.mark.parametrize("variant", reid.VARIANTS)
def test_matcher_reidentifies_and_random_is_at_chance(variant):
    trials = reid_trials(variant)
    assert correct("matcher", trials).mean() >= 0.95
    # the random subject's expected accuracy: its replies pooled over five seeds
    assert abs(np.mean([correct("random", trials, seed=k).mean() for k in range(5)]) - 0.5) <= 0.07


def test_yes_has_zero_f1_on_negatives_and_gist_is_blind_to_shape():
    trials = reid_trials("unconnected")
    truth = np.array([t.answer == "yes" for t in trials])
    said_yes = np.array([parse("reid", sims.always_yes(t, None))[0] == "yes" for t in trials])
    assert said_yes.all()
    tp_no = np.sum(~said_yes & ~truth)
    assert tp_no == 0  # F1(no) = 2 TP / (2 TP + FP + FN) = 0
    assert (said_yes == truth).mean() == truth.mean()
    gist = correct("gist", trials)
    assert gist.mean() < correct("matcher", trials).mean() - 0.2


@pytest.mark.slow
def test_chainer_accuracy_falls_with_chain_length_as_one_minus_e_to_the_l():
    e = 0.25
    acc = {}
    for steps in (2, 3, 4):
        ok = correct("chainer", hunt_trials(f"L{steps}", N_CHAIN), error=e)
        acc[steps] = ok.mean()
        # a chain followed without a slip, plus a lucky final colour (1 in 11) after a slip
        p = (1 - e) ** steps + (1 - (1 - e) ** steps) / 11
        assert stats.binomtest(int(ok.sum()), len(ok), p).pvalue > 0.01
    assert acc[2] > acc[3] > acc[4]
    assert correct("chainer", hunt_trials("L4", 30), error=0.0).mean() == 1.0  # reads every label


def test_chainer_answers_the_decomposed_steps():
    t = hunt.make_trial("decomposed", 5, with_demos=False)
    rng = np.random.default_rng(0)
    # a perfect reader answers each gold-path step with the next cell, then the final colour
    for prompt, gold, fmt in zip(
        t.meta["step_prompts"], t.meta["step_answers"], t.meta["step_formats"], strict=True
    ):
        step = dataclasses.replace(t, prompt=prompt)
        assert parse(fmt, sims.chainer(step, rng, error=0.0)) == (gold, None)


def test_frequent_colour_heuristic_near_twelve_percent():
    trials = hunt_trials("L3", 150)
    ok = correct("frequent", trials)
    assert abs(ok.mean() - 0.12) <= 0.06
    rng = np.random.default_rng(3)
    for t in trials[:20]:  # it always names a colour held by the most cells
        assert parse("hunt_colour", sims.frequent(t, rng))[0] in t.meta["most_frequent"]
    assert (
        abs(np.mean([correct("random", trials, seed=k).mean() for k in range(3)]) - 1 / 11) <= 0.07
    )


@pytest.mark.slow
def test_colourcue_uses_colour_only():
    unique = circuit_trials("unique", 60)
    single = circuit_trials("single", N_CIRCUIT)
    assert correct("colourcue", unique).mean() >= 0.9
    assert abs(correct("colourcue", single).mean() - 1 / 7) <= 0.1


def test_perfect_tracer_follows_every_wire():
    for mode in circuits.COLOUR_MODES:
        assert correct("tracer", circuit_trials(mode, 20), confusion=0.0).mean() >= 0.95


def logistic(x, y):
    """Logistic regression of ``y`` on the columns of ``x`` (Newton-Raphson): coefficients, Wald p."""
    x = np.column_stack([np.ones(len(y)), x])
    b = np.zeros(x.shape[1])
    for _ in range(50):
        p = 1 / (1 + np.exp(-x @ b))
        b = b + np.linalg.solve(x.T @ (x * (p * (1 - p))[:, None]), x.T @ (y - p))
    p = 1 / (1 + np.exp(-x @ b))
    se = np.sqrt(np.diag(np.linalg.inv(x.T @ (x * (p * (1 - p))[:, None]))))
    return b[1:], 2 * stats.norm.sf(np.abs(b / se))[1:]


def effects(trials, ok):
    """Point-biserial correlations with distance and crossings, and the joint logistic fit."""
    distance = np.array([t.meta["distance_px"] for t in trials]) / 100
    crossings = np.array([t.meta["crossings"] for t in trials], float)
    r_d = stats.pointbiserialr(ok, distance)
    r_c = stats.pointbiserialr(ok, crossings)
    coef, p = logistic(np.column_stack([distance, crossings]), ok.astype(float))
    return r_d, r_c, coef, p


def test_tracer_has_a_crossings_effect():
    """Single colour: every crossing is ambiguous; crossings, not distance, predict its errors."""
    trials = circuit_trials("single", N_CIRCUIT)
    ok = correct("tracer", trials)
    _, r_c, coef, p = effects(trials, ok)
    assert r_c.statistic < 0 and r_c.pvalue < 0.01
    assert coef[1] < 0 and p[1] < 0.01  # crossings, with distance in the model
    assert p[0] > 0.05  # no distance effect once crossings are known


def test_nearest_has_a_distance_effect():
    """Nearest box: distance, not crossings, predicts success (Table 2's non-tracing pattern)."""
    trials = circuit_trials("standard", N_CIRCUIT)
    ok = correct("nearest", trials)
    r_d, _, coef, p = effects(trials, ok)
    assert r_d.statistic < 0 and r_d.pvalue < 0.01
    assert coef[0] < 0 and p[0] < 0.01  # distance, with crossings in the model
    assert p[1] > 0.05  # no crossings effect once distance is known
    assert abs(np.mean([correct("random", trials, seed=k).mean() for k in range(3)]) - 1 / 7) <= 0.1


def test_answer_dispatch():
    t = circuit_trials("unique", 60)[0]
    assert sims.answer("colourcue", t, np.random.default_rng(0)) == "{" + t.answer + "}"
    with pytest.raises(ValueError, match="no simulated subject"):
        sims.answer("matcher", t, np.random.default_rng(0))
