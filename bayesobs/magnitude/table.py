"""Table tasks: a magnitude task whose stimuli are the rows of the user's own table."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import BayesobsInputError
from ..stimuli.base import Stimulus, Task
from ..stimuli.tables import load_image, read_table

TABLE_KEYS = {
    "path",
    "order",
    "unit",
    "answer_range",
    "instruction",
    "role",
    "question",
    "max_side",
}
ORDERS = ("uniform", "table")


def _where_table(table, spec_path: Path) -> dict:
    """The ``[table]`` section checked, its path made absolute."""
    if not isinstance(table, dict) or not isinstance(table.get("path"), str):
        raise BayesobsInputError(
            '[table] needs path = "FILE.csv" (a CSV, Parquet or dataset folder)'
        )
    unknown = set(table) - TABLE_KEYS - {"_file"}
    if unknown:
        raise BayesobsInputError(
            f"unknown [table] key(s) {', '.join(sorted(unknown))}; choose from {', '.join(sorted(TABLE_KEYS))}"
        )
    if table.get("order", "uniform") not in ORDERS:
        raise BayesobsInputError(f"table.order must be one of {', '.join(ORDERS)}")
    target = (spec_path.parent / table["path"]).resolve()
    if not target.exists():
        raise BayesobsInputError(f"table.path {table['path']!r}: no such file or folder {target}")
    return {**table, "_file": str(target)}


def rows_of(table: dict):
    """The checked rows of a ``[table]`` section (read once per file version)."""
    p = Path(table["_file"])
    return read_table(str(p), p.stat().st_mtime)


class TableTask(Task):
    """A magnitude task from a table: one row a stimulus (``magnitude``, ``text`` and/or ``image``)."""

    name = "table"
    role = "magnitude estimator"
    instruction = "Estimate the magnitude shown, as a number."
    person_task = "see pictures or short texts and estimate a number for each"

    def __init__(self, table: dict | None = None):
        if table is None or "_file" not in table:
            raise BayesobsInputError("task table needs its [table] section (path = FILE)")
        self.table = table
        self.rows = rows_of(table)
        self.folder = (
            Path(table["_file"]) if Path(table["_file"]).is_dir() else Path(table["_file"]).parent
        )
        self.instruction = table.get("instruction", TableTask.instruction)
        self.role = table.get("role", TableTask.role)
        self.unit = table.get("unit", "")
        lo, hi = self.rows["magnitude"].min(), self.rows["magnitude"].max()
        self.scale = 0.5 * (hi - lo) if hi > lo else max(abs(hi), 1.0)  # the observers' noise scale
        self.anchor = 0.5 * (lo + hi)
        self.answer_range = tuple(map(float, table["answer_range"]))
        self._images: dict[int, np.ndarray] = {}

    @classmethod
    def prepare_spec(cls, spec: dict, spec_path: Path) -> None:
        """Check a table spec and fill in what the table says: sessions, trials, answer range."""
        table = spec["table"] = _where_table(spec.get("table"), spec_path)
        rows = rows_of(table)
        mags = rows["magnitude"]
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
        if "sessions" not in spec:
            groups = rows.groupby("session")["magnitude"] if "session" in rows else None
            named = groups.agg(["min", "max"]).itertuples() if groups is not None else []
            spec["sessions"] = [
                {"name": str(k), "range": _range(a, b), "table_session": str(k)}
                for k, a, b in named
            ] or [{"name": "table", "range": _range(mags.min(), mags.max())}]
        spec.setdefault(
            "trials",
            int(len(rows) if "session" not in rows else rows["session"].value_counts().max()),
        )
        have = {"text": "text" in rows, "image": rows["image_sha"].notna().any()}
        have["multimodal"] = have["text"] and have["image"]
        for m in spec.get("modalities", ["image" if have["image"] else "text"]):
            if m in have and not have[m]:
                raise BayesobsInputError(
                    f"modality {m} needs the table's {'text and image columns' if m == 'multimodal' else m + ' column'}"
                )
        spec.setdefault("modalities", ["image" if have["image"] else "text"])
        for i, sess in enumerate(spec["sessions"]) if isinstance(spec["sessions"], list) else ():
            r = sess.get("range") if isinstance(sess, dict) else None
            if isinstance(r, list) and len(r) == 2 and all(isinstance(v, (int, float)) for v in r):
                if not len(_candidates(rows, *sess["range"], sess)):
                    raise BayesobsInputError(
                        f"sessions[{i}] ({sess.get('name')}): no row of the table has a magnitude in "
                        f"{sess['range']}{' and session ' + repr(sess['table_session']) if 'table_session' in sess else ''}"
                    )

    def generate(self, rng, low, high, n, options):
        """``n`` rows with magnitudes in ``[low, high]``: nearest to uniform draws, or in the table's order."""
        cand = _candidates(self.rows, low, high, options)
        if self.table.get("order", "uniform") == "table":
            picks = [cand[i % len(cand)] for i in range(n)]
        else:
            mags = self.rows["magnitude"].to_numpy()[cand]
            picks = []
            for u in rng.uniform(low, high, n):
                d = np.abs(mags - u)
                near = np.flatnonzero(d == d.min())
                picks.append(cand[int(near[rng.integers(len(near))])])
        return [self._stimulus(int(i)) for i in picks]

    def _stimulus(self, i: int) -> Stimulus:
        row = self.rows.iloc[i]
        text = row["text"] if "text" in self.rows and row["text"] is not None else ""
        question = self.table.get("question", "")
        return Stimulus(
            self.name,
            float(row["magnitude"]),
            text,
            {"row": i, "image": row["image_sha"]},
            question,
        )

    def draw(self, stim: Stimulus) -> np.ndarray:
        """The row's image (its longer side at most ``max_side`` pixels, default 512)."""
        i = stim.params["row"]
        if i not in self._images:
            if stim.params["image"] is None:
                raise BayesobsInputError(f"row {i + 1} of the table has no image")
            self._images[i] = load_image(
                self.folder, self.rows.iloc[i], int(self.table.get("max_side", 512))
            )
        return self._images[i]

    def request_meta(self, stim: Stimulus) -> dict:
        """The noise scale and the anchor of the simulated observers (they answer from the magnitude)."""
        return {"scale": self.scale, "anchor": self.anchor}


def _range(a, b) -> list[float]:
    """A session range over magnitudes ``a`` to ``b`` (widened when they are equal)."""
    a, b = float(a), float(b)
    return [a, b] if a < b else [a - 0.5, b + 0.5]


def _candidates(rows, low, high, options) -> np.ndarray:
    """Indices of the rows in ``[low, high]`` (and of the session ``table_session`` names)."""
    ok = rows["magnitude"].between(float(low), float(high))
    if "table_session" in options:
        if "session" not in rows:
            raise BayesobsInputError("table_session needs a 'session' column in the table")
        ok &= rows["session"].astype(str) == str(options["table_session"])
    return np.flatnonzero(ok.to_numpy())
