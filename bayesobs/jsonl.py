"""The one JSONL reader (the runner's logs, experiment folders, trial files) and strict JSON.

A log written append-only may end in a line torn by a killed writer; the
runner and the analyses skip such lines (and say how many), while a trial
file given by a user must be whole (an error names the line).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from .errors import BayesobsInputError


def read_records(path: str | Path, strict: bool = False) -> tuple[list[dict], list[int], int]:
    """Read the JSON objects of a JSONL file.

    Parameters
    ----------
    path : path
        The file; a missing file reads as empty.
    strict : bool
        If true, a line that is not a JSON object is an error naming the
        file and line; otherwise it is skipped and counted.

    Returns
    -------
    records : list of dict
        One per readable line, in file order.
    lines : list of int
        The 1-based line number of each record.
    torn : int
        Lines skipped (only when ``strict`` is false).

    Raises
    ------
    BayesobsInputError
        With ``strict``, on the first unreadable line.
    """
    path = Path(path)
    if not path.exists():
        return [], [], 0
    records: list[dict] = []
    lines: list[int] = []
    torn = 0
    raw_lines = path.read_bytes().split(b"\n")
    for i, raw in enumerate(raw_lines, start=1):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
            if not strict:
                torn += 1
                continue
            last = i == len(raw_lines)  # no newline after it: a write cut short
            hint = " (the last line is incomplete: was the writer killed?)" if last else ""
            msg = {json.JSONDecodeError: getattr(exc, "msg", ""), RecursionError: "nested too deep"}
            msg = msg.get(type(exc), "not UTF-8")
            raise BayesobsInputError(f"{path}: line {i}: not valid JSON ({msg}){hint}") from None
        if not isinstance(rec, dict):
            if not strict:
                torn += 1
                continue
            raise BayesobsInputError(f"{path}: line {i}: expected a JSON object per line")
        records.append(rec)
        lines.append(i)
    return records, lines, torn


def trial_file(path: Path) -> Path:
    """The file ``bayesobs.trials.read_trials`` reads for ``path``: itself, or a folder's ``trials.jsonl``.

    Here, beside the reader of that file, so that sizing an input loads no
    pandas (``bayesobs fit`` and ``score`` start their helper process first).

    Parameters
    ----------
    path : Path
        A trial file or an experiment folder.

    Returns
    -------
    Path
        ``path``, or ``path / "trials.jsonl"`` when ``path`` is a folder.
    """
    return path / "trials.jsonl" if path.is_dir() else path


def finite(v: Any) -> Any:
    """``v`` with every NaN or infinite float (at any depth) as ``None``: strict JSON for other languages.

    Parameters
    ----------
    v : Any
        A value to be written as JSON: a float, or a dict, list or tuple
        nesting floats at any depth; other values pass through untouched.

    Returns
    -------
    Any
        A copy of ``v`` in which every NaN or infinite float is ``None``;
        dicts keep their keys, and tuples come back as lists.
    """
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [finite(x) for x in v]
    return v
