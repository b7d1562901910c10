"""Right/wrong table tasks: each row a question with its choices, right answer and difficulty level."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import BayesobsInputError
from ..stimuli.base import Stimulus
from ..stimuli.tables import TABLE_KEYS, TableRows

_LABEL = re.compile(r"^\W*(?:final\s+)?answer\W*(?:is\b|:|=)?\s*", re.I)


def choices_of(cell, default) -> list[str]:
    """A row's choices: a list (Parquet, datasets) or ``a|b|c`` (CSV), else the ``[table]`` default."""
    if cell is None or (isinstance(cell, float) and pd.isna(cell)):
        return [str(c) for c in default or []]
    if isinstance(cell, str):
        return [c.strip() for c in cell.split("|") if c.strip()]
    return [str(c) for c in cell]


def _norm(text: str) -> str:
    """A choice or reply compared without case, quotes, spaces and end punctuation."""
    return re.sub(r"\s+", " ", text.strip().strip("\"'`*.!").strip()).lower()


class TableChoice(TableRows):
    """A right/wrong task from a table: ``answer``, ``choices`` and a difficulty ``level`` per row."""

    name = "table_choice"
    paradigm = "choice"
    value = "level"
    keys = TABLE_KEYS | {"choices"}
    role = "participant in a perception study"
    instruction = "Answer with exactly one of the choices the question lists, and nothing else."
    person_instruction = "Look at each picture or text and type one of the answers listed below it."
    person_task = "see pictures or short texts and choose the right answer for each"
    seconds_per_answer = 6.0

    @classmethod
    def prepare_spec(cls, spec: dict, spec_path: Path) -> pd.DataFrame:
        """:meth:`TableRows.prepare_spec`, and every row's right answer among its choices."""
        rows = super().prepare_spec(spec, spec_path)
        default = spec["table"].get("choices")
        if "answer" not in rows:
            raise BayesobsInputError("a right/wrong table needs an 'answer' column")
        if "choices" not in rows and not default:
            raise BayesobsInputError(
                "a right/wrong table needs a 'choices' column or table.choices"
            )
        for i, row in rows.iterrows():
            choices = choices_of(row.get("choices"), default)
            if len(choices) < 2 or str(row["answer"]) not in choices:
                raise BayesobsInputError(
                    f"row {i + 1}: answer {row['answer']!r} is not one of two or more choices {choices}"
                )
        return rows

    def stimulus(self, i: int, **params) -> Stimulus:
        """Row ``i``: its level, right answer, choices and chance (one over the choices)."""
        row = self.rows.iloc[i]
        choices = choices_of(row.get("choices"), self.table.get("choices"))
        asks = f"Answer one of: {', '.join(choices)}."
        question = self.table.get("question", "")
        return super().stimulus(
            i,
            prompt=f"{question} {asks}".strip(),
            gold=str(row["answer"]),
            choices=choices,
            chance=1 / len(choices),
        )

    def read(self, stim: Stimulus, reply: str | None) -> str | None:
        """The choice a reply names: all of it, its last line after an "Answer:" label, or one whole word."""
        if not reply:
            return None
        choices = {_norm(c): c for c in stim.params["choices"]}
        last = _LABEL.sub("", reply.strip().splitlines()[-1])
        for text in (reply, last):
            if _norm(text) in choices:
                return choices[_norm(text)]
        named = [
            c for n, c in choices.items() if re.search(rf"(?<!\w){re.escape(n)}(?!\w)", _norm(last))
        ]
        return named[0] if len(named) == 1 else None

    def record(self, stim: Stimulus, reply: str | None, truncated: bool = False) -> dict[str, Any]:
        """Score a reply: ``correct`` (1/0; None when it names no choice), ``level``, ``gold``, ``chance``."""
        p = stim.params
        value = self.read(stim, reply)
        row: dict[str, Any] = {
            "level": stim.value,
            "correct": None if value is None else int(value == p["gold"]),
            "gold": p["gold"],
            "response_value": value,
            "chance": p["chance"],
        }
        if value is None:
            row["invalid_reason"] = "names none of the choices" + (
                " (reply cut off by max_tokens)" if truncated else ""
            )
        return {
            "response": None if value is None else float(row["correct"]),
            "valid": value is not None,
            **row,
        }

    def human_answer(self, stim: Stimulus) -> str:
        """The right answer (the practice trial's feedback)."""
        return stim.params["gold"]

    def human_replies(self, stim: Stimulus, text: str) -> tuple[str, ...]:
        """A person's typed answer, read as it is."""
        return (text,)

    def request_meta(self, stim: Stimulus) -> dict:
        """The level, right answer and choices, and the table's levels (for simulated subjects)."""
        lv = self.rows["level"]
        return {**stim.params, "level": stim.value, "levels": (float(lv.min()), float(lv.max()))}
