"""``hvs.csv`` from logged trials: HVSBench-style scores per subject and condition.

The runner's ``hvs`` task (:class:`bayesobs.hvs.tasks.HvsTask`) logs, per
trial, the question type and the scores :func:`bayesobs.hvs.score_replies`
would give (``correct``, ``m_dir``, ``m_pos``, ``abs_err``) and the
question's random baseline (``chance_*``).  :func:`hvs_scores` pools them in
the layout of the paper's Table 3 (:func:`bayesobs.hvs.hvs_table`): one row
per subject and condition, and per condition one row ``random baseline``
holding the expected scores of a uniform guesser on the same questions
(:func:`bayesobs.hvs.random_baseline_scores`).

Every row is labelled in the column ``benchmark``: "HVSBench-style
(questions recreated from public data)", or, for questions built from the
synthetic fixture, the fixture note (never a benchmark score).
"""

from __future__ import annotations

import pandas as pd

from ..trials import paradigm_rows
from .fixture import FIXTURE_NOTE
from .metrics import LABEL, TABLE_COLUMNS, hvs_table

BASELINE = "random baseline"
KEYS = ["benchmark", "model", "subject", "condition"]
SCORE_COLUMNS = ("correct", "m_dir", "m_pos", "abs_err")
CHANCE = {f"chance_{c}": c for c in SCORE_COLUMNS}


def is_hvs(trials: pd.DataFrame) -> pd.Series:
    """Which rows are HVSBench-style trials (``paradigm == "hvs"``, as the runner writes).

    Parameters
    ----------
    trials : DataFrame
        A trial table.

    Returns
    -------
    pandas.Series
        One bool per row (the table's index).
    """
    return paradigm_rows(trials, "hvs")


def _label(data) -> str:
    return FIXTURE_NOTE if data == "fixture" else LABEL


def _scored(rows: pd.DataFrame, chance: bool) -> pd.DataFrame:
    """The :func:`score_replies` columns ``hvs_table`` reads (observed or expected scores)."""
    out = pd.DataFrame({"qtype": rows["qtype"].astype(str).to_numpy()})
    for col in SCORE_COLUMNS:
        src = f"chance_{col}" if chance else col
        vals = rows[src] if src in rows.columns else pd.Series(float("nan"), index=rows.index)
        out[col] = pd.to_numeric(vals, errors="coerce").to_numpy(dtype=float)
    return out


def hvs_scores(trials: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """``{"hvs": table}``: the Table 3 layout per subject and condition, plus random baselines.

    Parameters
    ----------
    trials : DataFrame
        HVS trials as the runner logs them (``qtype`` and the score and
        ``chance_*`` columns; ``hvs_data`` says fixture or public sources).

    Returns
    -------
    dict
        ``hvs``: columns ``benchmark, model, subject, condition, n_trials,
        invalid`` (share of replies the standardiser could not read) and the
        :data:`bayesobs.hvs.metrics.TABLE_COLUMNS`.  The baseline row of a
        condition pools the distinct trials (session, run, trial) logged in it.
    """
    t = trials.copy()
    if "hvs_data" not in t.columns:
        t["hvs_data"] = "public sources"
    t["hvs_data"] = t["hvs_data"].fillna("public sources")
    rows = []
    for (cond, data), g in t.groupby(["condition", "hvs_data"], sort=True):
        for subject, s in g.groupby("subject", sort=True):
            row = hvs_table(_scored(s, chance=False), str(subject)).iloc[0].to_dict()
            valid = s["valid"].astype(bool) if "valid" in s else pd.Series(True, index=s.index)
            rows.append(
                {
                    "benchmark": _label(data),
                    "model": str(subject),
                    "subject": str(subject),
                    "condition": cond,
                    "n_trials": len(s),
                    "invalid": float((~valid).mean()),
                    **row,
                }
            )
        distinct = g.drop_duplicates(["session", "run", "trial"])
        row = hvs_table(_scored(distinct, chance=True), BASELINE).iloc[0].to_dict()
        rows.append(
            {
                "benchmark": _label(data),
                "model": BASELINE,
                "subject": BASELINE,
                "condition": cond,
                "n_trials": len(distinct),
                "invalid": 0.0,
                **row,
            }
        )
    cols = [*KEYS, "n_trials", "invalid", *TABLE_COLUMNS]
    return {"hvs": pd.DataFrame(rows, columns=cols)}


def hvs_summary(table: pd.DataFrame) -> str:
    """Plain-text digest of ``hvs.csv``: overall and per-field accuracy (all columns are in the file).

    Parameters
    ----------
    table : DataFrame
        The ``hvs`` table of :func:`hvs_scores`.

    Returns
    -------
    str
        A header line, one line per row (``n/a`` for a missing score) and the
        distinct ``benchmark`` labels in parentheses.
    """
    cols = [
        "Overall Acc",
        "Prominence Q1 Acc",
        "Subitizing Q2 Acc",
        "Prioritizing Q3-Q7 Acc",
        "Free-viewing Q8,Q10 Acc",
        "Searching Q11,Q13 Acc",
    ]
    short = ["overall", "prom", "subit", "prior", "free", "search"]
    lines = [f"  {'model':<20} {'condition':<10} " + " ".join(f"{s:>7}" for s in short)]
    for _, r in table.iterrows():
        nums = " ".join("    n/a" if pd.isna(r[c]) else f"{r[c]:7.3f}" for c in cols)
        lines.append(f"  {r['model']:<20} {r['condition']:<10} {nums}")
    labels = sorted(set(table["benchmark"]))
    return "\n".join([*lines, *(f"  ({lab})" for lab in labels)])
