"""The BayesBench leaderboard as the terminal and the HTML report show it.

Both show, per subject and number, the full-data point estimate beside the
bootstrap mean and 68% interval, mark a point estimate that falls outside its
own interval, explain in one line why that can happen, and flag subjects whose
numbers can mislead (constant responders, cells with fewer than 2 runs per
session type), from the rows of ``missing.csv``.
"""

from __future__ import annotations

import math

import pandas as pd

from .scores import CONSTANT_REASON, FEW_RUNS_REASON

# (column, digits) in the order shown: the paper's numbers, then METHOD §9's.
METRICS: tuple[tuple[str, int], ...] = (
    ("S", 3),
    ("A", 3),
    ("E", 3),
    ("C", 3),
    ("BCS", 1),
    ("S_p", 3),
    ("BCS_p", 1),
)
LEGEND: dict[str, str] = {
    "S": "BayesBench score, (A + E + C) / 3, as in the paper.",
    "A": "accuracy: per task the mean over its modalities of clip(1 - NRMSE/2, 0, 1) in the base "
    "condition, then the mean over tasks (1 = perfect, 0.5 = no better than the range midpoint).",
    "E": "efficiency: per multimodal task [RRE(Bayes oracle) + RRE(Bayes non-oracle)] / 2 in the "
    "base condition, mean over tasks; above 1 the multimodal answers beat the Bayesian "
    "combination of the text and image answers.",
    "C": "consistency, (BCS + 15) / 30.",
    "BCS": "Bayesian Consistency Score (the paper's): over 3 tasks x 5 ablations, +1 where w_prior "
    "did not fall under the ablation, -1 where it fell, 0 where w_prior > 0.9. A tie counts +1 "
    "and w_prior is clipped at 0, so an observer without any prior scores +15.",
    "BCS_p": "robust BCS (METHOD section 9): the sum over the same 15 pairs of s_p, the mean over "
    "bootstrap replicates of sign(w_prior shift) with ties and w_prior > 0.9 counted 0. An "
    "observer without a prior scores about 0, a reliable rise +15, a reliable fall -15.",
    "S_p": "(A + E + C_p) / 3 with C_p = (BCS_p + 15) / 30: S with the robust BCS.",
}
INTERVAL_NOTE = (
    "point = full data; mean [lo, hi] = bootstrap mean and 68% interval; * = point outside its "
    "own interval. They can differ because BCS, C and S add up signs, which shrink under "
    "resampling, and with one run per session type the pooled bootstrap mixes runs of different "
    "session types and has only a handful of distinct resamples (--resample stratified needs 2+ "
    "runs per type)."
)
NO_BOOTSTRAP_NOTE = "S_p and BCS_p need bootstrap replicates (--bootstrap B > 0)."


def _num(val, digits: int) -> str:
    if val is None or (isinstance(val, float) and math.isnan(val)):
        return "n/a"
    return f"{val:.{digits}f}"


def _outside(row, name: str) -> bool:
    val, lo, hi = row.get(name), row.get(f"{name}_lo"), row.get(f"{name}_hi")
    if any(v is None or v != v for v in (val, lo, hi)):
        return False
    tol = 1e-12 * max(1.0, abs(val))
    return bool(val < lo - tol or val > hi + tol)


def subject_flags(missing: pd.DataFrame | None) -> list[str]:
    """Warnings about subjects whose numbers can mislead, from ``missing.csv`` rows.

    One line per subject with constant cells (reason
    :data:`~bayesobs.scores.CONSTANT_REASON`, one row per cell), and one line
    for all subjects with cells that have fewer than 2 runs per session type
    (reason :data:`~bayesobs.scores.FEW_RUNS_REASON`, one row per subject and
    task).
    """
    lines: list[str] = []
    if missing is None or missing.empty or "reason" not in missing:
        return lines
    m = missing.fillna("").astype({"subject": str, "component": str, "reason": str})
    fits = m[(m["reason"] == CONSTANT_REASON) & m["component"].str.startswith("fits ")]
    for subject, g in fits.groupby("subject", sort=True):
        base = int(g["component"].str.endswith(" base").sum())
        lines.append(
            f"{subject}: {CONSTANT_REASON} in {base} base cell(s) ({len(g)} cell(s) in all): "
            "no evidence and no BCS from them (METHOD section 8); its E compares constant answers and says "
            "nothing about cue combination"
        )
    few = m[m["reason"] == FEW_RUNS_REASON]
    if len(few):
        n = few["component"].str.extract(r"(\d+) of \d+").astype(float).sum()
        subjects = sorted(few["subject"].unique())
        names = ", ".join(subjects[:4]) + (
            f" and {len(subjects) - 4} more" if len(subjects) > 4 else ""
        )
        lines.append(
            f"{FEW_RUNS_REASON} in {int(n[0])} cell(s) of {len(subjects)} "
            f"subject(s) ({names}): the bootstrap intervals rest on few distinct resamples"
        )
    return lines


def board(bayesbench: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Header and rows (strings) of the leaderboard, best ``S`` first.

    Each number gets its point estimate and, with replicates, a column
    ``mean [lo, hi]``; ``*`` marks a point estimate outside its interval.
    """
    rows = bayesbench.sort_values("S", ascending=False, na_position="last")
    boot = "S_mean" in bayesbench
    header = ["rank", "subject"]
    for name, _ in METRICS:
        header += [name, f"{name} mean [68%]"] if boot else [name]
    lines = []
    for i, (_, r) in enumerate(rows.iterrows()):
        line = [str(i + 1), str(r["subject"])]
        for name, d in METRICS:
            point = _num(r.get(name), d) + ("*" if _outside(r, name) else "")
            line.append(point)
            if boot:
                mean, lo, hi = (r.get(f"{name}_{k}") for k in ("mean", "lo", "hi"))
                line.append(
                    "n/a"
                    if mean is None or mean != mean
                    else f"{_num(mean, d)} [{_num(lo, d)}, {_num(hi, d)}]"
                )
        lines.append(line)
    return header, lines


def leaderboard_text(bayesbench: pd.DataFrame, missing: pd.DataFrame | None = None) -> str:
    """Plain-text leaderboard: the table, the interval note and the subjects' flags."""
    header, lines = board(bayesbench)
    widths = [max(len(x) for x in col) for col in zip(header, *lines, strict=True)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [fmt.format(*header), *(fmt.format(*ln) for ln in lines)]
    out.append(f"note: {INTERVAL_NOTE}" if "S_mean" in bayesbench else f"note: {NO_BOOTSTRAP_NOTE}")
    out += [f"warning: {line} (see missing.csv)" for line in subject_flags(missing)]
    return "\n".join(out)


__all__ = ["LEGEND", "METRICS", "board", "leaderboard_text", "subject_flags"]
