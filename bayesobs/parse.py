"""Reading a number out of a subject's reply.

Rules, in order: a reply with one number is that number; otherwise the last
number introduced by an answer cue ("answer", "estimate", "is", "=", ":" ...);
otherwise the last number.  Fractions ``a/b`` are divided; ``mm:ss`` durations
are converted to seconds; a percentage is divided by 100 where the task's
answer is a fraction.  No number gives NaN (the raw reply is always kept).
"""

from __future__ import annotations

import math
import re

_NUM = r"[-+]?(?:\d+(?:[.,]\d+)?|\.\d+)(?:[eE][-+]?\d+)?"
_TOKEN = re.compile(
    rf"(?P<mmss>\b\d{{1,2}}:\d{{2}}\b)|(?P<frac>{_NUM}\s*/\s*{_NUM})|(?P<num>{_NUM})(?P<pct>\s*%|\s*percent\b)?"
)
_CUE = re.compile(r"(answer|estimate[ds]?|approximately|about|roughly|around|is|=|:|≈|~)\s*$", re.I)
_WORDS = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
          "eight": 8, "nine": 9, "ten": 10, "half": 0.5}  # fmt: skip


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


def parse_number(reply: str | None, fraction: bool = False) -> float:
    """The numeric answer in ``reply`` (NaN if there is none)."""
    if not reply:
        return math.nan
    text = reply.replace("\u2212", "-").strip()
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)  # thousands separators
    matches = list(_TOKEN.finditer(text))
    if not matches:
        word = re.fullmatch(r"\W*(\w+)\W*", text.lower())
        return float(_WORDS[word.group(1)]) if word and word.group(1) in _WORDS else math.nan
    if len(matches) == 1:
        return _value(matches[0], fraction)
    cued = [m for m in matches if _CUE.search(text[: m.start()])]
    return _value((cued or matches)[-1], fraction)
