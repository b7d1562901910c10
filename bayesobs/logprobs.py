"""Answer distributions from token log-probabilities (``--logprobs K``; docs/method.md)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

from .errors import BayesobsInputError
from .parse import answer_span, read_answer

MAX_TOP_LOGPROBS = 20  # OpenAI's limit on top_logprobs
TOP_ALTERNATIVES = 5  # answers kept in ``response_top``
RESPONSES = ("sampled", "expected")  # what ``fit --response`` fits
COLUMNS = ("response_expected", "response_sd", "response_mass", "response_top")
# characters that carry a number or an expression on: after them the answer is not yet known
_GOES_ON = frozenset("0123456789.,/:eE+-*x×^")
_COMPLETE = re.compile(r"[-+]?(?:\d+(?:[.,]\d+)?|[.,]\d+)")

# one compact token: [text, logprob, [[alternative, logprob], ...]]
Token = list


def compact(content: Any) -> list[Token] | None:
    """The compact form of a reply's ``choices[0].logprobs.content`` (None if absent or malformed)."""
    if not isinstance(content, list) or not content:
        return None
    out = []
    for item in content:
        if not isinstance(item, dict):
            return None
        text, lp = item.get("token"), item.get("logprob")
        if not isinstance(text, str) or not _is_logprob(lp):
            return None
        alts = []
        for alt in item.get("top_logprobs") or ():
            if isinstance(alt, dict) and isinstance(alt.get("token"), str):
                if _is_logprob(alt.get("logprob")):
                    alts.append([alt["token"], round(float(alt["logprob"]), 6)])
        out.append([text, round(float(lp), 6), alts])
    return out


def _is_logprob(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v <= 0 and v > -math.inf


def _shape(token: str) -> str:
    return "".join("d" if c.isdigit() else c for c in token)


def _ends_number(alternative: str) -> bool:
    rest = alternative.lstrip()
    return not rest or rest[0] not in _GOES_ON


def answer_distribution(
    tokens: Sequence[Token],
    reply: str,
    read: Callable[[str], float],
    span: tuple[int, int] | None,
) -> tuple[dict[str, Any], str]:
    """The distribution over the answers the model could have written, per the module's rules."""
    if span is None:
        return {}, "no numeric answer to weigh"
    if "".join(t[0] for t in tokens) != reply:
        return {}, "the tokens do not spell the reply"
    sampled = read(reply)
    if not math.isfinite(sampled):
        return {}, "no numeric answer to weigh"
    starts, at = [], 0
    for t in tokens:
        starts.append(at)
        at += len(t[0])
    first = next(j for j, t in enumerate(tokens) if starts[j] + len(t[0]) > span[0])
    last = next(j for j in range(len(tokens) - 1, -1, -1) if starts[j] < span[1])
    # before token j, has a whole number been written (``0``, ``0.8``, not ``0.`` or ``1/``)?
    complete = [
        j > first and _COMPLETE.fullmatch(reply[span[0] : starts[j]].strip()) is not None
        for j in range(len(tokens))
    ]
    mass: dict[float, float] = {}
    path = 1.0  # probability of the sampled tokens so far, given the text before the number
    for j in range(first, last + 1):
        token, lp, alts = tokens[j]
        head, tail = reply[: starts[j]], reply[starts[j] + len(token) :]
        for alt, alp in alts:
            if alt == token:
                continue
            if _shape(alt) == _shape(token):
                value = read(head + alt + tail)
            elif complete[j] and _ends_number(alt):
                value = read(head + alt)
            else:
                continue  # a continuation the log cannot tell
            if math.isfinite(value):
                key = round(float(value), 12)
                mass[key] = mass.get(key, 0.0) + path * math.exp(alp)
        path *= math.exp(lp)
    key = round(float(sampled), 12)
    mass[key] = mass.get(key, 0.0) + path
    total = sum(mass.values())
    values = list(mass)
    weights = [m / total for m in mass.values()]
    mean = sum(w * v for w, v in zip(weights, values, strict=True))
    var = sum(w * (v - mean) ** 2 for w, v in zip(weights, values, strict=True))
    top = sorted(zip(values, weights, strict=True), key=lambda vw: (-vw[1], vw[0]))
    return {
        "response_expected": mean,
        "response_sd": math.sqrt(var),
        "response_mass": min(1.0, total),
        "response_top": [[v, round(w, 6)] for v, w in top[:TOP_ALTERNATIVES]],
    }, ""


def reply_distribution(
    tokens: Sequence[Token] | None,
    reply: str | None,
    fraction: bool = False,
    answer_range: tuple[float, float] | None = None,
    truncated: bool = False,
    start: int = 0,
) -> dict[str, Any]:
    """The trial-row columns of a numeric reply's answer distribution (:data:`COLUMNS`)."""
    empty = dict.fromkeys(COLUMNS)
    if not tokens:
        return {**empty, "response_dist_note": "no logprobs in the reply"}
    if not reply:
        return {**empty, "response_dist_note": "no numeric answer to weigh"}

    def read(text: str) -> float:
        return read_answer(text[start:], fraction, answer_range, truncated)[0]

    span = answer_span(reply[start:], fraction, answer_range, truncated)
    span = None if span is None else (span[0] + start, span[1] + start)
    cols, reason = answer_distribution(tokens, reply, read, span)
    if reason:
        return {**empty, "response_dist_note": reason}
    return {**cols, "response_dist_note": None}


def use_expected(trials):
    """Trials whose ``response`` is the logged ``response_expected`` (``fit --response expected``)."""
    expected = trials.get("response_expected")
    if expected is None or not expected.notna().any():
        raise BayesobsInputError(
            "--response expected needs the column response_expected, which runs with "
            "--logprobs K log for each numeric answer; these trials have none"
        )
    out = trials.copy()
    out["response_sampled"] = out["response"]
    out["response"] = expected.astype(float)
    n_without = int((out["response_sampled"].notna() & out["response"].isna()).sum())
    return out, n_without
