"""The trial table (DESIGN.md contract): read, map, filter, validate, write.

One row per trial.  Required columns: ``stimulus`` and ``response``.  Cell and
order keys get defaults when absent: ``subject`` ("subject"), ``task``
("task"), ``modality`` ("text"), ``condition`` ("base"), ``session``
("session"), ``run`` (0) and ``trial`` (row order within a run).  Any other
column is kept and ignored by the analyses.

A missing response (empty, NaN) is a missing trial: the row is kept (the
observer still saw the stimulus) and excluded from likelihoods.  Everything
else that is not a number is an error naming the file, row and column, and so
is a number beyond :data:`MAX_MAGNITUDE` (the fits square and multiply values:
1e308 would overflow them) or an infinity.

``--map``, ``--where`` and ``--missing-where`` expressions are read by
:mod:`bayesobs.expr`, never evaluated as Python.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import json
import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from .errors import BayesobsInputError
from .expr import ExpressionError, evaluate
from .jsonl import read_records, trial_file
from .limits import check
from .order import melt_wide
from .paradigms import marked_rows
from .paradigms import markers as paradigm_markers
from .platforms import drop_resaved, jatos_records, looks_like_json_lines
from .worded import read_worded

CELL_KEYS: tuple[str, ...] = ("subject", "task", "modality", "condition")
RUN_KEYS: tuple[str, ...] = CELL_KEYS + ("session", "run")
TRIAL_KEYS: tuple[str, ...] = RUN_KEYS + ("trial",)
# the columns that mark a row without a ``paradigm`` as a trial of that paradigm
# (human CSVs, older logs); a paradigm not listed is known only by its ``paradigm`` value.
# Derived from the registered paradigms (bayesobs.paradigms).
PARADIGM_MARKERS: dict[str, tuple[str, ...]] = paradigm_markers()
REQUIRED: tuple[str, ...] = ("stimulus", "response")
DEFAULTS: dict[str, object] = {
    "subject": "subject",
    "task": "task",
    "modality": "text",
    "condition": "base",
    "session": "session",
    "run": 0,
}
OPTIONAL: tuple[str, ...] = (
    "range_low",
    "range_high",
    "raw_response",
    "valid",
    "prompt_id",
    "latency_s",
    "timestamp",
    "seed",
    "blur_sigma",
    "context_window",
)
MODALITIES: tuple[str, ...] = ("text", "image", "multimodal")
CONDITIONS: tuple[str, ...] = (
    "base",
    "steer_verbal",
    "steer_numeric",
    "steer_biased",
    "noise_constant",
    "noise_gradual",
    "context_short",
    "context_long",
    "context_reversed",
    "context_none",
)

# the largest magnitude a stimulus, response or range bound may have: the fits take sums of
# fourth powers, which stay finite up to here; no measurement comes near it
MAX_MAGNITUDE = 1e50

_SRC = "_source"
_ROW = "_row"
_MISSING_TOKENS = {"", "nan", "na", "n/a", "null", "none"}


# --------------------------------------------------------------------- reading
def natural_key(value) -> tuple:
    """Sort key for ids: ``"2"`` before ``"10"``, ``"p2"`` before ``"P10"`` (case folded).

    Parameters
    ----------
    value : object
        An id (subject, session...); it is read as text.

    Returns
    -------
    tuple
        A key that sorts runs of digits by their number and other text case-folded.
    """
    parts = re.split(r"(\d+)", str(value))
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p.lower()) for p in parts if p)


#: the spellings of a true ``catch`` or ``correct`` value in files (JSON true, CSV text)
TRUE_WORDS = frozenset({"true", "1", "1.0", "yes"})


def catch_rows(trials: pd.DataFrame) -> np.ndarray:
    """Which rows are catch (attention-check) trials: a true ``catch`` column.

    JSON ``true``, 1 or the words of :data:`TRUE_WORDS` in a CSV count;
    a missing value does not.

    Parameters
    ----------
    trials : DataFrame
        A trial table, with or without a ``catch`` column.

    Returns
    -------
    numpy.ndarray
        One bool per row, true for a catch trial; all false without a ``catch`` column.
    """
    if "catch" not in trials.columns:
        return np.zeros(len(trials), dtype=bool)
    c = trials["catch"]
    if pd.api.types.is_bool_dtype(c):
        return c.to_numpy(dtype=bool)
    return c.map(lambda v: v == v and str(v).strip().lower() in TRUE_WORDS).to_numpy(bool)


def paradigm_rows(trials: pd.DataFrame, paradigm: str) -> pd.Series:
    """Which rows belong to ``paradigm`` (``search``, ``perception``, ``hvs``...).

    A ``paradigm`` column (written by the runner) decides where it is filled
    in; rows without it (human CSVs, older logs) belong to the paradigm when
    they fill in every one of its markers (:data:`PARADIGM_MARKERS`, e.g.
    ``set_size`` and ``correct`` for search).

    Parameters
    ----------
    trials : DataFrame
        A trial table.
    paradigm : str
        The paradigm's name, as written in the ``paradigm`` column.

    Returns
    -------
    pandas.Series
        One bool per row (the table's index), true where the row belongs to ``paradigm``.
    """
    return marked_rows(trials, paradigm, paradigm_markers().get(paradigm, ()))


def _read_jsonl(path: Path, torn_ok: bool = False) -> pd.DataFrame:
    """Records of a JSONL file; ``torn_ok`` skips unparseable lines with a warning."""
    records, rows, torn = read_records(path, strict=not torn_ok)
    if torn:
        warnings.warn(
            f"{path}: skipped {torn} torn line(s) left by an interrupted write", stacklevel=3
        )
    df = pd.DataFrame.from_records(records)
    df[_ROW] = rows
    return df


def _field_counts(path: Path, sep: str) -> list[tuple[int, int]]:
    """``(line, number of fields)`` of every non-blank CSV record (quotes respected)."""
    opener = gzip.open if path.suffix == ".gz" else open
    out = []
    with opener(path, "rt", newline="", encoding="utf-8-sig", errors="replace") as fh:
        reader = csv.reader(fh, delimiter=sep)
        start = 1
        for row in reader:
            if row:
                out.append((start, len(row)))
            start = reader.line_num + 1
    return out


def _null_tokens() -> list[str]:
    """The missing-value tokens in the spellings a CSV writer uses."""
    out = set()
    for t in _MISSING_TOKENS:
        out |= {t, t.upper(), t.title(), t.capitalize()}
    return sorted(out)


def _ragged_error(path: Path, sep: str, columns: Sequence[str] | None) -> BayesobsInputError:
    """The first row whose field count differs from the header's (or ``columns``)."""
    counts = _field_counts(path, sep)
    (_, n_header), body = counts[0], counts[1:]
    width = len(columns) if columns is not None else n_header
    what = f"--columns names {width}" if columns is not None else f"the header names {width}"
    for line, n in body:
        if n != width:
            hint = (
                "; if the header lacks names, pass --columns NAME1,NAME2,... naming every field "
                "(the header line is then ignored)"
                if columns is None
                else ""
            )
            return BayesobsInputError(
                f"{path}: malformed CSV: line {line} has {n} field(s) but {what}: a ragged CSV "
                f"would be read with its columns shifted{hint}"
            )
    return BayesobsInputError(f"{path}: malformed CSV: rows of unequal length")


def _text_column(values: pd.Categorical) -> pd.Categorical | np.ndarray:
    """A text column (as categories): stripped, missing tokens to NaN, numbers if all are."""
    cats = pd.Series(values.categories.astype(str)).str.strip()
    missing = cats.str.lower().isin(_MISSING_TOKENS).to_numpy()
    num = pd.to_numeric(cats.where(~missing), errors="coerce").to_numpy(dtype=float)
    codes = values.codes
    absent = codes < 0
    if codes.size and not absent.all() and (~np.isnan(num) | missing).all():
        if not missing[codes[~absent]].all():  # wholly numeric (not wholly missing)
            out = num[np.where(absent, 0, codes)]
            out[absent] = np.nan
            return out
    # Text stays categorical (a small code per row): compact, cheap to group and compare.
    # Stripping can merge categories ("a" and " a"), so they are factorised again.
    remap = np.full(len(cats), -1, dtype=np.int64)
    fact, uniques = pd.factorize(cats[~missing].to_numpy(dtype=object))
    remap[~missing] = fact
    rows = np.where(absent, -1, remap[np.where(absent, 0, codes)]) if len(cats) else codes
    return pd.Categorical.from_codes(rows, categories=pd.Index(uniques, dtype=object))


def _csv_columns(reader, path: Path) -> dict[str, object]:
    """Each column of a streamed pyarrow CSV reader, converted block by block."""
    import pyarrow as pa  # start-up time: pyarrow loads only for Parquet/Arrow files

    names = reader.schema.names
    numbers: dict[str, list[np.ndarray]] = {n: [] for n in names}
    text_codes: dict[str, list[np.ndarray]] = {n: [] for n in names}
    text_values: dict[str, dict[str, int]] = {n: {} for n in names}
    pool = pa.default_memory_pool()
    n_rows = 0
    for batch in reader:
        pool.release_unused()  # the allocator would keep each parsed block's pages for a while
        n_rows = check("rows", n_rows + batch.num_rows, f"{path}: at least")
        for name, col in zip(names, batch.columns, strict=True):
            t = col.type
            if pa.types.is_integer(t) or pa.types.is_floating(t):
                if pa.types.is_integer(t) and col.null_count == 0:
                    numbers[name].append(col.to_numpy())
                else:
                    numbers[name].append(col.to_numpy(zero_copy_only=False).astype(float))
                continue
            if pa.types.is_null(t):
                numbers[name].append(np.full(len(col), None, dtype=object))
                continue
            if not (pa.types.is_string(t) or pa.types.is_large_string(t)):
                col = col.cast(pa.string())  # dates, times: kept as the text they were
            enc = col.dictionary_encode()
            seen = text_values[name]
            remap = np.array(
                [seen.setdefault(v, len(seen)) for v in enc.dictionary.to_pylist()] + [-1],
                dtype=np.int32,
            )
            idx = enc.indices.fill_null(-1).to_numpy(zero_copy_only=False)
            text_codes[name].append(remap[idx])  # -1 (missing) picks the trailing -1
    out: dict[str, object] = {}
    for name in names:
        if text_codes[name]:
            values = pd.Categorical.from_codes(
                np.concatenate(text_codes[name]),
                categories=pd.Index(list(text_values[name]), dtype=object),
            )
            out[name] = _text_column(values)
        elif numbers[name]:
            out[name] = np.concatenate(numbers[name])
        else:  # a header without rows
            out[name] = np.array([], dtype=object)
    return out


def _check_text(path: Path, head_bytes: int = 1 << 16) -> bytes:
    """Refuse a file whose start is binary (NUL bytes) or not UTF-8 text; return that start."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as fh:
            head = fh.read(head_bytes)
    except (OSError, EOFError) as exc:
        raise BayesobsInputError(f"{path}: cannot read: {exc}") from None
    if b"\x00" in head:
        raise BayesobsInputError(f"{path}: not a text file (binary data), so not a CSV")
    try:  # a character cut at the end of the sample is not an error
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, exc) from None
    return head


def _not_utf8(path: Path, exc: UnicodeDecodeError | None = None) -> BayesobsInputError:
    at = f" (byte 0x{exc.object[exc.start]:02x})" if exc is not None else ""
    return BayesobsInputError(
        f"{path}: not UTF-8 text{at}: binary data, or text in another encoding "
        "(save it as UTF-8 CSV)"
    )


def _read_csv_strict(
    path: Path, sep: str, columns: Sequence[str] | None = None
) -> tuple[pd.DataFrame, np.ndarray]:
    """A CSV whose every row has exactly as many fields as its header names."""
    if columns is not None:
        columns = [str(c).strip() for c in columns]
        if len(set(columns)) != len(columns) or not all(columns):
            raise BayesobsInputError(
                f"--columns {','.join(columns)}: names must be unique and non-empty"
            )
    head = _check_text(path)  # its first line's fields are counted before pyarrow reads a block
    line, *rest = head.split(b"\n", 1)
    check(
        "columns", line.count(sep.encode()) + 1, f"{path}: a line of{'' if rest else ' at least'}"
    )
    return _read_csv_blocks(path, sep, columns)


def _read_csv_blocks(path, sep, columns):
    """The body of :func:`_read_csv_strict`: pyarrow's streamed reader, block by block."""
    import pyarrow as pa  # start-up time: pyarrow loads only for Parquet/Arrow files
    import pyarrow.csv as pacsv  # start-up time: pyarrow loads only for Parquet/Arrow files

    as_text: dict[str, pa.DataType] = {}
    while True:
        # Streamed in blocks (the whole file is never held as text), with types
        # inferred from the first block; a column that turns out to hold text
        # further down is read again as text.
        try:
            reader = pacsv.open_csv(
                path,
                read_options=pacsv.ReadOptions(
                    column_names=columns,
                    skip_rows=1 if columns is not None else 0,
                    block_size=1 << 22,
                    use_threads=False,  # no read-ahead: one block in memory at a time
                ),
                # no invalid_row_handler: a Python callable held by the reader is released by
                # an Arrow thread, which aborts the process if that happens at its exit
                parse_options=pacsv.ParseOptions(delimiter=sep, newlines_in_values=True),
                convert_options=pacsv.ConvertOptions(
                    column_types=as_text,
                    null_values=_null_tokens(),
                    strings_can_be_null=True,
                    true_values=[],
                    false_values=[],
                    timestamp_parsers=[],
                ),
            )
            parts = _csv_columns(reader, path)
            break
        except pa.ArrowInvalid as exc:
            msg = str(exc).strip().splitlines()[0]
            if re.search(r"Expected \d+ columns, got \d+", msg):  # a row of another width
                bad_text = "\ufffd" in msg
                raise (_not_utf8(path) if bad_text else _ragged_error(path, sep, columns)) from None
            if "Empty CSV file" in msg:
                raise pd.errors.EmptyDataError from None
            bad = re.search(r"In CSV column #(\d+): .*conversion error", msg)
            names = reader.schema.names if "reader" in locals() else []
            if bad and int(bad.group(1)) < len(names) and names[int(bad.group(1))] not in as_text:
                as_text[names[int(bad.group(1))]] = pa.string()
                del reader
                continue
            raise BayesobsInputError(f"{path}: malformed CSV: {msg}") from None
    df = pd.DataFrame(parts)
    del reader, parts
    pa.default_memory_pool().release_unused()  # give the parser's buffers back before the fits
    return df, np.arange(2, len(df) + 2)  # line numbers: the header is line 1


def _read_one(path: Path, columns: Sequence[str] | None = None) -> tuple[pd.DataFrame, str]:
    """Read one file; return the frame and how its rows are numbered."""
    folder = path.is_dir()
    if folder:
        inner = trial_file(path)
        if not inner.exists():
            raise BayesobsInputError(
                f"{path}: is a folder without trials.jsonl (is it an experiment folder?)"
            )
        path = inner
    if not path.exists():
        raise BayesobsInputError(f"{path}: no such file or folder")
    if path.stat().st_size == 0:
        raise BayesobsInputError(f"{path}: empty file")
    suffix = "".join(path.suffixes[-2:]).lower() if path.suffix == ".gz" else path.suffix.lower()
    try:
        if suffix == ".jrzip" or (suffix == ".txt" and looks_like_json_lines(path)):
            df = pd.DataFrame.from_records(jatos_records(path))  # JATOS's own exports
            df[_ROW] = np.arange(1, len(df) + 1)
            unit = "record"
        elif suffix in (".csv", ".csv.gz", ".tsv", ".tsv.gz", ".txt"):
            sep = "\t" if ".tsv" in suffix else ","
            df, lines = _read_csv_strict(path, sep, columns)
            df[_ROW] = lines
            unit = "line"
        elif suffix in (".parquet", ".pq"):
            import pyarrow.parquet as pq  # start-up time: pyarrow loads only for Parquet files

            meta = pq.ParquetFile(path).metadata
            check("columns", meta.num_columns, f"{path}:")
            check("rows", meta.num_rows, f"{path}:")
            df = pd.read_parquet(path)
            df[_ROW] = np.arange(1, len(df) + 1)
            unit = "row"
        elif suffix in (".jsonl", ".ndjson"):
            df = _read_jsonl(path, torn_ok=folder)
            unit = "line"
        elif suffix == ".json":  # a JSON array of records, e.g. jsPsych's data export
            data = json.loads(path.read_text())
            if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
                raise BayesobsInputError(
                    f"{path}: expected a JSON array of objects (one per trial)"
                )
            df = pd.DataFrame.from_records(data)
            df[_ROW] = np.arange(1, len(df) + 1)
            unit = "row"
        else:
            raise BayesobsInputError(
                f"{path}: unknown file type {path.suffix!r} "
                "(expected .csv, .tsv, .parquet, .jsonl, .json, JATOS's .jrzip or .txt, "
                "or an experiment folder)"
            )
    except BayesobsInputError:
        raise
    except pd.errors.EmptyDataError:
        raise BayesobsInputError(f"{path}: empty file") from None
    except pd.errors.ParserError as exc:
        msg = str(exc).strip().splitlines()[-1]
        raise BayesobsInputError(f"{path}: malformed CSV: {msg}") from None
    except (OSError, ValueError) as exc:  # e.g. a corrupt parquet footer
        raise BayesobsInputError(f"{path}: cannot read: {exc}") from None
    except RecursionError:  # JSON nested thousands deep
        raise BayesobsInputError(f"{path}: cannot read: nested too deep") from None
    check("columns", len(df.columns), f"{path}:")
    check("rows", len(df), f"{path}:")
    if "trial_type" in df.columns and "bayesobs_trial" in df.columns:
        df = from_jspsych(df)
    if len(df) == 0:
        raise BayesobsInputError(f"{path}: no trials (the file has a header but no rows)")
    # one small code per row, not millions of copies of the path
    df[_SRC] = pd.Categorical.from_codes(np.zeros(len(df), dtype=np.int8), categories=[str(path)])
    return df, unit


def from_jspsych(df: pd.DataFrame) -> pd.DataFrame:
    """Trial-table rows of a jsPsych data export made by ``bayesobs export jspsych``.

    Keeps the rows marked ``bayesobs_trial``; the response is the form's
    ``response`` field (a dict in JSON exports, a JSON string in CSV exports);
    ``rt`` (ms) becomes ``latency_s``.

    Parameters
    ----------
    df : DataFrame
        The export's rows, with its ``trial_type``, ``bayesobs_trial`` and
        ``response`` columns (and ``rt`` when it was recorded).

    Returns
    -------
    DataFrame
        The marked rows only, with ``raw_response`` and ``response`` set to the
        answer, ``latency_s`` in seconds where ``rt`` is present, and the
        ``bayesobs_trial`` column dropped; other columns are kept.
    """
    mark = df["bayesobs_trial"].astype(str).str.lower().isin(["true", "1", "1.0"])
    out = df.loc[mark].copy()

    def answer(v):
        if isinstance(v, str):
            try:
                v = json.loads(v)
            except json.JSONDecodeError:
                return v
        return v.get("response") if isinstance(v, dict) else v

    form = out["response"]
    out["raw_response"] = form.map(answer).astype(object)
    out["response"] = out["raw_response"]
    if "rt" in out.columns:
        out["latency_s"] = pd.to_numeric(out["rt"], errors="coerce") / 1000
    return read_worded(out, form).drop(columns=["bayesobs_trial"])


def _plain(v):
    """A numpy scalar as the Python value it holds (no ``np.int64(...)`` in messages)."""
    return v.item() if isinstance(v, np.generic) else v


def _where(df: pd.DataFrame, i: int) -> str:
    return f"{df[_SRC].iat[i]}, row {df[_ROW].iat[i]}"


def _numeric(df: pd.DataFrame, col: str, allow_missing: bool) -> pd.Series:
    """Convert a column to float, naming the first offending row on failure."""
    s = df[col]
    if pd.api.types.is_bool_dtype(s):
        s = s.astype(float)
    if pd.api.types.is_numeric_dtype(s):
        num = s.astype(float)
        missing = num.isna().to_numpy()
    else:
        text = s.astype(object).where(s.notna(), "")
        text = text.map(lambda v: v.strip() if isinstance(v, str) else v)
        missing = text.map(
            lambda v: (
                (isinstance(v, str) and v.lower() in _MISSING_TOKENS)
                or (isinstance(v, float) and np.isnan(v))
            )
        ).to_numpy(dtype=bool)
        num = pd.to_numeric(text.where(~missing, np.nan), errors="coerce").astype(float)
        bad = num.isna().to_numpy() & ~missing
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise BayesobsInputError(
                f"{_where(df, i)}, column {col!r}: {_plain(s.iat[i])!r} is not a number"
                + (" (leave the cell empty for a missing response)" if allow_missing else "")
            )
    vals = num.to_numpy()
    if np.isinf(vals).any():
        i = int(np.flatnonzero(np.isinf(vals))[0])
        raise BayesobsInputError(f"{_where(df, i)}, column {col!r}: value is infinite")
    with np.errstate(invalid="ignore"):
        huge = np.abs(vals) > MAX_MAGNITUDE
    if huge.any():
        i = int(np.flatnonzero(huge)[0])
        raise BayesobsInputError(
            f"{_where(df, i)}, column {col!r}: {vals[i]:g} is beyond the largest magnitude "
            f"accepted, {MAX_MAGNITUDE:g} (its square would overflow the fits)"
        )
    if not allow_missing and missing.any():
        i = int(np.flatnonzero(missing)[0])
        raise BayesobsInputError(f"{_where(df, i)}, column {col!r}: value is missing")
    return pd.Series(vals, index=df.index, name=col)


def _as_key(df: pd.DataFrame, col: str) -> pd.Series:
    s = df[col]
    if isinstance(s.dtype, pd.CategoricalDtype):
        # text read from a CSV: work on the few categories, not on every row
        # (a 2-million-row file would otherwise make millions of new strings)
        codes = s.cat.codes.to_numpy()
        if (codes < 0).any():
            i = int(np.flatnonzero(codes < 0)[0])
            raise BayesobsInputError(f"{_where(df, i)}, column {col!r}: value is missing")
        cats = pd.Series(s.cat.categories.astype(object)).map(lambda v: str(v).strip())
        if col == "run":
            num = pd.to_numeric(cats, errors="coerce")
            if num.notna().all() and (num == np.round(num)).all():
                return pd.Series(num.to_numpy(np.int64)[codes], index=s.index)
        return pd.Series(cats.to_numpy(dtype=object)[codes], index=s.index, dtype=object)
    miss = s.isna().to_numpy() | (s.astype(str).str.strip() == "").to_numpy()
    if miss.any():
        i = int(np.flatnonzero(miss)[0])
        raise BayesobsInputError(f"{_where(df, i)}, column {col!r}: value is missing")
    if col == "run":
        num = pd.to_numeric(s, errors="coerce")
        if num.notna().all() and (num == np.round(num)).all():
            return num.astype(np.int64)
        return s.astype(str)
    if pd.api.types.is_float_dtype(s) and (s == np.round(s)).all():
        s = s.astype(np.int64)
    return s.astype(str).str.strip()


def apply_mapping(df: pd.DataFrame, mapping: Mapping[str, str] | None) -> pd.DataFrame:
    """Add column NEW from OLD for each ``NEW=OLD`` entry.

    ``OLD`` is a column name, ``@file`` (the name of the file the row came
    from, for exports with one file per participant) or, if no column has
    that name, an expression over the columns (e.g.
    ``response=keyDuration/1000``; see :mod:`bayesobs.expr`: never
    evaluated as Python).  A quoted constant (``task='numerosity'``) fills
    every row.  The source columns are kept, so a row filter may name either.

    Parameters
    ----------
    df : DataFrame
        Raw trials.
    mapping : Mapping of str to str, optional
        ``{NEW: OLD}``; None or empty returns ``df`` unchanged.

    Returns
    -------
    DataFrame
        A copy of ``df`` with each NEW column added (or replaced).

    Raises
    ------
    ExpressionError
        When OLD is neither a column nor a valid expression over the columns.
    """
    if not mapping:
        return df
    out = df.copy()
    for new, old in mapping.items():
        old = old.strip()
        if old == "@file" and _SRC in df.columns:  # one file per participant: the file's name
            out[new] = df[_SRC].map(lambda p: Path(p).stem)
            continue
        if old in df.columns:
            out[new] = df[old]
            continue
        try:
            out[new] = evaluate(old, df, lambda i: _where(df, i))
        except ExpressionError as exc:
            reason = exc.reason
            if reason.startswith("no column named"):
                reason += (
                    f", so {old!r} is neither a column nor a valid expression "
                    f"(columns: {_columns_shown(df)})"
                )
            raise exc.named(f"--map {new}={old}:", reason=reason) from None
    return out


def _columns_shown(df: pd.DataFrame, most: int = 20) -> str:
    cols = [str(c) for c in df.columns if not str(c).startswith("_")]
    return ", ".join(cols[:most]) + (f", ... ({len(cols)} in all)" if len(cols) > most else "")


def parse_mapping(items: Iterable[str] | None) -> dict[str, str]:
    """Parse ``["NEW=OLD", ...]`` (as given to ``--map``) into a dict.

    Parameters
    ----------
    items : iterable of str, optional
        The ``NEW=OLD`` entries; None gives an empty mapping.

    Returns
    -------
    dict of str to str
        ``{NEW: OLD}``, both stripped; a later entry for the same NEW wins.

    Raises
    ------
    BayesobsInputError
        When an entry lacks ``=`` or either side is empty.
    """
    mapping: dict[str, str] = {}
    for item in items or ():
        new, sep, old = item.partition("=")
        if not sep or not new.strip() or not old.strip():
            raise BayesobsInputError(f"--map {item!r}: expected NEW=OLD, e.g. response=repDur")
        mapping[new.strip()] = old.strip()
    return mapping


def _filter(df: pd.DataFrame, expr: str, what: str) -> np.ndarray:
    """The rows where ``expr`` holds: a true/false value per row, or one clear error."""
    try:
        mask = evaluate(expr, df, lambda i: _where(df, i))
    except ExpressionError as exc:
        reason = exc.reason
        if reason.startswith("no column named"):
            reason += f" (columns: {_columns_shown(df)})"
        raise exc.named(what, lead="cannot evaluate: ", reason=reason) from None
    if not isinstance(mask, pd.Series):
        raise ExpressionError(
            expr,
            None,
            "is not a condition on each row (it names no column, so it is the same "
            f'for every row: {_plain(mask)!r}); e.g. {what} "valid == 1"',
            what,
        )
    if not pd.api.types.is_bool_dtype(mask):
        raise ExpressionError(
            expr, None, "is not a true/false condition (compare it, e.g. x == 1)", what
        )
    return mask.to_numpy(dtype=bool)


def normalize_trials(
    df: pd.DataFrame,
    mapping: Mapping[str, str] | None = None,
    where: str | None = None,
    missing_where: str | None = None,
    source: str = "<table>",
    keep_catch: bool = False,
) -> pd.DataFrame:
    """Validate a trial table and return it in canonical form.

    Parameters
    ----------
    df : DataFrame
        Raw trials (any column names).
    mapping : dict, optional
        ``{NEW: OLD}``: add column NEW from column (or expression) OLD.
    where : str, optional
        Keep only rows where this pandas expression is true.
    missing_where : str, optional
        Treat the response as missing (kept in the sequence, no likelihood
        term) where this expression is true, e.g. ``"valid == 0"``.
    source : str
        Name used in error messages when ``df`` has no ``_source`` column.
    keep_catch : bool
        Keep catch trials (a true ``catch`` column), for
        :func:`bayesobs.exclusions.exclude`; by default they are removed, as
        they are never fitted or scored.

    Returns
    -------
    DataFrame
        Sorted by cell, session, run and trial, with every key column present,
        ``stimulus``/``response`` as float and a zero-based ``trial`` order.

    Raises
    ------
    BayesobsInputError
        With a one-line message naming file, row and column.
    """
    df = df.reset_index(drop=True)
    if _SRC not in df.columns:
        df[_SRC] = source
    if _ROW not in df.columns:
        df[_ROW] = np.arange(1, len(df) + 1)
    if len(df) == 0:
        raise BayesobsInputError(f"{source}: no trials")
    df = apply_mapping(df, mapping)
    if where:
        df = df.loc[_filter(df, where, "--where")].reset_index(drop=True)
        if len(df) == 0:
            raise BayesobsInputError(f"--where {where!r}: no trials left")
    if not keep_catch and "catch" in df.columns:
        # attention-check trials are never fitted or scored (bayesobs.exclusions)
        df = df.loc[~catch_rows(df)].reset_index(drop=True)
        if len(df) == 0:
            raise BayesobsInputError(f"{source}: only catch trials")
    srcs = ", ".join(str(v) for v in df[_SRC].unique())  # not a string per row
    # a visual-search table (set_size, correct) is complete without stimulus/response
    for col, search_col in (("stimulus", "set_size"), ("response", "correct")):
        if col not in df.columns and {"set_size", "correct"} <= set(df.columns):
            df[col] = df[search_col]
    for col in REQUIRED:
        if col not in df.columns:
            cols = ", ".join(str(c) for c in df.columns if not str(c).startswith("_"))
            raise BayesobsInputError(
                f"{srcs}: missing required column {col!r} (columns: {cols}; "
                f"use --map {col}=YOUR_COLUMN)"
            )
    df["stimulus"] = _numeric(df, "stimulus", allow_missing=False)
    df["response"] = _numeric(df, "response", allow_missing=True)
    if missing_where:
        df.loc[_filter(df, missing_where, "--missing-where"), "response"] = np.nan
    for col, default in DEFAULTS.items():
        df[col] = _as_key(df, col) if col in df.columns else default
    if "trial" in df.columns:
        df["trial"] = _numeric(df, "trial", allow_missing=False)
    else:
        # Row order within a run *of each file*: two files that lack the keys
        # telling them apart collide below instead of silently merging.
        df["trial"] = df.groupby([*RUN_KEYS, _SRC], sort=False, observed=True).cumcount()
    for col in ("range_low", "range_high", "blur_sigma"):
        if col in df.columns:
            df[col] = _numeric(df, col, allow_missing=True)
    # Sort, check duplicates and number the trials on integer codes: on a
    # 2-million-row table pandas' multi-key sort and groupby of text columns
    # cost hundreds of MB.
    codes = np.stack([pd.factorize(df[k], sort=True)[0].astype(np.int32) for k in TRIAL_KEYS])
    order = np.lexsort(codes[::-1])  # stable
    codes = codes[:, order]
    changed = codes[:, 1:] != codes[:, :-1]
    same = ~changed.any(axis=0)
    new_run = np.concatenate([[True], changed[: len(RUN_KEYS)].any(axis=0)])
    del codes, changed
    if same.any():
        dup = np.zeros(len(df), dtype=bool)
        dup[order[1:][same]] = True
        dup[order[:-1][same]] = True
        first = df.loc[dup].sort_values(list(TRIAL_KEYS) + [_SRC, _ROW]).index[:2]
        a, b = (int(df.index.get_loc(i)) for i in first)
        key = ", ".join(f"{k}={_plain(df[k].iat[a])!r}" for k in TRIAL_KEYS)
        raise BayesobsInputError(
            f"{_where(df, b)}, columns (cell, session, run, trial): duplicate trial {key} "
            f"(also at {_where(df, a)})"
        )
    # column by column, each freed once taken, so the table is never held twice; in linear
    # time (``del df[c]`` column by column is quadratic in the number of columns)
    parts = {c: s for c, s in df.items() if c not in (_SRC, _ROW)}
    del df
    cols = {c: parts.pop(c).take(order).reset_index(drop=True) for c in list(parts)}
    starts = np.flatnonzero(new_run)
    cols["trial"] = pd.Series(
        np.arange(len(order)) - np.repeat(starts, np.diff(np.append(starts, len(order)))),
        dtype=np.int64,
    )
    df = pd.DataFrame(cols, copy=False)
    front = [*TRIAL_KEYS, "stimulus", "response", *(c for c in OPTIONAL if c in df.columns)]
    rest = [c for c in df.columns if c not in front and c not in (_SRC, _ROW)]
    return df[front + rest]


def read_trials(
    paths: str | Path | Sequence[str | Path],
    mapping: Mapping[str, str] | None = None,
    where: str | None = None,
    missing_where: str | None = None,
    columns: Sequence[str] | None = None,
    keep_catch: bool = False,
    wide: str | None = None,
) -> pd.DataFrame:
    """Read trial files (CSV, TSV, Parquet, JSONL, JSON, JATOS's .jrzip/.txt, experiment folders).

    Files are concatenated before mapping, filtering and validation, so the
    same ``mapping`` applies to every file.  See :func:`normalize_trials`.
    A CSV row whose field count differs from the header's is an error naming
    the file and line; ``columns`` names every field of headerless-or-short-
    header CSVs instead (their header line is skipped).

    Parameters
    ----------
    paths : str, Path or sequence of them
        The trial files or experiment folders (a folder is read through its
        ``trials.jsonl``; torn lines there are skipped with a warning).
    mapping : Mapping of str to str, optional
        ``{NEW: OLD}`` column mapping, as in :func:`apply_mapping`.
    where : str, optional
        Keep only the rows where this expression is true.
    missing_where : str, optional
        Treat the response as missing where this expression is true.
    columns : sequence of str, optional
        Names of every field of a CSV; its own header line is then skipped.
    keep_catch : bool
        Keep catch trials (default False: they are removed).
    wide : str, optional
        Comma-separated globs of the participants' columns of a wide table
        (``--wide``): melted into ``subject`` and ``response`` before the
        mapping (:func:`bayesobs.order.melt_wide`).

    Returns
    -------
    DataFrame
        The canonical trial table of :func:`normalize_trials`.

    Raises
    ------
    BayesobsInputError
        When no path is given, a file is missing, empty, of an unknown type,
        not UTF-8 text or malformed, or a value is invalid (the message names
        file, row and column).
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    if not paths:
        raise BayesobsInputError("no trial files given")
    frames = [_read_one(Path(p), columns)[0] for p in paths]
    check("rows", sum(len(f) for f in frames), "the trial files hold")
    if len(frames) > 1:
        sources = union_categoricals([f[_SRC].array for f in frames])
        df = pd.concat(frames, ignore_index=True, sort=False)
        df[_SRC] = sources
    else:
        df = frames[0]
    del frames
    df = drop_resaved(df)  # jsPsych rows saved as they came and again at the end
    if wide:  # one column per participant: melted before the mapping sees it
        df = melt_wide(df, wide)
    return normalize_trials(
        df, mapping=mapping, where=where, missing_where=missing_where, keep_catch=keep_catch
    )


def write_trials(df: pd.DataFrame, path: str | Path) -> Path:
    """Write a trial table as CSV, Parquet or JSONL according to the suffix.

    Parameters
    ----------
    df : DataFrame
        The trial table.
    path : str or Path
        Where to write it: ``.csv``, ``.parquet``/``.pq`` or
        ``.jsonl``/``.ndjson`` (NaN is written as null); its folder is made
        if absent.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    BayesobsInputError
        When the suffix is none of these.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    suffix = path.suffix.lower()
    if suffix == ".csv":
        df.to_csv(path, index=False)
    elif suffix in (".parquet", ".pq"):
        df.to_parquet(path, index=False)
    elif suffix in (".jsonl", ".ndjson"):
        with path.open("w") as fh:
            for rec in df.to_dict(orient="records"):
                rec = {k: _json_value(v) for k, v in rec.items()}  # NaN -> null: strict JSON
                fh.write(json.dumps(rec, default=_json_default, allow_nan=False) + "\n")
    else:
        raise BayesobsInputError(f"{path}: unknown file type (use .csv, .parquet or .jsonl)")
    return path


def write_csv(df: pd.DataFrame, path: str | Path) -> Path:
    """Write a result table as CSV atomically (``PATH.part``, then renamed).

    A reader never sees a half-written file; every table the package writes
    goes through here.

    Parameters
    ----------
    df : DataFrame
        The table, written without its index.
    path : str or Path
        The CSV file; its folder must exist.

    Returns
    -------
    Path
        ``path``.
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".part")
    df.to_csv(tmp, index=False)
    tmp.replace(path)
    return path


def _json_value(v):
    if isinstance(v, (float, np.floating)) and not np.isfinite(v):
        return None
    return v


def _json_default(v):
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, pd.Timestamp):
        return v.isoformat()
    raise TypeError(f"cannot write {type(v).__name__} to JSON")


RUN_KEYS: tuple[str, ...] = (*CELL_KEYS, "session", "run")


def runs_summary(trials: pd.DataFrame, mapping: Mapping[str, str] | None = None) -> str:
    """One line: which columns formed session runs, how many runs, trials per run.

    Only the keys that take more than one value are named (the others are
    constant and split nothing); a key taken from another column by
    ``mapping`` (``--map run=NB``) is shown with its source, e.g.
    ``runs: subject (<- NSub) x condition x run (<- NB) -> 56 runs, 40 trials each``.

    Parameters
    ----------
    trials : DataFrame
        A trial table.
    mapping : Mapping of str to str, optional
        The ``--map`` entries, to show where a key came from.

    Returns
    -------
    str
        The summary line (``"runs: none (no trials)"`` for an empty table).
    """
    mapping = mapping or {}
    if not len(trials):
        return "runs: none (no trials)"
    varying = [k for k in RUN_KEYS if k in trials.columns and trials[k].nunique(dropna=False) > 1]
    named = [f"{k} (<- {mapping[k]})" if k in mapping else k for k in varying]
    sizes = trials.groupby([k for k in RUN_KEYS if k in trials.columns], sort=False).size()
    lo, hi = int(sizes.min()), int(sizes.max())
    each = (
        f"{lo} trials each" if lo == hi else f"{lo}-{hi} trials each (median {int(sizes.median())})"
    )
    keys = " x ".join(named) if named else "one run (no key varies)"
    return f"runs: {keys} -> {len(sizes)} run(s), {each}"
