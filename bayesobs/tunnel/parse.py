"""Answer extraction for the Tunnel Vision tasks (the rules of the authors' ``utils/utils.py``)."""

from __future__ import annotations

import re
from collections.abc import Callable

from ..answers import dispatch, empty, first_braced
from .hunt import COLOURS, SHAPES

_YESNO = re.compile(r"\b(yes|no)\b", re.I)
_COMPONENT = re.compile(r"^C(\d+)$")

Parsed = tuple[str | None, str | None]


def parse_reid(reply: str | None) -> Parsed:
    """``"yes"`` / ``"no"`` from a re-identification reply."""
    if empty(reply):
        return None, "empty reply"
    braced = first_braced(reply)
    if braced is not None:
        word = braced.lower()
        if word in ("yes", "no"):
            return word, None
        return None, f"braces hold {braced!r}, not yes or no"
    m = _YESNO.search(reply)
    if m:
        return m.group(1).lower(), None
    return None, "no {yes}/{no} and no yes/no word"


def parse_colour(reply: str | None) -> Parsed:
    """A hunt colour name (lowercase) from the first ``{...}`` (else the whole reply)."""
    if empty(reply):
        return None, "empty reply"
    braced = first_braced(reply)
    value = (braced if braced is not None else reply.strip()).lower()
    if value in COLOURS:
        return value, None
    where = "braces hold" if braced is not None else "no braces; reply is"
    return None, f"{where} {value[:40]!r}, not one of the 11 colours"


def parse_cell(reply: str | None) -> Parsed:
    """A hunt cell ``"colour shape"`` from the first ``{...}`` (else the whole reply)."""
    if empty(reply):
        return None, "empty reply"
    braced = first_braced(reply)
    value = " ".join((braced if braced is not None else reply.strip()).lower().split())
    parts = value.split(" ")
    if len(parts) == 2 and parts[0] in COLOURS and parts[1] in SHAPES:
        return value, None
    return None, f"{value[:40]!r} is not '<colour> <shape>'"


def parse_component(reply: str | None) -> Parsed:
    """A component label ``C<n>`` from the first ``{...}`` (else the whole reply)."""
    if empty(reply):
        return None, "empty reply"
    braced = first_braced(reply)
    value = (braced if braced is not None else reply.strip()).upper().replace(" ", "")
    m = _COMPONENT.match(value)
    if m:
        return f"C{int(m.group(1))}", None
    where = "braces hold" if braced is not None else "no braces; reply is"
    return None, f"{where} {value[:40]!r}, not a component label"


PARSERS: dict[str, Callable[[str | None], Parsed]] = {
    "reid": parse_reid,
    "hunt_colour": parse_colour,
    "hunt_cell": parse_cell,
    "circuit": parse_component,
}


def parse(answer_format: str, reply: str | None) -> Parsed:
    """Parse ``reply`` with the parser named by a trial's ``answer_format``."""
    return dispatch(PARSERS, answer_format, reply)
