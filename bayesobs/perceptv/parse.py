"""Answer extraction for Percept-V: one parser per output format of Appendix A.1."""

from __future__ import annotations

import re
from collections.abc import Callable

from ..answers import dispatch, empty

Parsed = tuple[str | None, str | None]

_NUM = r"(\d+)"


def last_line(reply: str) -> str:
    """The last non-empty line, without markdown emphasis, quotes and a final full stop."""
    lines = [ln for ln in str(reply).splitlines() if ln.strip()]
    line = lines[-1] if lines else ""
    line = line.replace("*", "").replace("`", "").strip().strip("\"'").strip()
    return line[:-1].strip() if line.endswith(".") else line


def _keyed(*keys: str) -> Callable[[str | None], Parsed]:
    """Parser for ``KEY1:n KEY2:m ...`` (integers); value ``"n m ..."``; the last match wins."""
    pat = re.compile(r"\s*[,;]?\s*".join(rf"{k}\s*:\s*{_NUM}" for k in keys), re.I)
    form = " ".join(f"{k}:x" for k in keys)

    def parser(reply: str | None) -> Parsed:
        if empty(reply):
            return None, "empty reply"
        found = pat.findall(str(reply).replace("*", ""))
        if not found:
            return None, f"no {form}"
        last = found[-1]
        groups = (last,) if isinstance(last, str) else last
        return " ".join(str(int(g)) for g in groups), None

    parser.__doc__ = f"``{form}`` -> the integers, space-separated."
    return parser


parse_count = _keyed("COUNT")
parse_answer_number = _keyed("ANSWER")
parse_quadrant = _keyed("QUADRANT", "COUNT")
parse_above_below = _keyed("ABOVE", "BELOW")
parse_shape_counts = _keyed("CIRCLES", "TRIANGLES", "SQUARES")
parse_nodes_edges = _keyed("NODES", "EDGES")

_ANSWER_WORD = re.compile(r"ANSWER\s*:\s*(yes|no)\b", re.I)


def parse_answer_yes_no(reply: str | None) -> Parsed:
    """``ANSWER: Yes`` / ``ANSWER: No`` -> ``"yes"`` / ``"no"`` (last occurrence)."""
    if empty(reply):
        return None, "empty reply"
    found = _ANSWER_WORD.findall(str(reply).replace("*", ""))
    if not found:
        return None, "no ANSWER: Yes/No"
    return found[-1].lower(), None


def parse_yes_no_line(reply: str | None) -> Parsed:
    """The last line is exactly ``YES`` or ``NO`` (any case) -> ``"yes"`` / ``"no"``."""
    if empty(reply):
        return None, "empty reply"
    line = last_line(reply).lower()
    if line in ("yes", "no"):
        return line, None
    return None, f"last line {line[:40]!r} is not YES or NO"


def _words(after_key: str | None, vocab: tuple[str, ...], what: str):
    pat = re.compile(rf"{after_key}\s*:\s*(.*)$", re.I | re.M) if after_key else None

    def parser(reply: str | None) -> Parsed:
        if empty(reply):
            return None, "empty reply"
        text = str(reply).replace("*", "")
        if pat is not None:
            found = pat.findall(text)
            if not found:
                return None, f"no {after_key}:"
            body = found[-1]
        else:
            body = last_line(text)
        body = body.strip().rstrip(".")
        tokens = [t for t in re.split(r"[\s,]+", body.lower()) if t]
        if not tokens:
            return None, f"no {what}"
        bad = [t for t in tokens if t not in vocab]
        if bad:
            return None, f"{bad[0][:20]!r} is not a {what}"
        return " ".join(tokens), None

    parser.__doc__ = f"``{after_key or ''}`` then {what}s (from {vocab}), lowercased, in order."
    return parser


parse_colour_words = _words("ANSWER", ("blue", "green"), "colour")
parse_shape_words = _words(
    "ANSWER", ("circle", "triangle", "diamond", "pentagon", "hexagon"), "shape name"
)


def parse_labels(reply: str | None) -> Parsed:
    """The last line holds only integer labels (space- or comma-separated) -> ``"3 1 2"``."""
    if empty(reply):
        return None, "empty reply"
    line = last_line(reply)
    tokens = [t for t in re.split(r"[\s,]+", line) if t]
    if not tokens or not all(t.isdigit() for t in tokens):
        return None, f"last line {line[:40]!r} is not a list of labels"
    return " ".join(str(int(t)) for t in tokens), None


_COORD = re.compile(r"\(\s*(\d+)\s*,\s*(\d+)\s*\)")


def parse_coords(reply: str | None) -> Parsed:
    """The last line holds only ``(row,column)`` pairs -> the set, sorted: ``"(0,1) (2,3)"``."""
    if empty(reply):
        return None, "empty reply"
    line = last_line(reply)
    cells = {(int(a), int(b)) for a, b in _COORD.findall(line)}
    rest = _COORD.sub("", line).replace(",", " ").strip()
    if not cells or rest:
        return None, f"last line {line[:40]!r} is not a list of (row,column)"
    return " ".join(f"({a},{b})" for a, b in sorted(cells)), None


PALETTE_NAMES = (
    "black",
    "gray",
    "brown",
    "maroon",
    "red",
    "coral",
    "tan",
    "orange",
    "ivory",
    "goldenrod",
    "yellow",
    "green",
    "olive",
    "turquoise",
    "skyblue",
    "blue",
    "lavender",
    "purple",
    "pink",
    "fuchsia",
)
SHAPE_NAMES = ("circle", "triangle", "square", "pentagon")
parse_shape_list = _words(
    "SHAPES", ("circle", "triangle", "square", "diamond", "hexagon", "octagon"), "shape name"
)
parse_colour_list = _words("COLOURS", PALETTE_NAMES, "palette colour")
_yes_no_words = _words("ANSWER", ("yes", "no"), "yes/no")


def parse_yes_no_list(reply: str | None) -> Parsed:
    """``ANSWER: yes , no, ...`` with exactly 20 entries -> ``"yes no ..."``."""
    value, why = _yes_no_words(reply)
    if why is None and len(value.split()) != 20:
        return None, f"{len(value.split())} entries, not 20"
    return value, why


def _unbracket(line: str) -> list[str]:
    line = re.sub(r"[\[\]{}()\"']", " ", line)
    return [t for t in re.split(r"[\s,]+", line.lower()) if t]


def parse_shape_set(reply: str | None) -> Parsed:
    """The last line is a list or set of shape names -> the set, sorted: ``"circle square"``."""
    if empty(reply):
        return None, "empty reply"
    tokens = _unbracket(last_line(reply))
    if not tokens or any(t not in SHAPE_NAMES for t in tokens):
        return None, "last line is not a set of shape names"
    return " ".join(sorted(set(tokens))), None


def parse_colour_set(reply: str | None) -> Parsed:
    """The last line is a list or set of palette colours -> the set, sorted: ``"blue red"``."""
    if empty(reply):
        return None, "empty reply"
    tokens = _unbracket(last_line(reply))
    if not tokens or any(t not in PALETTE_NAMES for t in tokens):
        return None, "last line is not a list of palette colours"
    return " ".join(sorted(set(tokens))), None


def parse_cell_path(reply: str | None) -> Parsed:
    """The last line lists cells from S to E (``S, 3, 4, E`` or numbers) -> ``"s 3 4 e"``."""
    if empty(reply):
        return None, "empty reply"
    tokens = [t for t in re.split(r"[\s,]+", last_line(reply).lower()) if t]
    if len(tokens) < 2 or not all(t.isdigit() or t in ("s", "e") for t in tokens):
        return None, "last line is not a comma-separated list of cells"
    return " ".join(t if t in ("s", "e") else str(int(t)) for t in tokens), None


_CIRCLES = re.compile(r"CIRCLES\s*:\s*(.*)$", re.I | re.M)


def parse_circle_labels(reply: str | None) -> Parsed:
    """``CIRCLES: [3, 12, 5]`` -> the numbers as a set sorted as strings: ``"12 3 5"``."""
    if empty(reply):
        return None, "empty reply"
    found = _CIRCLES.findall(str(reply).replace("*", ""))
    if not found:
        return None, "no CIRCLES:"
    tokens = _unbracket(found[-1].strip().rstrip("."))
    if not tokens or not all(t.isdigit() for t in tokens):
        return None, f"CIRCLES: {found[-1][:30]!r} is not a list of numbers"
    return " ".join(sorted({str(int(t)) for t in tokens})), None


def parse_cell_or_none(reply: str | None) -> Parsed:
    """The last line is one ``(x,y)`` or ``None`` -> ``"(x,y)"`` / ``"none"``."""
    if empty(reply):
        return None, "empty reply"
    line = last_line(reply)
    if line.lower() == "none":
        return "none", None
    m = _COORD.fullmatch(line.strip())
    if m:
        return f"({int(m.group(1))},{int(m.group(2))})", None
    return None, f"last line {line[:40]!r} is not (x,y) or None"


PARSERS: dict[str, Callable[[str | None], Parsed]] = {
    "count": parse_count,
    "answer_number": parse_answer_number,
    "answer_yes_no": parse_answer_yes_no,
    "yes_no_line": parse_yes_no_line,
    "quadrant": parse_quadrant,
    "above_below": parse_above_below,
    "shape_counts": parse_shape_counts,
    "colour_words": parse_colour_words,
    "labels": parse_labels,
    "coords": parse_coords,
    "shape_words": parse_shape_words,
    "cell_or_none": parse_cell_or_none,
    "colour_list": parse_colour_list,
    "yes_no_list": parse_yes_no_list,
    "shape_set": parse_shape_set,
    "colour_set": parse_colour_set,
    "nodes_edges": parse_nodes_edges,
    "cell_path": parse_cell_path,
    "shape_list": parse_shape_list,
    "circle_labels": parse_circle_labels,
}


def _fmt_keyed(*keys):
    return lambda v: " ".join(f"{k}:{x}" for k, x in zip(keys, v.split(), strict=True))


FORMATTERS: dict[str, Callable[[str], str]] = {
    "count": _fmt_keyed("COUNT"),
    "answer_number": _fmt_keyed("ANSWER"),
    "answer_yes_no": lambda v: f"ANSWER: {v.capitalize()}",
    "yes_no_line": str.upper,
    "quadrant": _fmt_keyed("QUADRANT", "COUNT"),
    "above_below": _fmt_keyed("ABOVE", "BELOW"),
    "shape_counts": _fmt_keyed("CIRCLES", "TRIANGLES", "SQUARES"),
    "colour_words": lambda v: "ANSWER: " + " ".join(w.capitalize() for w in v.split()),
    "labels": str,
    "coords": str,
    "shape_words": lambda v: "ANSWER: " + " ".join(w.capitalize() for w in v.split()),
    "cell_or_none": lambda v: "None" if v == "none" else v,
    "colour_list": lambda v: "COLOURS: " + " , ".join(v.split()),
    "yes_no_list": lambda v: "ANSWER: " + " , ".join(v.split()),
    "shape_set": lambda v: "{" + ", ".join(v.split()) + "}",
    "colour_set": lambda v: "[" + ", ".join(v.split()) + "]",
    "nodes_edges": _fmt_keyed("NODES", "EDGES"),
    "cell_path": lambda v: ", ".join(w.upper() if w in ("s", "e") else w for w in v.split()),
    "shape_list": lambda v: "SHAPES : " + " , ".join(w.capitalize() for w in v.split()),
    "circle_labels": lambda v: "CIRCLES: " + ", ".join(v.split()),
}


def parse(answer_format: str, reply: str | None) -> Parsed:
    """Parse ``reply`` with the parser named by a trial's ``answer_format``."""
    return dispatch(PARSERS, answer_format, reply)


def format_reply(answer_format: str, value: str) -> str:
    """A well-formed reply carrying ``value`` in the output format the prompt asks for."""
    return FORMATTERS[answer_format](value)


def malformed_reply(value: str) -> str:
    """A reply that states ``value`` but ignores the output format (no key, prose around it)."""
    return f"The answer is {value} ."
