r"""Reading a number out of a subject's reply, or saying why there is none."""

from __future__ import annotations

import bisect
import math
import re

MAX_READ_CHARS = 20_000  # longer replies: the first and last 10,000 characters are read
_WINDOW = 64  # characters before a number in which its cue is looked for (cues are shorter)

_UNUM = r"(?:\d+(?:[.,]\d+)?|\.\d+)(?:[eE][-+]?\d+)?"
_NUM = rf"[-+]?{_UNUM}"
_TOKEN = re.compile(
    rf"(?P<mmss>\b\d{{1,2}}:\d{{2}}\b)|(?P<frac>{_NUM}\s*/\s*{_NUM})|(?P<num>{_NUM})(?P<pct>\s*%|\s*percent\b)?"
)
# a labelled answer: the number that follows is the answer, whatever else the reply says
_LABEL = re.compile(r"\banswer\b[^\d\n.;!?]{0,30}$", re.I)
# another answer cue: the number that follows is the answer unless one is labelled
_STRONG = re.compile(
    r"(?:\b(?:estimate[ds]?|estimation|guess|result)\b[^\d\n.;!?]{0,30}|[=≈]\s*)$", re.I
)
_NEGATED = re.compile(
    r"(?:\b(?:not|never|rather than|instead of|other than)|n't)\s+"
    r"(?:(?:exactly|quite|just|equal to|be)\s+)?$",
    re.I,
)
_ALTERNATIVE = re.compile(rf"\s*,?\s*(?:or|and)\s+{_NUM}", re.I)
_CUE = re.compile(r"(answer|estimate[ds]?|approximately|about|roughly|around|is|=|:|≈|~)\s*$", re.I)
_RANGE = re.compile(rf"(?<![\w.]){_UNUM}\s*(?:%\s*)?(?:-|–|—|\bto\b)\s*{_UNUM}(?![\w.])", re.I)
_THOUSANDS = re.compile(r"(?<![\d.,])([1-9]\d{0,2})((?:,\d{3})+)(?![\d,])")
_WORDS = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "half": 0.5,
}


def _value(m: re.Match, fraction: bool) -> float:
    if m.group("mmss"):
        mm, ss = m.group("mmss").split(":")
        return float(int(mm) * 60 + int(ss))
    if m.group("frac"):
        a, b = re.split(r"\s*/\s*", m.group("frac"))
        b = float(b.replace(",", "."))
        return float(a.replace(",", ".")) / b if b else math.nan
    v = float(m.group("num").replace(",", "."))
    if m.group("pct") and fraction:
        v /= 100
    return v


def bounded(reply: str, limit: int = MAX_READ_CHARS) -> str:
    """The part of a reply that is read: all of it, or its first and last ``limit / 2`` characters."""
    if len(reply) <= limit:
        return reply
    half = limit // 2
    head, tail = reply[:half], reply[-half:]
    cut = max(head.rfind(" "), head.rfind("\n"))
    head = head[:cut] if cut > 0 else head
    cut = min((i for i in (tail.find(" "), tail.find("\n")) if i >= 0), default=0)
    return head + "\n" + tail[cut:]


def _normalize(reply: str) -> str:
    return _normalized(reply)[0]


def _normalized(reply: str) -> tuple[str, list[int] | None]:
    """The text that is read and, where it is the reply itself, each character's index in it."""
    text = bounded(reply).replace("\u2212", "-")  # one character for one: indices kept
    lead = len(text) - len(text.lstrip())
    text = text.strip()
    index = list(range(lead, lead + len(text))) if len(reply) <= MAX_READ_CHARS else None
    # 1,500 is fifteen hundred; 0,500 is a decimal comma (one half)
    out, kept, at = [], [], 0
    for m in _THOUSANDS.finditer(text):
        out.append(text[at : m.start()])
        kept.extend(range(at, m.start()))
        for i in range(m.start(), m.end()):
            if text[i] != ",":
                out.append(text[i])
                kept.append(i)
        at = m.end()
    out.append(text[at:])
    kept.extend(range(at, len(text)))
    return "".join(out), (None if index is None else [index[i] for i in kept])


def _braced(text: str, m: re.Match) -> bool:
    r"""The number stands alone in braces: ``{0.45}``, ``\boxed{ 0.45 }``."""
    return text[max(0, m.start() - 8) : m.start()].rstrip().endswith("{") and text[
        m.end() : m.end() + 8
    ].lstrip().startswith("}")


def read_answer(
    reply: str | None,
    fraction: bool = False,
    answer_range: tuple[float, float] | None = None,
    truncated: bool = False,
) -> tuple[float, str]:
    """The numeric answer in a reply and, when there is none, why."""
    value, reason, _ = _read(reply, fraction, answer_range, truncated)
    return value, reason


def answer_span(
    reply: str | None,
    fraction: bool = False,
    answer_range: tuple[float, float] | None = None,
    truncated: bool = False,
) -> tuple[int, int] | None:
    """Where in ``reply`` the number :func:`read_answer` reads as the answer stands."""
    value, _, found = _read(reply, fraction, answer_range, truncated)
    if found is None or not math.isfinite(value):
        return None
    (start, end), index = found
    if index is None:
        return None
    return index[start], index[end - 1] + 1


def _read(
    reply: str | None,
    fraction: bool,
    answer_range: tuple[float, float] | None,
    truncated: bool,
) -> tuple[float, str, tuple[tuple[int, int], list[int] | None] | None]:
    """:func:`read_answer`'s value and reason, and the chosen match's span with the index map."""
    if not reply or not reply.strip():
        return math.nan, "empty reply", None
    text, index = _normalized(reply)
    found = list(_TOKEN.finditer(text))
    if not found:
        word = re.fullmatch(r"\W*(\w+)\W*", text.lower())
        if word and word.group(1) in _WORDS and not truncated:
            return (*_check(float(_WORDS[word.group(1)]), answer_range), None)
        return (
            math.nan,
            ("cut off by max_tokens before an answer" if truncated else "no number"),
            None,
        )
    before = {id(m): text[max(0, m.start() - _WINDOW) : m.start()] for m in found}
    matches = [m for m in found if not _NEGATED.search(before[id(m)])]
    if not matches:
        return (
            math.nan,
            (
                "cut off by max_tokens before an answer"
                if truncated
                else "no number but negated ones"
            ),
            None,
        )
    ranges = [r.span() for r in _RANGE.finditer(text)]
    starts = [a for a, _ in ranges]

    def in_range(m: re.Match) -> bool:
        i = bisect.bisect_left(starts, m.end()) - 1  # the last range starting before m ends
        return any(a <= m.start() < b or a < m.end() <= b for a, b in ranges[max(0, i - 1) : i + 1])

    labelled = [m for m in matches if _LABEL.search(before[id(m)]) or _braced(text, m)]
    strong = labelled or [m for m in matches if _STRONG.search(before[id(m)])]
    if strong:
        chosen = strong[-1]
        if alt := _ALTERNATIVE.match(text, chosen.end()):
            return math.nan, f"ambiguous: alternatives ({chosen.group(0)}{alt.group(0)})", None
    elif truncated:
        return math.nan, "cut off by max_tokens before an answer", None
    else:
        values = {round(_value(m, fraction), 9) for m in matches}
        if len(values) == 1:
            chosen = matches[-1]
        else:
            weak = [m for m in matches if _CUE.search(before[id(m)])]
            if weak and not in_range(weak[-1]):
                chosen = weak[-1]
            elif any(in_range(m) for m in matches):
                return math.nan, "ambiguous: a range, not one number", None
            else:
                return (
                    math.nan,
                    f"ambiguous: {len(values)} different numbers without an answer cue",
                    None,
                )
    if in_range(chosen):
        return math.nan, "ambiguous: a range, not one number", None
    return (*_check(_value(chosen, fraction), answer_range), (chosen.span(), index))


def _check(v: float, answer_range: tuple[float, float] | None) -> tuple[float, str]:
    if not math.isfinite(v):
        return math.nan, "no finite number"
    if answer_range is not None and not answer_range[0] <= v <= answer_range[1]:
        lo, hi = answer_range
        return math.nan, f"out of range: {v:g} not in [{lo:g}, {hi:g}]"
    return v, ""


def parse_number(reply: str | None, fraction: bool = False) -> float:
    """The numeric answer in ``reply`` (NaN if there is none); see :func:`read_answer`."""
    return read_answer(reply, fraction)[0]


def invalid_reply_rows(trials) -> list[tuple[str, str, str, str]]:
    """``missing.csv`` rows counting invalid replies by reason, per subject and task."""
    if "invalid_reason" not in trials.columns or not len(trials):
        return []
    reason = trials["invalid_reason"].astype("string").fillna("").str.strip()
    bad = trials.loc[reason != "", ["subject", "task"]].assign(reason=reason[reason != ""])
    if not len(bad):
        return []
    # "out of range: 500 not in [0, 1]" and "... 1.7 not in ..." are one reason
    bad["reason"] = bad["reason"].str.replace(r"^out of range: .*", "out of range", regex=True)
    counts = bad.groupby(["subject", "task", "reason"], sort=True).size()
    return [
        (str(s), str(t), "invalid replies", f"{r}: {n} trial(s)") for (s, t, r), n in counts.items()
    ]
