"""Answer extraction for the Tunnel Vision tasks (the rules of the authors' ``utils/utils.py``).

Every parser returns ``(value, reason)``: the normalised answer and
``None``, or ``None`` and a short reason why the reply is invalid (an
invalid reply counts as wrong).

* :func:`parse_reid` -- the first ``{...}`` if it holds ``yes`` or ``no``;
  without braces, the first standalone word ``yes`` or ``no``.  (The
  authors' code prefers ``yes`` anywhere in the reply over an earlier
  ``no``; we take the first one.)
* :func:`parse_colour` -- the first ``{...}``, stripped and lowercased, must
  be exactly one of the 11 hunt colours; without braces the whole reply,
  stripped and lowercased, is compared the same way (the authors compare
  ``extract_braced(reply).lower()`` with the colour exactly).
* :func:`parse_cell` -- the decomposed hunt's intermediate steps:
  ``{colour shape}`` naming one of the 33 pairs.
* :func:`parse_component` -- the first ``{...}``, stripped and upper-cased,
  must look like ``C<number>`` (``{c3}`` -> ``C3``); without braces the whole
  reply likewise.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ..answers import dispatch, empty, first_braced
from .hunt import COLOURS, SHAPES

_YESNO = re.compile(r"\b(yes|no)\b", re.I)
_COMPONENT = re.compile(r"^C(\d+)$")

Parsed = tuple[str | None, str | None]


def parse_reid(reply: str | None) -> Parsed:
    """``"yes"`` / ``"no"`` from a re-identification reply.

    The first ``{...}`` must hold ``yes`` or ``no`` (any case); without braces,
    the first standalone word ``yes`` or ``no`` in the reply is taken.

    Parameters
    ----------
    reply : str or None
        The subject's reply.

    Returns
    -------
    value : str or None
        ``"yes"`` or ``"no"``; ``None`` when the reply is invalid.
    reason : str or None
        ``None``, or why the reply is invalid (empty; braces hold something
        else; no yes/no word).
    """
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
    """A hunt colour name (lowercase) from the first ``{...}`` (else the whole reply).

    Parameters
    ----------
    reply : str or None
        The subject's reply.

    Returns
    -------
    value : str or None
        One of the 11 colours of :data:`bayesobs.tunnel.hunt.COLOURS`,
        lowercase; ``None`` when the reply is invalid.
    reason : str or None
        ``None``, or why the reply is invalid (empty, or not exactly a colour).
    """
    if empty(reply):
        return None, "empty reply"
    braced = first_braced(reply)
    value = (braced if braced is not None else reply.strip()).lower()
    if value in COLOURS:
        return value, None
    where = "braces hold" if braced is not None else "no braces; reply is"
    return None, f"{where} {value[:40]!r}, not one of the 11 colours"


def parse_cell(reply: str | None) -> Parsed:
    """A hunt cell ``"colour shape"`` from the first ``{...}`` (else the whole reply).

    The text is lowercased and its whitespace collapsed; it must be two words,
    a hunt colour then a hunt shape.

    Parameters
    ----------
    reply : str or None
        The subject's reply.

    Returns
    -------
    value : str or None
        ``"<colour> <shape>"``; ``None`` when the reply is invalid.
    reason : str or None
        ``None``, or why the reply is invalid.
    """
    if empty(reply):
        return None, "empty reply"
    braced = first_braced(reply)
    value = " ".join((braced if braced is not None else reply.strip()).lower().split())
    parts = value.split(" ")
    if len(parts) == 2 and parts[0] in COLOURS and parts[1] in SHAPES:
        return value, None
    return None, f"{value[:40]!r} is not '<colour> <shape>'"


def parse_component(reply: str | None) -> Parsed:
    """A component label ``C<n>`` from the first ``{...}`` (else the whole reply).

    The text is upper-cased and its spaces removed; ``{c 03}`` reads as ``C3``.

    Parameters
    ----------
    reply : str or None
        The subject's reply.

    Returns
    -------
    value : str or None
        ``"C<n>"`` with ``n`` without leading zeros; ``None`` when the reply is
        invalid.
    reason : str or None
        ``None``, or why the reply is invalid.
    """
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
    """Parse ``reply`` with the parser named by a trial's ``answer_format``.

    Parameters
    ----------
    answer_format : str
        A key of :data:`PARSERS`: ``"reid"``, ``"hunt_colour"``, ``"hunt_cell"``
        or ``"circuit"``.
    reply : str or None
        The subject's reply.

    Returns
    -------
    value : str or None
        The normalised answer, ``None`` when the reply is invalid.
    reason : str or None
        ``None``, or why the reply is invalid.

    Raises
    ------
    ValueError
        If ``answer_format`` names no parser.
    """
    return dispatch(PARSERS, answer_format, reply)
