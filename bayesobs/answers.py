"""Answer formats of the perception tasks, beside the numeric parser (:mod:`bayesobs.parse`).

Every parser returns ``(value, reason)``: the normalised answer and ``None``,
or ``None`` and a short reason why the reply is invalid.  Invalid replies are
kept in the log (``valid`` = false, ``invalid_reason``) and counted; they
score as wrong.  The rules follow the papers' extraction code:

* :func:`braced_word` -- the first ``{...}`` (``{yes}``, ``{red}``,
  ``{C3}``), normalised and checked against the allowed words; without
  braces, a fallback (the whole reply, or the first allowed word);
* :func:`label` -- one label out of a set (``A``/``B``/``C``, ``top-left``),
  from braces, a ``KEY:`` field or the first matching word;
* :func:`ordered_list` / :func:`unordered_set` -- comma-separated items in
  brackets, braces or a ``KEY:`` field, each checked; a set ignores order
  and duplicates;
* :func:`fields` -- ``KEY: value`` lines (``COUNT: 7``, ``QUADRANT: top left``).

The Tunnel Vision rules (:mod:`bayesobs.tunnel.parse`) use the brace rule
here; the Percept-V and HVSBench tasks use the others.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping

Parsed = tuple[object | None, str | None]

_BRACED = re.compile(r"\{([^{}]+)\}")
_FIELD = re.compile(r"^\s*\**\s*([A-Za-z][A-Za-z _-]*?)\s*\**\s*:\s*(.+?)\s*$", re.M)
_BRACKETED = re.compile(r"[\[\{(]([^\[\]{}()]*)[\]\})]")


def empty(reply: str | None) -> bool:
    """No reply, or only white space."""
    return reply is None or not str(reply).strip()


def dispatch(
    parsers: Mapping[str, Callable[[str | None], Parsed]], answer_format: str, reply: str | None
) -> Parsed:
    """Parse ``reply`` with the parser that ``parsers`` names for ``answer_format``."""
    try:
        parser = parsers[answer_format]
    except KeyError:
        raise ValueError(
            f"unknown answer format {answer_format!r}; expected one of {sorted(parsers)}"
        ) from None
    return parser(reply)


def first_braced(reply: str) -> str | None:
    """Content of the first ``{...}`` (no nested braces), stripped; ``None`` if there is none.

    Parameters
    ----------
    reply : str
        The subject's reply.

    Returns
    -------
    str or None
        The text between the first pair of braces that holds no brace,
        stripped of surrounding whitespace; ``None`` when there is no such
        pair.
    """
    m = _BRACED.search(reply)
    return m.group(1).strip() if m else None


def normalise(text: str) -> str:
    """Lowercase, single spaces, no surrounding quotes or full stop.

    Parameters
    ----------
    text : str
        An answer as the subject wrote it.

    Returns
    -------
    str
        ``text`` stripped of surrounding whitespace and of any ``"``, ``'``,
        backtick or ``.`` at either end, lower-cased, with every run of
        whitespace inside made one space.
    """
    return " ".join(text.strip().strip("\"'`.").lower().split())


def braced_word(
    reply: str | None,
    allowed: Iterable[str],
    fallback: str = "reply",
    norm: Callable[[str], str] = normalise,
) -> Parsed:
    """One allowed word from the first ``{...}``.

    Parameters
    ----------
    reply : str or None
        The subject's reply.
    allowed : iterable of str
        The valid answers, already normalised.
    fallback : {"reply", "word", "none"}
        Without braces: compare the whole reply (``"reply"``, Tunnel Vision's
        colours and components), take the first allowed word standing alone
        (``"word"``, the re-identification yes/no), or refuse (``"none"``).
    norm : callable
        How braces and reply are normalised before comparison.

    Returns
    -------
    value : str or None
        The normalised allowed word (``None`` when the reply is invalid).
    reason : str or None
        ``None`` when valid, else why not: an empty reply, braces holding a
        word not allowed, or (without braces) no match under ``fallback``.
    """
    if empty(reply):
        return None, "empty reply"
    allowed = set(allowed)
    braced = first_braced(reply)
    if braced is not None:
        value = norm(braced)
        if value in allowed:
            return value, None
        return None, f"braces hold {braced[:40]!r}, not an allowed answer"
    if fallback == "reply":
        value = norm(reply)
        if value in allowed:
            return value, None
        return None, f"no braces; reply is {value[:40]!r}, not an allowed answer"
    if fallback == "word":
        words = sorted(allowed, key=len, reverse=True)
        pattern = r"\b(" + "|".join(re.escape(w) for w in words) + r")\b"
        m = re.search(pattern, norm(reply))
        if m:
            return m.group(1), None
        return None, "no braces and no allowed word"
    return None, "no {...} answer"


def fields(reply: str | None) -> dict[str, str]:
    """``KEY: value`` lines of a reply, keys upper-cased (the first of a repeated key wins).

    Parameters
    ----------
    reply : str or None
        The subject's reply; a key may be wrapped in Markdown bold
        (``**COUNT**: 7``).

    Returns
    -------
    dict of str to str
        Each key (letters, spaces, ``_`` or ``-``, starting with a letter),
        upper-cased with spaces as ``_``, mapped to the stripped rest of its
        line; empty for an empty reply.
    """
    out: dict[str, str] = {}
    if empty(reply):
        return out
    for m in _FIELD.finditer(reply):
        key = m.group(1).strip().upper().replace(" ", "_")
        out.setdefault(key, m.group(2).strip())
    return out


def field(reply: str | None, key: str, allowed: Iterable[str] | None = None) -> Parsed:
    """The value of field ``KEY:`` (normalised; checked against ``allowed`` when given).

    Parameters
    ----------
    reply : str or None
        The subject's reply.
    key : str
        The field's name, matched case-insensitively against :func:`fields`.
    allowed : iterable of str, optional
        The valid values, already normalised; any value passes when omitted.

    Returns
    -------
    value : str or None
        The field's value passed through :func:`normalise` (``None`` when
        invalid).
    reason : str or None
        ``None`` when valid, else why not: an empty reply, no such field, or
        a value not allowed.
    """
    if empty(reply):
        return None, "empty reply"
    got = fields(reply).get(key.upper())
    if got is None:
        return None, f"no {key.upper()}: field"
    value = normalise(got)
    if allowed is not None and value not in set(allowed):
        return None, f"{key.upper()}: {got[:40]!r} is not an allowed answer"
    return value, None


def number_field(reply: str | None, key: str) -> Parsed:
    """A whole number from field ``KEY:`` (``COUNT: 7``).

    Parameters
    ----------
    reply : str or None
        The subject's reply.
    key : str
        The field's name (case-insensitive).

    Returns
    -------
    value : int or None
        The number, when the whole field value is an optionally signed run
        of digits (``None`` when invalid).
    reason : str or None
        ``None`` when valid, else why not (an empty reply, no such field,
        or a value that is not a whole number).
    """
    value, why = field(reply, key)
    if why:
        return None, why
    m = re.fullmatch(r"[+-]?\d+", value)
    if not m:
        return None, f"{key.upper()}: {value[:40]!r} is not a whole number"
    return int(value), None


def label(reply: str | None, labels: Iterable[str], key: str | None = None) -> Parsed:
    """One label out of ``labels`` (matched case-insensitively, returned as given).

    Looks in order at the first ``{...}``, the ``KEY:`` field (if ``key``),
    then the first label standing alone in the reply.

    Parameters
    ----------
    reply : str or None
        The subject's reply.
    labels : iterable of str
        The possible labels (``"A"``, ``"top-left"``...).
    key : str, optional
        A field name (``"ANSWER"``) to look at after the braces.

    Returns
    -------
    value : str or None
        The label as given in ``labels`` (``None`` when invalid).  Braces or
        a field that hold something other than a label make the reply
        invalid, without looking further; in free text the longest label
        matching first wins among those at the same place.
    reason : str or None
        ``None`` when valid, else why not.
    """
    if empty(reply):
        return None, "empty reply"
    labels = list(labels)
    by_norm = {normalise(x): x for x in labels}
    braced = first_braced(reply)
    if braced is not None:
        hit = by_norm.get(normalise(braced))
        return (hit, None) if hit else (None, f"braces hold {braced[:40]!r}, not a label")
    if key is not None:
        got = fields(reply).get(key.upper())
        if got is not None:
            hit = by_norm.get(normalise(got))
            return (hit, None) if hit else (None, f"{key.upper()}: {got[:40]!r} is not a label")
    words = sorted(by_norm, key=len, reverse=True)
    m = re.search(
        r"(?<![\w-])(" + "|".join(re.escape(w) for w in words) + r")(?![\w-])", normalise(reply)
    )
    if m:
        return by_norm[m.group(1)], None
    return None, "no label"


def _items(reply: str, key: str | None) -> str | None:
    if key is not None:
        got = fields(reply).get(key.upper())
        if got is not None:
            return got.strip().strip("[]{}()")
    m = _BRACKETED.search(reply)
    return m.group(1) if m else None


def ordered_list(
    reply: str | None,
    allowed: Iterable[str] | None = None,
    key: str | None = None,
    length: int | None = None,
) -> Parsed:
    """A comma-separated list in order, from ``KEY:`` or the first ``[...]``/``{...}``/``(...)``.

    Items are normalised; each must be in ``allowed`` (when given) and there
    must be ``length`` of them (when given).  Returns a tuple.

    Parameters
    ----------
    reply : str or None
        The subject's reply.
    allowed : iterable of str, optional
        The valid items, already normalised; any item passes when omitted.
    key : str, optional
        A field name whose value holds the list; looked at before brackets.
    length : int, optional
        The number of items required.

    Returns
    -------
    value : tuple of str or None
        The items in the reply's order, split at commas or semicolons and
        normalised (``None`` when invalid).
    reason : str or None
        ``None`` when valid, else why not: no list, an empty list, an item
        not allowed, or the wrong number of items.
    """
    if empty(reply):
        return None, "empty reply"
    inner = _items(reply, key)
    if inner is None:
        return None, "no bracketed list" + (f" and no {key.upper()}: field" if key else "")
    items = tuple(normalise(x) for x in re.split(r"[,;]", inner) if x.strip())
    if not items:
        return None, "an empty list"
    if allowed is not None:
        ok = set(allowed)
        bad = [x for x in items if x not in ok]
        if bad:
            return None, f"{bad[0][:40]!r} is not an allowed item"
    if length is not None and len(items) != length:
        return None, f"{len(items)} items, {length} asked"
    return items, None


def unordered_set(
    reply: str | None, allowed: Iterable[str] | None = None, key: str | None = None
) -> Parsed:
    """Like :func:`ordered_list`, as a sorted tuple of distinct items (order and repeats ignored).

    Parameters
    ----------
    reply : str or None
        The subject's reply.
    allowed : iterable of str, optional
        The valid items, already normalised.
    key : str, optional
        A field name whose value holds the items.

    Returns
    -------
    value : tuple of str or None
        The distinct items, sorted (``None`` when invalid).
    reason : str or None
        ``None`` when valid, else why not (as :func:`ordered_list`).
    """
    items, why = ordered_list(reply, allowed, key)
    if why:
        return None, why
    return tuple(sorted(set(items))), None


__all__ = [
    "Parsed",
    "braced_word",
    "field",
    "fields",
    "first_braced",
    "label",
    "normalise",
    "number_field",
    "ordered_list",
    "unordered_set",
]
