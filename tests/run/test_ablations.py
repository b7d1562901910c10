"""Conditions against the paper's wording (its A.2.2 and A.3.1) and their schedules."""

from __future__ import annotations

import numpy as np
import pytest

from bayesobs.errors import BayesobsInputError
from bayesobs.run.ablations import (
    COT_SENTENCE,
    DEFAULT_VISIBLE_BUDGET,
    DEFAULTS,
    blur_schedule,
    condition,
    final_answer,
    reply_budget,
    system_prompt,
)
from bayesobs.run.reasoning import DEFAULT_REASONING_BUDGET
from bayesobs.stimuli import get_task
from bayesobs.trials import CONDITIONS

LINE = get_task("line_ratio")
BASE = (
    "You are a line-length ratio estimator. Estimate the ratio of the shorter line to the longer "
    "line as a decimal number between 0 and 1. Do not explain or reason. Only output the final answer."
)


def test_base_system_prompt_is_the_papers():
    assert system_prompt(LINE, condition("base"), [], (0.1, 0.5)) == BASE


def test_verbal_steering_is_the_papers_sentence():
    text = system_prompt(LINE, condition("steer_verbal"), [], (0.1, 0.5))
    assert text.startswith(
        "You are a line-length ratio estimator. The given data is noisy and may contain "
        "artifacts. You should behave like a Bayesian observer and take into account prior "
        "and likelihood in your predictions. "
    )
    assert text.endswith("Do not explain or reason. Only output the final answer.")


def test_numeric_steering_reports_the_range_of_the_last_ten():
    previous = list(np.linspace(0.1, 0.9, 15))
    text = system_prompt(LINE, condition("steer_numeric"), previous, (0.1, 0.9))
    window = previous[-10:]
    assert (
        "The given data is noisy and may contain artifacts. For 10 previous observations, the "
        f"values were observed to lie in the range of {min(window):.3g} to {max(window):.3g}."
    ) in text
    # the first trial has no previous observations: no range sentence
    first = system_prompt(LINE, condition("steer_numeric"), [], (0.1, 0.9))
    assert "previous observations" not in first


def test_biased_steering_shifts_the_range_by_half_the_session_range():
    previous = [0.2, 0.3, 0.4]
    text = system_prompt(LINE, condition("steer_biased"), previous, (0.1, 0.5))
    shift = DEFAULTS["steer_bias"] * (0.5 - 0.1)
    assert f"range of {0.2 + shift:.3g} to {0.4 + shift:.3g}." in text


@pytest.mark.parametrize("n", [1, 2, 30])
def test_blur_schedules(n):
    assert np.all(blur_schedule(condition("base"), n) == 0)
    assert np.all(blur_schedule(condition("noise_constant"), n) == DEFAULTS["blur_sigma"])
    g = blur_schedule(condition("noise_gradual"), n)
    if n > 1:
        assert g[0] == 0 and g[-1] == DEFAULTS["blur_max_sigma"] and np.all(np.diff(g) > 0)
    np.testing.assert_allclose(
        blur_schedule(condition("noise_constant"), n, {"blur_sigma": 1.5}), 1.5
    )


def test_context_windows_and_reversal():
    assert condition("base").context == DEFAULTS["context"]
    assert condition("context_short").context == 3 and condition("context_long").context == 20
    assert condition("context_none").context == 0
    assert condition("context_reversed").reverse and not condition("base").reverse
    assert condition("context_long", {"context_long": 40}).context == 40


def test_every_contract_condition_exists_and_unknown_ones_are_refused():
    assert [condition(c).name for c in CONDITIONS] == list(CONDITIONS)
    with pytest.raises(BayesobsInputError, match="unknown condition 'steer_loud'"):
        condition("steer_loud")


# ---------------------------------------------------------------- cot (issue 31 section 3)
def test_cot_prompt_asks_for_reasoning_then_a_labelled_answer():
    text = system_prompt(LINE, condition("cot"), [], (0.1, 0.5))
    assert "Do not explain or reason" not in text
    assert text.startswith(
        BASE.removesuffix(" Do not explain or reason. Only output the final answer.")
    )
    assert text.endswith(COT_SENTENCE)
    assert "step by step" in COT_SENTENCE and "Answer:" in COT_SENTENCE
    c = condition("cot")
    assert (
        c.reasoning and c.context == condition("base").context and not condition("base").reasoning
    )


@pytest.mark.parametrize(
    ("reply", "part"),
    [
        ("The short line has 12 dashes and the long one 30, so 12/30 = 0.4.\nAnswer: 0.4", "0.4"),
        ("Counting... about 40 dots, maybe 45.\n\n**Final answer:** 42", "42"),
        (
            "Cell (1,1) looks like a distractor; Cell (2,1) is the odd one.\nAnswer: Cell (2,1)",
            "Cell (2,1)",
        ),
        ("I think the answer is 0.35. That answer seems right.", "0.35. That answer seems right."),
        ("no label at all, 0.3", "no label at all, 0.3"),
        ("", ""),
    ],
)
def test_final_answer_is_the_text_after_the_last_answer_label(reply, part):
    assert final_answer(reply) == part


@pytest.mark.parametrize(
    ("reply", "value"),
    [
        (
            "Shorter line 12, longer 30. A ratio of 0.3 would be too low; 12/30 = 0.4.\nAnswer: 0.4",
            0.4,
        ),
        (
            "Step 1: the marker sits at 7 of 20 characters.\nStep 2: 7/20 = 0.35.\nFinal answer: 0.35",
            0.35,
        ),
        ("Let me think. 12 and 30. The ratio is 0.4", 0.4),
    ],
)
def test_a_reasoned_reply_reads_as_its_final_answer(reply, value):
    rec = LINE.record(None, final_answer(reply))
    assert rec["valid"] and rec["response"] == pytest.approx(value)


def test_cot_reply_budget_is_the_visible_budget_plus_the_reasoning_budget():
    assert reply_budget(None, condition("base")) is None  # the subject's own budget
    assert reply_budget(30, condition("base")) == 30
    assert reply_budget(30, condition("cot"), visible=64, reasoning=1000) == 1030
    assert reply_budget(None, condition("cot"), visible=64, reasoning=1000) == 1064
    assert reply_budget(None, condition("cot")) == DEFAULT_VISIBLE_BUDGET + DEFAULT_REASONING_BUDGET
