"""Table tasks' tables: one row a stimulus, from a CSV, Parquet or Hugging Face dataset folder."""

from __future__ import annotations

import hashlib
import io
import json
import math
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, UnidentifiedImageError

from ..errors import BayesobsInputError

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
    return None, str(value)


@lru_cache(maxsize=16)
def read_table(path: str, mtime: float) -> pd.DataFrame:
    """A table task's rows, checked (``mtime``: a changed file is read again).

    Parameters
    ----------
    path : str
        A ``.csv`` or ``.parquet`` file, or a folder saved by ``datasets``'
        ``save_to_disk``; image paths are relative to its folder.
    mtime : float
        The file's modification time (the cache key).

    Returns
    -------
    DataFrame
        ``magnitude`` (float), ``text`` (str or None), ``image_path`` (the
        confined relative path, or None), ``image_bytes`` (inline bytes, or
        None), ``image_sha`` (the image's content hash) and the table's other
        columns (``session``, ``answer``, ``choices``, ``level``).

    Raises
    ------
    BayesobsInputError
        One line: an unreadable file, no ``magnitude`` column, a magnitude
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
    if "magnitude" not in df.columns:
        raise BayesobsInputError(
            f"{p}: no 'magnitude' column (each row's true value); it has {', '.join(map(str, df.columns)) or 'none'}"
        )
    if df.empty:
        raise BayesobsInputError(f"{p}: the table has no rows")
    if len(df) > MAX_ROWS:
        raise BayesobsInputError(f"{p}: {len(df):,} rows; a table task takes at most {MAX_ROWS:,}")
    if not {"text", "image"} & set(df.columns):
        raise BayesobsInputError(f"{p}: a table task needs a 'text' or an 'image' column")
    mags = pd.to_numeric(df["magnitude"], errors="coerce")
    bad = ~np.isfinite(mags.to_numpy(dtype=float))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise BayesobsInputError(
            f"{p}: row {i + 1}: magnitude {df['magnitude'].iloc[i]!r} is not a finite number"
        )
    folder = p if p.is_dir() else p.parent
    out = df.drop(columns=[c for c in ("image",) if c in df]).copy()
    out["magnitude"] = mags.astype(float)
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
