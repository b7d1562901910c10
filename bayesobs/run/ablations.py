"""Conditions: steering prompts, blur schedules, text noise, context windows, order reversal, reasoning."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..chat import COT_SENTENCE
from ..errors import BayesobsInputError
from .reasoning import DEFAULT_REASONING_BUDGET

DEFAULTS = {
    "context": 10,  # base rolling context (previous trials)
    "context_short": 3,
    "context_long": 20,
    "blur_sigma": 3.0,  # noise_constant: Gaussian blur sigma in pixels
    "blur_max_sigma": 6.0,  # noise_gradual: sigma rises linearly from 0 to this over a session
    "steer_window": 10,  # steer_numeric/steer_biased: range of this many previous stimuli
    "steer_bias": 0.5,  # steer_biased: range shifted up by this fraction of the session range
    "text_noise": 0.1,  # noise_text: relative jitter of symbol runs and numbers (strength s)
}
# noise_text degrades runs of a repeated symbol and whole numbers: tasks whose text has them
TEXT_NOISE_TASKS = ("line_ratio", "marker_location", "maze_distance")
SMUDGE = "~"
_RUN = re.compile(r"([^\w\s~])\1+")
_NUMBER = re.compile(r"(?<![\d.])\d+(?![\d.])")
# cot: the visible reply budget of a subject that has none of its own (sim subjects); the
# API subjects' default --max-tokens is the same
DEFAULT_VISIBLE_BUDGET = 64
# the last answer label of a reasoned reply: "Answer:", "**Final answer:**", "the answer is"
_ANSWER_LABEL = re.compile(r"\banswer\b\W{0,4}?(?:\s*(?:is\b|:|=)\W{0,4})", re.I)


@dataclass(frozen=True)
class Condition:
    """How a condition changes the base protocol."""

    name: str
    context: int
    steering: str | None = None  # None, "verbal", "numeric", "biased"
    blur: str | None = None  # None, "constant", "gradual"
    reverse: bool = False
    text_noise: float = 0.0  # noise_text: strength of the text degradation
    hint: bool = False  # hint: the task's field hint joins the system prompt (task hvs)
    reasoning: bool = False  # cot: reason step by step, then a labelled answer


def condition(name: str, options: dict | None = None) -> Condition:
    """The :class:`Condition` called ``name`` with defaults overridden by ``options``."""
    o = {**DEFAULTS, **(options or {})}
    table = {
        "base": Condition("base", o["context"]),
        "steer_verbal": Condition("steer_verbal", o["context"], steering="verbal"),
        "steer_numeric": Condition("steer_numeric", o["context"], steering="numeric"),
        "steer_biased": Condition("steer_biased", o["context"], steering="biased"),
        "noise_constant": Condition("noise_constant", o["context"], blur="constant"),
        "noise_gradual": Condition("noise_gradual", o["context"], blur="gradual"),
        "noise_text": Condition("noise_text", o["context"], text_noise=float(o["text_noise"])),
        "context_short": Condition("context_short", o["context_short"]),
        "context_long": Condition("context_long", o["context_long"]),
        "context_reversed": Condition("context_reversed", o["context"], reverse=True),
        "context_none": Condition("context_none", 0),
        "hint": Condition("hint", o["context"], hint=True),  # tasks with hints only (hvs)
        "cot": Condition("cot", o["context"], reasoning=True),
    }
    if name not in table:
        raise BayesobsInputError(f"unknown condition {name!r}; choose from {', '.join(table)}")
    return table[name]


def blur_schedule(cond: Condition, n: int, options: dict | None = None) -> np.ndarray:
    """Blur sigma (pixels) of each of ``n`` trials; applies to images only."""
    o = {**DEFAULTS, **(options or {})}
    if cond.blur == "constant":
        return np.full(n, float(o["blur_sigma"]))
    if cond.blur == "gradual":
        return np.linspace(0.0, float(o["blur_max_sigma"]), n) if n > 1 else np.zeros(n)
    return np.zeros(n)


def degrade_text(text: str, strength: float, rng: np.random.Generator) -> str:
    """The ``noise_text`` rendering: measurement noise in the text modality, as blur is for images."""
    if strength <= 0:
        return text
    p = min(strength, 0.9)

    def run(m: re.Match) -> str:
        n = max(1, round(len(m.group(0)) * (1 + strength * rng.standard_normal())))
        smudged = rng.uniform(size=n) < p
        return "".join(SMUDGE if sm else m.group(1) for sm in smudged)

    def number(m: re.Match) -> str:
        n = int(m.group(0))
        if n < 1:
            return m.group(0)
        n = max(1, round(n * (1 + strength * rng.standard_normal())))
        return (SMUDGE if rng.uniform() < p else "") + str(n)

    return _NUMBER.sub(number, _RUN.sub(run, text))


def _fmt(v: float) -> str:
    return f"{v:.3g}"


def system_prompt(task, cond: Condition, previous: list[float], session_range, options=None) -> str:
    """System prompt of one trial (the paper's A.2.2 and A.3.1)."""
    o = {**DEFAULTS, **(options or {})}
    parts = [f"You are a {task.role}."]
    if cond.steering == "verbal":
        parts.append(
            "The given data is noisy and may contain artifacts. You should behave like a Bayesian "
            "observer and take into account prior and likelihood in your predictions."
        )
    elif cond.steering in ("numeric", "biased"):
        parts.append("The given data is noisy and may contain artifacts.")
        window = previous[-int(o["steer_window"]) :]
        if window:
            lo, hi = min(window), max(window)
            if cond.steering == "biased":
                shift = float(o["steer_bias"]) * (session_range[1] - session_range[0])
                lo, hi = lo + shift, hi + shift
            parts.append(
                f"For {len(window)} previous observations, the values were observed to lie in the "
                f"range of {_fmt(lo)} to {_fmt(hi)}."
            )
    parts.append(task.instruction)
    # perception tasks (Tunnel Vision ...) let the model reason and read the answer from braces;
    # the magnitude and search tasks keep the paper's sentence, word for word
    if cond.reasoning:
        parts.append(COT_SENTENCE)
    elif not getattr(task, "allow_reasoning", False):
        parts.append("Do not explain or reason. Only output the final answer.")
    return " ".join(parts)


def final_answer(reply: str | None) -> str:
    """The answer part of a reasoned (``cot``) reply: the text after its last answer label."""
    text = reply or ""
    ends = [m.end() for m in _ANSWER_LABEL.finditer(text)]
    return text[ends[-1] :].strip() if ends else text.strip()


def reply_budget(
    task_max_tokens: int | None,
    cond: Condition,
    visible: int | None = None,
    reasoning: int | None = None,
) -> int | None:
    """The reply budget (``Request.max_tokens``) of one trial under ``cond``."""
    if not cond.reasoning:
        return task_max_tokens
    base = task_max_tokens if task_max_tokens is not None else visible
    base = DEFAULT_VISIBLE_BUDGET if base is None else int(base)
    return base + int(DEFAULT_REASONING_BUDGET if reasoning is None else reasoning)
