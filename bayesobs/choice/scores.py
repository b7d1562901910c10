"""Accuracy by level of right/wrong tables (``choice.csv``)."""

from __future__ import annotations

import pandas as pd

from ..intervals import wilson
from ..trials import paradigm_rows

KEYS = ["subject", "task", "modality", "condition", "level"]


def choice_scores(trials: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """``choice.csv``: per subject, task, modality, condition and level, right answers and chance.

    Parameters
    ----------
    trials : DataFrame
        A trial table (its rows of paradigm ``choice`` are used; an invalid reply is wrong).

    Returns
    -------
    dict of str to DataFrame
        ``{"choice": table}``: ``n``, ``k`` (right), ``accuracy`` with its Wilson 95% interval
        (``lo``, ``hi``) and ``chance``.
    """
    t = trials[paradigm_rows(trials, "choice")].copy()
    if t.empty:
        return {}
    t["k"] = pd.to_numeric(t["correct"], errors="coerce").fillna(0.0)
    t["level"] = pd.to_numeric(t["level"], errors="coerce")
    g = t.groupby(KEYS, sort=True).agg(n=("k", "size"), k=("k", "sum"), chance=("chance", "mean"))
    out = g.reset_index()
    out["k"] = out["k"].astype(int)
    out["accuracy"] = out["k"] / out["n"]
    out["lo"], out["hi"] = wilson(out["k"].to_numpy(), out["n"].to_numpy())
    return {"choice": out}
