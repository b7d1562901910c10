"""Visual-search analyses (pop-out vs conjunction): accuracy, set-size effect, response bias.

Input: a trial table of search trials with, per trial, ``set_size`` (number
of distractors), ``correct`` (1/0), and for the cell answer mode
``target_cell`` and ``response_cell`` (e.g. ``"0,1"``; ``response_cell`` is
``"invalid"`` for a reply that names no valid cell); optionally ``error_px``
(Euclidean error of an ``(x, y)`` answer).  Grouping keys are ``subject``,
``task`` and ``condition``.

* Accuracy by condition and set size with 95% Wilson intervals, and mean
  coordinate error with a 95% t interval.
* The set-size effect per subject x task x condition: the point-biserial
  correlation of correctness with set size, its p-value Bonferroni-corrected
  across the table, and the slope of a logistic regression of correctness on
  set size (maximum likelihood, no penalty).
* Response bias per subject x task x cell: precision, recall and selection
  rate of each cell, and the rate of invalid answers.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

KEYS = ["subject", "task", "condition"]
Z95 = stats.norm.ppf(0.975)


def wilson(k: np.ndarray, n: np.ndarray, z: float = Z95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval of a binomial proportion ``k / n``."""
    k, n = np.asarray(k, float), np.asarray(n, float)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # lo <= p <= hi holds exactly; clip the rounding at k = 0 and k = n
    return np.clip(centre - half, 0.0, p), np.clip(centre + half, p, 1.0)


def search_accuracy(trials: pd.DataFrame) -> pd.DataFrame:
    """Accuracy (95% Wilson interval) and coordinate error (95% t interval) by condition x set size."""
    g = trials.groupby([*KEYS, "set_size"], sort=True)
    out = g["correct"].agg(n="size", k="sum").reset_index()
    out["accuracy"] = out["k"] / out["n"]
    out["acc_lo"], out["acc_hi"] = wilson(out["k"], out["n"])
    if "error_px" in trials.columns:
        e = g["error_px"].agg(["mean", "std", "count"]).reset_index(drop=True)
        half = stats.t.ppf(0.975, np.maximum(e["count"] - 1, 1)) * e["std"] / np.sqrt(e["count"])
        out["error_px"], out["error_lo"], out["error_hi"] = (
            e["mean"],
            e["mean"] - half,
            e["mean"] + half,
        )
    return out.drop(columns="k")


def logistic_slope(x: np.ndarray, y: np.ndarray) -> float:
    """Maximum-likelihood slope ``b`` of ``logit P(y = 1) = a + b x`` (NaN if not identified)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if np.ptp(x) == 0 or y.min() == y.max():
        return np.nan  # no variation, or perfect accuracy: the slope is not identified
    X = np.column_stack([np.ones_like(x), (x - x.mean()) / x.std()])
    beta = np.zeros(2)
    for _ in range(100):  # Newton-Raphson (IRLS): the log-likelihood is concave
        p = 1 / (1 + np.exp(-X @ beta))
        step = np.linalg.solve(X.T @ (X * (p * (1 - p))[:, None]), X.T @ (y - p))
        beta += step
        if np.abs(step).max() < 1e-12:
            break
        if np.abs(beta).max() > 50:  # separation: the maximum is at infinity
            return np.nan
    return float(beta[1] / x.std())


def set_size_effect(trials: pd.DataFrame) -> pd.DataFrame:
    """``search.csv``: subject, task, condition, n, accuracy, r, p, p_bonferroni, logistic_slope."""
    rows = []
    for key, g in trials.groupby(KEYS, sort=True):
        y = g["correct"].to_numpy(float)
        x = g["set_size"].to_numpy(float)
        if np.ptp(x) > 0 and 0 < y.mean() < 1:
            r, p = stats.pointbiserialr(y, x)
        else:
            r, p = np.nan, np.nan
        rows.append({**dict(zip(KEYS, key, strict=True)), "n": len(g), "accuracy": y.mean(), "r": r, "p": p,
                     "logistic_slope": logistic_slope(x, y)})  # fmt: skip
    out = pd.DataFrame(rows, columns=[*KEYS, "n", "accuracy", "r", "p", "logistic_slope"])
    tests = out["p"].notna().sum()
    out.insert(6, "p_bonferroni", np.minimum(out["p"] * tests, 1.0))
    return out


def response_bias(trials: pd.DataFrame, cells=("0,0", "0,1", "1,0", "1,1")) -> pd.DataFrame:
    """``search_bias.csv``: per subject x task x cell, precision, recall, selection rate; invalid-answer rate."""
    rows = []
    for (subject, task), g in trials.groupby(["subject", "task"], sort=True):
        resp = g["response_cell"].astype(str)
        target = g["target_cell"].astype(str)
        invalid = float((~resp.isin(cells)).mean())
        for c in cells:
            chosen, true = resp == c, target == c
            hit = (chosen & true).sum()
            rows.append({"subject": subject, "task": task, "cell": c,
                         "precision": hit / chosen.sum() if chosen.any() else np.nan,
                         "recall": hit / true.sum() if true.any() else np.nan,
                         "selected": float(chosen.mean()), "invalid": invalid})  # fmt: skip
    return pd.DataFrame(
        rows, columns=["subject", "task", "cell", "precision", "recall", "selected", "invalid"]
    )
