"""Result files as the study platforms export them: JATOS's ``.jrzip`` and data-only ``.txt``."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pandas as pd

from .errors import BayesobsInputError


def looks_like_json_lines(path: Path) -> bool:
    """Whether a ``.txt`` file starts with JSON (JATOS's data-only export), not a CSV header."""
    with open(path, "rb") as f:
        head = f.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    return head[:1] in (b"[", b"{")


def result_records(text: str, where: str) -> list[dict]:
    """The records of one JATOS result text: a whole JSON array, or one JSON value a line."""
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    except RecursionError:
        raise BayesobsInputError(f"{where}: cannot read: nested too deep") from None
    values = [(1, whole)] if whole is not None else []
    if whole is None:
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                values.append((n, json.loads(line)))
            except json.JSONDecodeError as exc:
                raise BayesobsInputError(
                    f"{where}, line {n}: not JSON ({exc.msg}): each line of a JATOS result "
                    "holds a JSON array of trials or one trial's JSON object"
                ) from None
    out: list[dict] = []
    for n, v in values:
        rows = v if isinstance(v, list) else [v]
        if not all(isinstance(r, dict) for r in rows):
            raise BayesobsInputError(f"{where}, line {n}: expected JSON objects (one per trial)")
        out.extend(rows)
    return out


def jatos_records(path: Path) -> list[dict]:
    """Every record of a JATOS export: the data-only ``.txt`` or the ``.jrzip`` archive."""
    if path.suffix.lower() != ".jrzip":
        return result_records(path.read_text(encoding="utf-8"), str(path))
    try:
        with zipfile.ZipFile(path) as z:
            names = [n for n in z.namelist() if n.rsplit("/", 1)[-1] == "data.txt"]
            if not names:
                raise BayesobsInputError(
                    f"{path}: no data.txt in the archive (a JATOS results archive holds "
                    "study_result_<id>/comp-result_<id>/data.txt)"
                )
            out: list[dict] = []
            for name in sorted(names):
                out += result_records(z.read(name).decode("utf-8"), f"{path}: {name}")
            return out
    except zipfile.BadZipFile:
        raise BayesobsInputError(
            f"{path}: not a zip archive (export it again from JATOS: Results > Export)"
        ) from None


def drop_resaved(df: pd.DataFrame) -> pd.DataFrame:
    """Keep once the jsPsych rows saved twice (as they came, and whole at the end)."""
    if not {"trial_index", "time_elapsed", "subject"} <= set(df.columns):
        return df
    num = [pd.to_numeric(df[c], errors="coerce") for c in ("trial_index", "time_elapsed")]
    key = pd.concat([df["subject"].astype(str), *num], axis=1)
    return df.loc[~(key.duplicated() & num[0].notna() & num[1].notna()).to_numpy()]
