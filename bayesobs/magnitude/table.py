"""Table tasks: a magnitude task whose stimuli are the rows of the user's own table."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..errors import BayesobsInputError
from ..stimuli.base import Stimulus
from ..stimuli.tables import TABLE_KEYS, TableRows


class TableTask(TableRows):
    """A magnitude task from a table: one row a stimulus (``magnitude``, ``text`` and/or ``image``)."""

    name = "table"
    role = "magnitude estimator"
    instruction = "Estimate the magnitude shown, as a number."
    person_task = "see pictures or short texts and estimate a number for each"
    keys = TABLE_KEYS | {"unit", "answer_range"}

    def __init__(self, table: dict | None = None):
        super().__init__(table)
        self.unit = self.table.get("unit", "")
        lo, hi = self.rows["magnitude"].min(), self.rows["magnitude"].max()
        self.scale = 0.5 * (hi - lo) if hi > lo else max(abs(hi), 1.0)  # the observers' noise scale
        self.anchor = 0.5 * (lo + hi)
        self.answer_range = tuple(map(float, self.table["answer_range"]))

    @classmethod
    def prepare_spec(cls, spec: dict, spec_path: Path) -> pd.DataFrame:
        """:meth:`TableRows.prepare_spec`, and the answer range (default: the values and a span beside)."""
        rows = super().prepare_spec(spec, spec_path)
        table, mags = spec["table"], rows["magnitude"]
        span = float(mags.max() - mags.min()) or max(abs(float(mags.max())), 1.0)
        if "answer_range" in table:
            r = table["answer_range"]
            if not (
                isinstance(r, list)
                and len(r) == 2
                and all(isinstance(v, (int, float)) for v in r)
                and r[0] < r[1]
            ):
                raise BayesobsInputError(
                    f"table.answer_range must be [low, high] with low < high, not {r!r}"
                )
        else:
            low = 0.0 if mags.min() >= 0 else float(mags.min()) - span
            table["answer_range"] = [low, float(mags.max()) + span]
        return rows

    def request_meta(self, stim: Stimulus) -> dict:
        """The noise scale and the anchor of the simulated observers (they answer from the magnitude)."""
        return {"scale": self.scale, "anchor": self.anchor}
