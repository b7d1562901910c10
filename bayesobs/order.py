"""Trial order: wide tables (a column per participant) and rows in no presentation order."""

from __future__ import annotations

import fnmatch

import numpy as np
import pandas as pd

from .errors import BayesobsInputError

#: the trial-table column of rows in no presentation order (``--no-order``)
COLUMN = "no_trial_order"
#: what the sequential outputs say where the rows have no trial order
NOTE = (
    "no real trial order (--no-order, column no_trial_order): the Kalman variants, "
    "P(sequential), the anchoring control and the trial-by-trial figure read the rows' order "
    "in the file as the order of presentation, which it is not; read them as undefined there"
)


def unordered(trials: pd.DataFrame) -> pd.Series:
    """Which rows have no presentation order (a true ``no_trial_order``)."""
    if COLUMN not in trials:
        return pd.Series(False, index=trials.index)
    col = trials[COLUMN]
    if pd.api.types.is_bool_dtype(col):  # as --no-order sets it
        return col.fillna(False).astype(bool)
    text = col.astype(str).str.strip().str.lower()
    return col.notna() & text.isin(["true", "1", "1.0", "yes"])


def melt_wide(df: pd.DataFrame, patterns: str) -> pd.DataFrame:
    """A wide table (one response column per participant) as one row per participant and row."""
    pats = [p.strip() for p in patterns.split(",") if p.strip()]
    wide = [c for c in df.columns if any(fnmatch.fnmatchcase(str(c), p) for p in pats)]
    cols = ", ".join(str(c) for c in df.columns if not str(c).startswith("_"))
    if not wide:
        raise BayesobsInputError(f"--wide {patterns!r}: no column matches (columns: {cols})")
    clash = [c for c in ("subject", "response") if c in df.columns and c not in wide]
    if clash:
        raise BayesobsInputError(
            f"--wide {patterns!r}: the table already has a column {clash[0]!r}; the wide columns "
            "become subject and response"
        )
    keep = [c for c in df.columns if c not in wide]
    return df.melt(id_vars=keep, value_vars=wide, var_name="subject", value_name="response")


def grouped_runs(trials: pd.DataFrame, keys) -> tuple[int, int]:
    """How many runs look sorted or grouped by stimulus, of how many (a hint for ``--no-order``)."""
    rid = trials.groupby(list(keys), sort=False, observed=True).ngroup().to_numpy()
    x = trials["stimulus"].to_numpy(float)
    total = int(rid.max()) + 1 if len(rid) else 0
    inside = rid[1:] == rid[:-1]  # consecutive rows of one run (the table is sorted by run)
    d, r = np.diff(x)[inside], rid[1:][inside]

    def per_run(w):
        return np.bincount(r, weights=w, minlength=total)

    n = np.bincount(rid, minlength=total)
    changes, up, down = per_run(d != 0), per_run(d > 0), per_run(d < 0)
    counts = pd.DataFrame({"r": rid, "x": x}).value_counts()
    p2 = (counts**2).groupby(level="r").sum().reindex(range(total)).to_numpy() / n**2
    expected = (n - 1) * (1.0 - p2)
    grouped = (n >= 8) & (changes > 0) & ((up == 0) | (down == 0) | (changes < expected / 3))
    return int(grouped.sum()), total


def order_lines(trials: pd.DataFrame, keys) -> list[str]:
    """What ``fit`` and ``score`` say about the rows' order: :data:`NOTE`, or a hint."""
    if unordered(trials).any():
        return [NOTE]
    g, n = grouped_runs(trials, keys)
    if not g:
        return []
    return [
        f"the stimuli of {g} of {n} run(s) are sorted or grouped by value, as in rows stored by "
        "condition: the sequential models (Kalman, P(sequential), the anchoring control) read "
        "the rows' order as the order of presentation; if it is not, pass --no-order"
    ]


__all__ = ["COLUMN", "NOTE", "grouped_runs", "melt_wide", "order_lines", "unordered"]
