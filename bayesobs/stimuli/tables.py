"""Table tasks' tables: one row a stimulus, from a CSV, Parquet or Hugging Face dataset folder."""

from __future__ import annotations

import hashlib
import io
import json
import math
from functools import lru_cache
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
from PIL import Image, UnidentifiedImageError

from ..errors import BayesobsInputError
from .base import Stimulus, Task

MAX_ROWS = 100_000  # rows of one table: a stimulus set, not a data set


def _read(path: Path) -> pd.DataFrame:
    """The rows of a CSV, a Parquet file or a ``datasets`` ``save_to_disk`` folder, as read."""
    # pyarrow without `datasets`: a saved dataset is Arrow stream files named by state.json
    import pyarrow as pa  # start-up time: only a table task reads Arrow files

    if path.is_dir():
        state = path / "state.json"
        if not state.is_file():
            raise BayesobsInputError(
                f"{path}: a folder is read as a Hugging Face dataset saved with save_to_disk, "
                "and it has no state.json"
            )
        files = [path / f["filename"] for f in json.loads(state.read_text())["_data_files"]]
        parts = [pa.ipc.open_stream(pa.memory_map(str(f))).read_all() for f in files]
        return pa.concat_tables(parts).to_pandas() if parts else pd.DataFrame()
    if path.suffix.lower() == ".csv":
        return pd.read_csv(path, dtype={"text": str, "image": str, "session": str})
    if path.suffix.lower() in (".parquet", ".pq"):
        return pd.read_parquet(path)
    raise BayesobsInputError(
        f"{path}: a table is a .csv, a .parquet file or a Hugging Face dataset folder"
    )


def _image_bytes(folder: Path, value, where: str) -> tuple[bytes | None, str | None]:
    """An image cell's bytes (inline, as ``datasets`` stores them) or its confined path."""
    if isinstance(value, dict) and value.get("bytes") is not None:
        return bytes(value["bytes"]), None
    if isinstance(value, dict):
        value = value.get("path")
    if value is None or (isinstance(value, float) and math.isnan(value)) or value == "":
        return None, None
    target = (folder / str(value)).resolve()
    if not target.is_relative_to(folder.resolve()):
        raise BayesobsInputError(f"{where}: image {value!r} is outside the table's folder {folder}")
    if not target.is_file():
        raise BayesobsInputError(f"{where}: image {value!r} does not exist in {folder}")
    try:
        with Image.open(target) as im:
            im.verify()
    except (OSError, UnidentifiedImageError, SyntaxError) as exc:
        raise BayesobsInputError(f"{where}: image {value!r} is not an image ({exc})") from None
    return None, str(value)


@lru_cache(maxsize=16)
def read_table(path: str, mtime: float, value: str = "magnitude") -> pd.DataFrame:
    """A table task's rows, checked (``mtime``: a changed file is read again).

    Parameters
    ----------
    path : str
        A ``.csv`` or ``.parquet`` file, or a folder saved by ``datasets``'
        ``save_to_disk``; image paths are relative to its folder.
    mtime : float
        The file's modification time (the cache key).
    value : str, default "magnitude"
        The column of each row's number: the true value, or a right/wrong
        table's difficulty ``level``.

    Returns
    -------
    DataFrame
        ``value`` (float), ``text`` (str or None), ``image_path`` (the
        confined relative path, or None), ``image_bytes`` (inline bytes, or
        None), ``image_sha`` (the image's content hash) and the table's other
        columns (``session``, ``answer``, ``choices``, ``level``).

    Raises
    ------
    BayesobsInputError
        One line: an unreadable file, no ``value`` column, a value
        that is not a finite number, no rows, no ``text`` or ``image``
        column, an image outside the table's folder or missing.
    """
    p = Path(path)
    try:
        df = _read(p)
    except BayesobsInputError:
        raise
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BayesobsInputError(f"{p}: cannot read the table ({exc})") from None
    if value not in df.columns:
        what = "true value" if value == "magnitude" else value
        raise BayesobsInputError(
            f"{p}: no {value!r} column (each row's {what}); it has {', '.join(map(str, df.columns)) or 'none'}"
        )
    if df.empty:
        raise BayesobsInputError(f"{p}: the table has no rows")
    if len(df) > MAX_ROWS:
        raise BayesobsInputError(f"{p}: {len(df):,} rows; a table task takes at most {MAX_ROWS:,}")
    if not {"text", "image"} & set(df.columns):
        raise BayesobsInputError(f"{p}: a table task needs a 'text' or an 'image' column")
    mags = pd.to_numeric(df[value], errors="coerce")
    bad = ~np.isfinite(mags.to_numpy(dtype=float))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise BayesobsInputError(
            f"{p}: row {i + 1}: {value} {df[value].iloc[i]!r} is not a finite number"
        )
    folder = p if p.is_dir() else p.parent
    out = df.drop(columns=[c for c in ("image",) if c in df]).copy()
    out[value] = mags.astype(float)
    if "text" in df:
        out["text"] = [None if pd.isna(t) else str(t) for t in df["text"]]
    cells = [
        _image_bytes(folder, v, f"{p}: row {i + 1}")
        for i, v in enumerate(df["image"] if "image" in df else [None] * len(df))
    ]
    out["image_bytes"] = [b for b, _ in cells]
    out["image_path"] = [r for _, r in cells]
    out["image_sha"] = [
        hashlib.sha256(b if b is not None else (folder / r).read_bytes()).hexdigest()[:16]
        if (b is not None or r is not None)
        else None
        for b, r in cells
    ]
    return out.reset_index(drop=True)


def load_image(folder: Path, row: pd.Series, max_side: int) -> np.ndarray:
    """A row's image as an ``(H, W, 3)`` float array, its longer side at most ``max_side`` px."""
    data = row["image_bytes"]
    try:
        with Image.open(io.BytesIO(data) if data is not None else folder / row["image_path"]) as im:
            im = im.convert("RGB")
            if max(im.size) > max_side:
                im.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
            return np.asarray(im, dtype=float)
    except (OSError, UnidentifiedImageError) as exc:
        raise BayesobsInputError(
            f"{folder}: image {row['image_path'] or 'of row ' + str(row.name + 1)} cannot be read ({exc})"
        ) from None


TABLE_KEYS = {"path", "order", "instruction", "role", "question", "max_side"}
ORDERS = ("uniform", "table")


def _where_table(table, spec_path: Path, keys: set) -> dict:
    """The ``[table]`` section checked, its path made absolute."""
    if not isinstance(table, dict) or not isinstance(table.get("path"), str):
        raise BayesobsInputError(
            '[table] needs path = "FILE.csv" (a CSV, Parquet or dataset folder)'
        )
    unknown = set(table) - keys - {"_file"}
    if unknown:
        raise BayesobsInputError(
            f"unknown [table] key(s) {', '.join(sorted(unknown))}; choose from {', '.join(sorted(keys))}"
        )
    if table.get("order", "uniform") not in ORDERS:
        raise BayesobsInputError(f"table.order must be one of {', '.join(ORDERS)}")
    target = (spec_path.parent / table["path"]).resolve()
    if not target.exists():
        raise BayesobsInputError(f"table.path {table['path']!r}: no such file or folder {target}")
    return {**table, "_file": str(target)}


class TableRows(Task):
    """What every table task shares: its rows, sessions drawn from them, their images."""

    value: ClassVar[str] = "magnitude"  # the column of each row's number
    keys: ClassVar[set] = TABLE_KEYS  # the [table] keys it takes

    def __init__(self, table: dict | None = None):
        if table is None or "_file" not in table:
            raise BayesobsInputError(f"task {self.name} needs its [table] section (path = FILE)")
        self.table = table
        self.rows = self.rows_of(table)
        f = Path(table["_file"])
        self.folder = f if f.is_dir() else f.parent
        self.instruction = table.get("instruction", type(self).instruction)
        self.role = table.get("role", type(self).role)
        self._images: dict[int, np.ndarray] = {}
        self.modalities = modalities_of(self.rows)

    @classmethod
    def rows_of(cls, table: dict) -> pd.DataFrame:
        """The checked rows of a ``[table]`` section (read once per file version)."""
        p = Path(table["_file"])
        return read_table(str(p), p.stat().st_mtime, cls.value)

    @classmethod
    def prepare_spec(cls, spec: dict, spec_path: Path) -> pd.DataFrame:
        """Check a table spec, fill in what the table says (sessions, trials); its rows."""
        table = spec["table"] = _where_table(spec.get("table"), spec_path, cls.keys)
        rows = cls.rows_of(table)
        vals = rows[cls.value]
        if "sessions" not in spec:
            groups = rows.groupby("session")[cls.value] if "session" in rows else None
            named = groups.agg(["min", "max"]).itertuples() if groups is not None else []
            spec["sessions"] = [
                {"name": str(k), "range": _range(a, b), "table_session": str(k)}
                for k, a, b in named
            ] or [{"name": "table", "range": _range(vals.min(), vals.max())}]
        spec.setdefault(
            "trials",
            int(len(rows) if "session" not in rows else rows["session"].value_counts().max()),
        )
        have = modalities_of(rows)
        spec.setdefault("modalities", list(have[:1]))
        for m in spec["modalities"] if isinstance(spec["modalities"], list) else ():
            if m in ("text", "image", "multimodal") and m not in have:
                raise BayesobsInputError(
                    f"modality {m} needs a text column and an image in every row (multimodal: both); "
                    f"the table has modalities {', '.join(have) or 'none'}"
                )
        for i, sess in enumerate(spec["sessions"]) if isinstance(spec["sessions"], list) else ():
            r = sess.get("range") if isinstance(sess, dict) else None
            if isinstance(r, list) and len(r) == 2 and all(isinstance(v, (int, float)) for v in r):
                if not len(_candidates(rows, cls.value, *r, sess)):
                    raise BayesobsInputError(
                        f"sessions[{i}] ({sess.get('name')}): no row of the table has a {cls.value} in "
                        f"{r}{' and session ' + repr(sess['table_session']) if 'table_session' in sess else ''}"
                    )
        return rows

    @property
    def in_table_order(self) -> bool:
        """Whether a session asks its rows in the table's order (``order = "table"``), not by value."""
        return self.table.get("order", "uniform") == "table"

    def generate(self, rng, low, high, n, options):
        """``n`` rows with values in ``[low, high]``: nearest to uniform draws, or in the table's order."""
        cand = _candidates(self.rows, self.value, low, high, options)
        if self.in_table_order:
            picks = [cand[i % len(cand)] for i in range(n)]
        else:
            vals = self.rows[self.value].to_numpy()[cand]
            picks = []
            for u in rng.uniform(low, high, n):
                d = np.abs(vals - u)
                near = np.flatnonzero(d == d.min())
                picks.append(cand[int(near[rng.integers(len(near))])])
        return [self.stimulus(int(i)) for i in picks]

    def row_levels(self, low, high, options) -> np.ndarray:
        """The distinct values of the rows :meth:`generate` draws from in ``[low, high]``."""
        cand = _candidates(self.rows, self.value, low, high, options)
        return np.unique(self.rows[self.value].to_numpy(float)[cand])

    def stimulus(self, i: int, prompt: str | None = None, **params) -> Stimulus:
        """Row ``i`` as a stimulus (``params``: a task's own, beside the row and its image hash)."""
        row = self.rows.iloc[i]
        text = row["text"] if "text" in self.rows and row["text"] is not None else ""
        question = self.table.get("question", "") if prompt is None else prompt
        params = {"row": i, "image": row["image_sha"], **params}
        return Stimulus(self.name, float(row[self.value]), text, params, question)

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


def modalities_of(rows: pd.DataFrame) -> tuple[str, ...]:
    """The modalities a table renders: text with a text column (a blank is an empty text), image where every row has one."""
    text = "text" in rows
    image = bool(rows["image_sha"].notna().all())
    out = (("image",) if image else ()) + (("text",) if text else ())
    return out + (("multimodal",) if text and image else ())


def _range(a, b) -> list[float]:
    """A session range over values ``a`` to ``b`` (widened when they are equal)."""
    a, b = float(a), float(b)
    return [a, b] if a < b else [a - 0.5, b + 0.5]


def _candidates(rows, value, low, high, options) -> np.ndarray:
    """Indices of the rows in ``[low, high]`` (and of the session ``table_session`` names)."""
    ok = rows[value].between(float(low), float(high))
    if "table_session" in options:
        if "session" not in rows:
            raise BayesobsInputError("table_session needs a 'session' column in the table")
        ok &= rows["session"].astype(str) == str(options["table_session"])
    return np.flatnonzero(ok.to_numpy())
