"""``cot_accuracy.csv``: what reasoning (``cot``) does to accuracy on the right/wrong paradigms."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..bootstrap import group_rng

BOOTSTRAP = 2000  # trial-bootstrap replicates per group
ALPHA = 0.05  # 95% percentile interval
GROUP = ["subject", "paradigm", "task", "variant", "modality", "answer"]
COLUMNS = [
    *GROUP,
    "level",
    "x",
    "n_base",
    "n_cot",
    "accuracy_base",
    "accuracy_cot",
    "delta_accuracy",
    "delta_lo",
    "delta_hi",
    "bootstrap",
]


def _resampled_means(k: np.ndarray, rng: np.random.Generator, reps: int) -> np.ndarray:
    """``reps`` resampled sums of ``k`` (0/1 per trial): the bootstrap of the right answers."""
    n = len(k)
    if n == 0:
        return np.zeros(reps)
    # resampling n trials with replacement: the number right is Binomial(n, k / n)
    return rng.binomial(n, float(np.mean(k)), size=reps).astype(float)


def cot_accuracy_table(
    per_trial: pd.DataFrame, seed: int = 0, bootstrap: int = BOOTSTRAP
) -> pd.DataFrame | None:
    """The accuracy shift under ``cot`` from :func:`bayesobs.scores.psychometric.right_wrong_trials`."""
    t = per_trial[per_trial["condition"].isin(["base", "cot"])]
    rows = []
    for key, g in t.groupby(GROUP, sort=True, dropna=False):
        if set(g["condition"]) != {"base", "cot"}:
            continue
        info = dict(zip(GROUP, key, strict=True))
        level = str(g["level"].iloc[0])
        xs = sorted(set(g["x"].dropna()))
        sums = {c: np.zeros(bootstrap) for c in ("base", "cot")}
        counts = {c: [0, 0.0] for c in ("base", "cot")}  # n, k over the levels both have
        per_level = []
        for x in xs or [np.nan]:
            at = g if np.isnan(x) else g[g["x"] == x]
            cells = {c: at.loc[at["condition"] == c, "k"].to_numpy(float) for c in sums}
            if not all(len(v) for v in cells.values()):
                continue  # a level only one condition has: left out of both
            reps = {}
            for c, k in cells.items():
                rng = group_rng(seed, ("cot_accuracy", *key, c, x))
                reps[c] = _resampled_means(k, rng, bootstrap)
                sums[c] += reps[c]
                counts[c][0] += len(k)
                counts[c][1] += k.sum()
            if xs:
                per_level.append((x, cells, reps))
        if not counts["base"][0]:
            continue
        for x, cells, reps in per_level:
            rows.append(
                _row(
                    info,
                    level,
                    x,
                    [len(v) for v in cells.values()],
                    [v.sum() for v in cells.values()],
                    reps,
                    bootstrap,
                )
            )
        rows.append(
            _row(
                info,
                level,
                np.nan,
                [counts[c][0] for c in ("base", "cot")],
                [counts[c][1] for c in ("base", "cot")],
                sums,
                bootstrap,
            )
        )
    if not rows:
        return None
    return pd.DataFrame(rows, columns=COLUMNS)


def _row(info, level, x, n, k, reps, bootstrap) -> dict:
    """One row of the table: accuracies, their difference and its interval."""
    (n_b, n_c), (k_b, k_c) = n, k
    diff = reps["cot"] / n_c - reps["base"] / n_b
    lo, hi = np.quantile(diff, [ALPHA / 2, 1 - ALPHA / 2])
    return {
        **info,
        "level": level,
        "x": x,
        "n_base": int(n_b),
        "n_cot": int(n_c),
        "accuracy_base": k_b / n_b,
        "accuracy_cot": k_c / n_c,
        "delta_accuracy": k_c / n_c - k_b / n_b,
        "delta_lo": float(lo),
        "delta_hi": float(hi),
        "bootstrap": bootstrap,
    }


def cot_accuracy(trials: pd.DataFrame, seed: int = 0, bootstrap: int = BOOTSTRAP):
    """``cot_accuracy.csv`` of a (normalised) trial table, or None without cot beside base."""
    # start-up time: psychometric loads scipy.stats, wanted only with cot trials
    from .psychometric import right_wrong_trials

    per_trial = right_wrong_trials(trials)
    if per_trial.empty or not (per_trial["condition"] == "cot").any():
        return None
    return cot_accuracy_table(per_trial, seed, bootstrap)


__all__ = ["BOOTSTRAP", "COLUMNS", "cot_accuracy", "cot_accuracy_table"]
