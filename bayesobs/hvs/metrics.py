"""HVSBench-style metrics, random baselines and the Table 3 layout (``hvs.csv``)."""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np
import pandas as pd

from .multimatch import multimatch
from .questions import n_choice_chance
from .standardise import DEFAULT_SCANPATH, standardise

SCREEN = (1680, 1050)
MAX_PRED_FIX = 6
FIELD_ORDER = ("Prominence", "Subitizing", "Prioritizing", "Free-viewing", "Searching")
TABLE_COLUMNS = (
    "Overall Acc",
    "Prominence Q1 Acc",
    "Subitizing Q2 Acc",
    "Subitizing Q2 MAE",
    "Subitizing Q2 RMSE",
    "Prioritizing Q3-Q7 Acc",
    "Free-viewing Q8,Q10 Acc",
    "Free-viewing Q9 M-Dir",
    "Free-viewing Q9 M-Pos",
    "Searching Q11,Q13 Acc",
    "Searching Q12 M-Dir",
    "Searching Q12 M-Pos",
)
ACC_TYPES = ("Q1", "Q2", "Q3", "Q4", "Q5", "Q6", "Q7", "Q8", "Q10", "Q11", "Q13")


def count_metrics(gold: Sequence[float], pred: Sequence[float]) -> dict[str, float]:
    """Accuracy, MAE and RMSE of counts."""
    g, p = np.asarray(gold, dtype=float), np.asarray(pred, dtype=float)
    if g.shape != p.shape or g.size == 0:
        raise ValueError("count_metrics: gold and pred need the same, non-zero length")
    err = p - g
    return {
        "acc": float(np.mean(p == g)),
        "mae": float(np.mean(np.abs(err))),
        "rmse": float(np.sqrt(np.mean(err**2))),
    }


def _pixels(sp: dict, screen: tuple[float, float], cut: int | None) -> list[tuple]:
    xs, ys, ts = sp["X"], sp["Y"], sp["T"]
    if len(xs) == 0:
        xs, ys, ts = DEFAULT_SCANPATH["X"], DEFAULT_SCANPATH["Y"], DEFAULT_SCANPATH["T"]
    fix = [
        (float(x) * screen[0], float(y) * screen[1], max(0.0, float(t)))
        for x, y, t in zip(xs, ys, ts, strict=True)
    ]
    return fix[:cut] if cut else fix


def scanpath_score(
    pred: dict, humans: Sequence[dict], screen: tuple[float, float] = SCREEN
) -> dict[str, float]:
    """M-Dir and M-Pos of a predicted scanpath against an image's human scanpaths."""
    if not humans:
        raise ValueError("scanpath_score: no human scanpaths to compare with")
    p = _pixels(pred, screen, MAX_PRED_FIX)
    scores = [multimatch(p, _pixels(h, screen, None), screen) for h in humans]
    return {
        "m_dir": float(np.mean([s["direction"] for s in scores])),
        "m_pos": float(np.mean([s["position"] for s in scores])),
    }


def score_replies(
    records: Sequence[dict], replies: Sequence[str | None], screen: tuple[float, float] = SCREEN
) -> pd.DataFrame:
    """Standardise and score replies to HVSBench-style questions."""
    if len(records) != len(replies):
        raise ValueError(f"score_replies: {len(records)} records but {len(replies)} replies")
    rows = []
    for rec, reply in zip(records, replies, strict=True):
        pred = standardise(rec["kind"], reply)
        row = _score_row(rec, pred)
        if rec["kind"] == "scanpath":
            row.update(scanpath_score(pred, rec["data"]["humans"], screen))
        else:
            row["correct"] = bool(pred == rec["answer"])
        rows.append(row)
    return pd.DataFrame(rows)


def _score_row(rec: dict, pred) -> dict:
    """A question's row before scoring: its identity, gold and prediction, no scores yet."""
    return {
        "qid": rec["qid"],
        "qtype": rec["qtype"],
        "field": rec["field"],
        "kind": rec["kind"],
        "gold": rec["answer"],
        "pred": pred,
        "correct": np.nan,
        "m_dir": np.nan,
        "m_pos": np.nan,
    }


def accuracy_by_type(scored: pd.DataFrame) -> pd.Series:
    """Accuracy per question type (accuracy-scored types only), in Q order."""
    acc = scored[scored["qtype"].isin(ACC_TYPES)]
    out = acc.groupby("qtype")["correct"].mean().astype(float)
    return out.reindex([q for q in ACC_TYPES if q in out.index])


def _mean(series: pd.Series) -> float:
    return float(series.astype(float).mean()) if len(series) else float("nan")


def hvs_table(scored: pd.DataFrame, label: str = "model") -> pd.DataFrame:
    """One row in the layout of the paper's Table 3 (``hvs.csv``)."""
    q = scored["qtype"]
    accq = scored[q.isin(ACC_TYPES)]
    q2 = scored[q == "Q2"]
    row = {
        "Overall Acc": _mean(accq["correct"]),
        "Prominence Q1 Acc": _mean(scored.loc[q == "Q1", "correct"]),
        "Subitizing Q2 Acc": _mean(q2["correct"]),
        "Subitizing Q2 MAE": np.nan,
        "Subitizing Q2 RMSE": np.nan,
        "Prioritizing Q3-Q7 Acc": _mean(
            scored.loc[q.isin(["Q3", "Q4", "Q5", "Q6", "Q7"]), "correct"]
        ),
        "Free-viewing Q8,Q10 Acc": _mean(scored.loc[q.isin(["Q8", "Q10"]), "correct"]),
        "Free-viewing Q9 M-Dir": _mean(scored.loc[q == "Q9", "m_dir"]),
        "Free-viewing Q9 M-Pos": _mean(scored.loc[q == "Q9", "m_pos"]),
        "Searching Q11,Q13 Acc": _mean(scored.loc[q.isin(["Q11", "Q13"]), "correct"]),
        "Searching Q12 M-Dir": _mean(scored.loc[q == "Q12", "m_dir"]),
        "Searching Q12 M-Pos": _mean(scored.loc[q == "Q12", "m_pos"]),
    }
    if "abs_err" in q2 and len(q2):
        row["Subitizing Q2 MAE"] = float(q2["abs_err"].mean())
        row["Subitizing Q2 RMSE"] = float(np.sqrt((q2["abs_err"] ** 2).mean()))
    elif len(q2):
        m = count_metrics(q2["gold"].astype(float), q2["pred"].astype(float))
        row["Subitizing Q2 MAE"], row["Subitizing Q2 RMSE"] = m["mae"], m["rmse"]
    return pd.DataFrame([row], index=pd.Index([label], name="model"))[list(TABLE_COLUMNS)]


LABEL = "HVSBench-style (questions recreated from public data)"


def write_hvs_csv(table: pd.DataFrame, path) -> None:
    """Write a :func:`hvs_table` result (one or more rows) as ``hvs.csv`` (4 decimals)."""
    out = table.copy()
    out.insert(0, "benchmark", LABEL)
    out.to_csv(path, float_format="%.4f")


def _other_image_scanpath(rec: dict, pool: dict[str, list[dict]], rng) -> dict:
    others = [k for k in pool if k != rec["image"]]
    if not others:
        raise ValueError(f"{rec['qid']}: no other image's scanpath for the random baseline")
    key = others[int(rng.integers(len(others)))]
    return pool[key][int(rng.integers(len(pool[key])))]


def scanpath_pool(records: Sequence[dict]) -> dict[str, dict[str, list[dict]]]:
    """Human scanpaths by question type (Q9 or Q12) and image, from the Q9/Q12 records."""
    pool: dict[str, dict[str, list[dict]]] = {"Q9": {}, "Q12": {}}
    for r in records:
        if r["qtype"] in pool:
            pool[r["qtype"]].setdefault(r["image"], []).extend(r["data"]["humans"])
    return pool


def random_baseline_scores(
    records: Sequence[dict], seed: int = 0, screen: tuple[float, float] = SCREEN
) -> pd.DataFrame:
    """Per-question random baselines in the :func:`score_replies` layout."""
    counts = np.array([r["answer"] for r in records if r["qtype"] == "Q2"], dtype=float)
    p_hit = mean_count = float("nan")
    if counts.size:
        _, freq = np.unique(counts, return_counts=True)
        p_hit = float(np.sum((freq / counts.size) ** 2))
        mean_count = float(counts.mean())
    pool = scanpath_pool(records)
    rows = []
    for rec in records:
        row = {**_score_row(rec, None), "abs_err": np.nan}
        if rec["kind"] == "scanpath":
            rng = np.random.default_rng([seed, zlib.crc32(rec["qid"].encode())])
            other = _other_image_scanpath(rec, pool[rec["qtype"]], rng)
            row["pred"] = other
            row.update(scanpath_score(other, rec["data"]["humans"], screen))
        elif rec["kind"] == "count":
            row["pred"] = mean_count
            row["correct"] = p_hit
            row["abs_err"] = abs(rec["answer"] - mean_count)
        else:
            row["correct"] = n_choice_chance(rec)
        rows.append(row)
    return pd.DataFrame(rows)


__all__ = [
    "ACC_TYPES",
    "TABLE_COLUMNS",
    "accuracy_by_type",
    "count_metrics",
    "hvs_table",
    "random_baseline_scores",
    "scanpath_pool",
    "scanpath_score",
    "score_replies",
    "write_hvs_csv",
]
