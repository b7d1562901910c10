"""HVSBench-style answer standardiser (the paper's supplementary section C)."""

from __future__ import annotations

import json
import math
import re
from typing import Any

KINDS = ("choice", "count", "ranking", "scanpath")
GT_MEAN_COUNT = 3.2116  # the paper's fallback for a count reply without a number
DEFAULT_SCANPATH: dict[str, list[float]] = {"X": [0.5], "Y": [0.5], "T": [0]}

_CHOICE_CUE = re.compile(
    r"(?i:answer is|result is|it is|output is|prediction is|object is|image is)"
    r"[\s:\"'*]*[\[(]?\s*([A-Z])(?![A-Za-z])"
)
_STANDALONE = re.compile(r"(?<![A-Za-z])[\[(]?([A-Z])[\])]?(?![A-Za-z])")
_RANK_CUE = re.compile(
    r"(?i:answer is|should be|order is|orders are|ranking is)"
    r"[\s:\"'*]*([A-Z](?:[\s,>\[\]()]*[A-Z])*)(?![A-Za-z])"
)
_NUMBER_WORDS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen "
        "fourteen fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
}
_NUMBER_WORDS.update(
    {w: 10 * k for k, w in enumerate("thirty forty fifty sixty seventy eighty ninety".split(), 3)}
)
_QUOTES = str.maketrans({"“": '"', "”": '"', "‘": "'", "’": "'"})

# Scanpath labels: the letter (or its long form) must be followed by = or :.
_SEP = r"[\s\"'*]*(?:\([^)\n]*\))?[\s\"'*]*[:=][\s\"'*]*"
_LABELS = {
    "X": re.compile(r"(?<![A-Za-z])[xX](?:[- ]?(?i:coordinates?))?" + _SEP),
    "Y": re.compile(r"(?<![A-Za-z])[yY](?:[- ]?(?i:coordinates?))?" + _SEP),
    "T": re.compile(r"(?<![A-Za-z])(?:[tT]|(?i:(?:fixation[ _])?durations?))(?![A-Za-z])" + _SEP),
}
_BRACKETED = re.compile(r"\[([^\]]*)\]")
_BARE = re.compile(r"[-+]?(?:\d|\.\d)[\d.,\s…]*")


def standardise(kind: str, reply: str | None) -> Any:
    """Standardise a free-text reply as HVSBench does."""
    if kind not in KINDS:
        raise ValueError(f"unknown answer kind {kind!r}: allowed kinds are {', '.join(KINDS)}")
    text = "" if reply is None else str(reply).translate(_QUOTES)
    return {
        "choice": standardise_choice,
        "count": standardise_count,
        "ranking": standardise_ranking,
        "scanpath": standardise_scanpath,
    }[kind](text)


def standardise_choice(text: str) -> str:
    """Main choice letter of a reply (pseudo-code 8), or ``""``."""
    m = _CHOICE_CUE.search(text)
    if m:
        return m.group(1)
    m = _STANDALONE.search(text)
    return m.group(1) if m else ""


def standardise_count(text: str) -> int | float:
    """Count of a reply (pseudo-code 7); :data:`GT_MEAN_COUNT` when none."""
    try:
        return int(text)
    except ValueError:
        pass
    for word in text.split():
        digits = "".join(c for c in word if c.isdigit())
        if digits:
            return int(digits)
        key = word.strip(".,;:!?\"'()[]*").lower()
        if key in _NUMBER_WORDS:
            return _NUMBER_WORDS[key]
    return GT_MEAN_COUNT


def standardise_ranking(text: str) -> str:
    """Ranking letters of a reply (pseudo-code 9), or ``""``."""
    m = _RANK_CUE.search(text)
    if m:
        return "".join(re.findall(r"[A-Z]", m.group(1)))
    return "".join(re.findall(r"[A-Z]", text))


def _parse_values(raw: str) -> list[float | int]:
    """Numbers of a matched list: ellipses dropped, comma (or space) separated."""
    cleaned = raw.replace("…", " ").replace("...", " ")
    out: list[float | int] = []
    for tok in re.split(r"[,\s]+", cleaned):
        tok = tok.strip().rstrip(".")
        if not tok:
            continue
        try:
            val = float(tok) if ("." in tok or "e" in tok.lower()) else int(tok)
        except ValueError:
            continue
        if math.isfinite(val):
            out.append(val)
    return out


def _json_block(text: str) -> dict[str, list] | None:
    start = text.index("```json") + len("```json")
    end = text.find("```", start)
    body = text[start:] if end < 0 else text[start:end]
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    out = {}
    for key in ("X", "Y", "T"):
        vals = data.get(key, data.get(key.lower()))
        if not isinstance(vals, list):
            return None
        try:
            out[key] = [v if isinstance(v, int) else float(v) for v in vals]
        except (TypeError, ValueError):
            return None
        if any(isinstance(v, bool) or not math.isfinite(v) for v in out[key]):
            return None
    return out


def standardise_scanpath(text: str) -> dict[str, list]:
    """Scanpath lists of a reply (pseudo-code 6); the default when unreadable."""
    default = {k: list(v) for k, v in DEFAULT_SCANPATH.items()}
    if "```json" in text:
        parsed = _json_block(text)
        if parsed is None:
            return default
    else:
        parsed = {}
        for key, label in _LABELS.items():
            for m in label.finditer(text):
                rest = text[m.end() :]
                if rest.startswith("["):
                    b = _BRACKETED.match(rest)
                    if b is None:  # an unclosed bracket: read to the end of the line
                        parsed[key] = _parse_values(rest[1:].split("\n")[0])
                    else:
                        parsed[key] = _parse_values(b.group(1))
                    break
                b = _BARE.match(rest)
                if b is not None:
                    parsed[key] = _parse_values(b.group(0))
                    break
        if not parsed:
            return default
    lists = [parsed.get(k, []) for k in ("X", "Y", "T")]
    if len({len(v) for v in lists}) != 1:
        return default
    return dict(zip(("X", "Y", "T"), lists, strict=True))
