"""Worded answers in a jsPsych export's data, read by their task's own parser as ``serve`` reads them."""

from __future__ import annotations

import json

import pandas as pd

from .errors import BayesobsInputError
from .paradigms import find_task

STIMULUS = "bayesobs_stimulus"  # the data column of the stimulus asked (a worded task's trial)


def _loaded(v):
    """A JSON object as it came: a dict (JSON data) or its text (CSV data)."""
    return json.loads(v) if isinstance(v, str) else v


def read_worded(rows: pd.DataFrame, answers: pd.Series) -> pd.DataFrame:
    """``rows`` with each worded trial's ``answers`` (the form's fields) read into the task's columns.

    Parameters
    ----------
    rows : DataFrame
        A jsPsych export's trial rows; those with a :data:`STIMULUS` are read.
    answers : Series
        Each row's form fields (``{"response": text}`` or a tap's ``x``, ``y``,
        ``display_w``, ``display_h``), as a dict or its JSON text.

    Returns
    -------
    DataFrame
        The rows, the worded ones with the columns ``Task.person_row`` gives
        (``response``, ``valid``, ``correct``, ...), an attention check's
        ``response`` 1 or 0 (a word typed, a tap within ``catch_radius_px``),
        :data:`STIMULUS` dropped.
    """
    out = rows.copy()
    said = out["catch_word"].notna() if "catch_word" in out.columns else []
    if any(said):  # a word typed as asked: response 1 or 0, as serve logs it
        right = out.loc[said, "correct"].map(lambda v: str(v).lower() in ("true", "1", "1.0"))
        out.loc[said, "response"] = right.astype(float)
    if STIMULUS not in out.columns:
        return out
    tasks: dict = {}
    graded = {}
    for i, stim in out[STIMULUS].items():
        if not isinstance(stim, (dict, str)):
            continue
        stim = _loaded(stim)
        name = stim.get("task")
        if name not in tasks:
            cls = find_task(str(name))
            if cls is None:
                raise BayesobsInputError(f"task {name} of the jsPsych data is not installed")
            tasks[name] = cls()
        radius = out.at[i, "catch_radius_px"] if "catch_radius_px" in out.columns else None
        try:
            graded[i] = row = tasks[name].person_row(stim, _loaded(answers[i]) or {})
            if pd.notna(radius):  # a tapped attention check: right within its radius
                right = bool(row["error_px"] <= float(radius))
                graded[i] = {**row, "response": float(right), "valid": True, "correct": right}
        except (KeyError, TypeError, ValueError) as exc:  # a tap without its point, a bad stimulus
            raise BayesobsInputError(
                f"row {i + 1} of the jsPsych data: its answer or stimulus cannot be read "
                f"({type(exc).__name__}: {exc})"
            ) from None
    table = pd.DataFrame.from_dict(graded, orient="index")
    for col in table.columns:
        out[col] = out[col].astype(object) if col in out.columns else None
        out.loc[table.index, col] = table[col].astype(object)
    return out.drop(columns=[STIMULUS])
