"""Report figures of the psychometric functions (``psychometric.csv``) and their section."""

from __future__ import annotations

import html
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd

from ..plotting import Figure, figure_axes
from ..scores.psychometric import KEYS, psi, psychometric_levels
from .render import FigureTask

CURVE_POINTS = 200
MIN_TRIALS_PER_LEVEL = 3  # fewer on average: each level's proportion is mostly 0, 1/2 or 1


def withheld_reason(row) -> str:
    """Why a group's panel is not drawn: fewer than 3 trials per level on average."""
    n, k = int(row["n_trials"]), int(row["n_levels"])
    if n >= MIN_TRIALS_PER_LEVEL * k:
        return ""
    about = "one trial" if round(n / k) <= 1 else f"{round(n / k)} trials"
    return f"withheld: about {about} per level ({k} levels, {n} trials)"


def _span(values: pd.Series) -> str:
    """``"a–b"`` of integers, or ``"a"`` when they are one."""
    lo, hi = int(values.min()), int(values.max())
    return f"{lo}" if lo == hi else f"{lo}–{hi}"


def group_levels(levels: pd.DataFrame, row) -> pd.DataFrame:
    """The rows of ``levels`` of the group of ``row`` (a ``psychometric.csv`` row), by level."""
    sel = np.ones(len(levels), bool)
    for k in KEYS:
        sel &= levels[k].map(_text).to_numpy() == _text(row[k])
    return levels[sel].sort_values("x")


def _text(v) -> str:
    """A group key as text: a CSV read back gives NaN for an empty key (e.g. ``answer``)."""
    return "" if v is None or (isinstance(v, float) and v != v) else str(v)


def split_levels(levels: pd.DataFrame) -> dict[tuple, pd.DataFrame]:
    """The rows of ``levels`` by group (the keys as text, as :func:`group_levels` compares them)."""
    keys = pd.DataFrame({k: levels[k].map(_text).to_numpy() for k in KEYS})
    positions = keys.groupby(list(KEYS), sort=False).indices
    return {tuple(k): levels.iloc[np.sort(i)] for k, i in positions.items()}


def psychometric_curve(
    row, levels: pd.DataFrame, ax=None, color="C0", label=None, grouped: bool = False
) -> Figure:
    """One fitted psychometric function over its data."""
    fig, (ax,) = figure_axes(ax, size=(4.2, 3.2))
    d = levels if grouped else group_levels(levels, row)
    x = d["x"].to_numpy(float)
    acc = d["accuracy"].to_numpy(float)
    err = np.vstack([acc - d["lo"].to_numpy(float), d["hi"].to_numpy(float) - acc])
    ax.errorbar(x, acc, yerr=err, fmt="o", ms=3.5, color=color, capsize=2, lw=0.9, label=label)
    grid = np.linspace(x.min(), x.max(), CURVE_POINTS)
    guess = np.interp(grid, x, d["guess"].to_numpy(float))
    curve = psi(
        grid, row["threshold"], row["width"], row["lapse"], guess, row["sigmoid"], row["direction"]
    )
    ax.plot(grid, curve, color=color, lw=1.6, gid="fit")
    ax.plot(grid, guess, color="#777777", ls=":", lw=1, gid="guess")
    if x.min() <= row["threshold"] <= x.max():
        ax.axvline(row["threshold"], color=color, ls="--", lw=0.8, alpha=0.6)
    ax.set_ylim(-0.02, 1.04)
    ax.set_xlabel(str(row["level"]).replace("_", " "))
    ax.set_ylabel("proportion right")
    return fig


def _title(row) -> str:
    parts = [row[k] for k in ("subject", "variant", "condition", "modality", "answer")]
    return " · ".join(str(p) for p in parts if isinstance(p, str) and p)


def psychometric_grid(table: pd.DataFrame, levels: pd.DataFrame, ncols: int = 4) -> Figure:
    """One panel per row of ``table`` (a task's groups), the fit's numbers in each title."""
    n = len(table)
    ncols = max(1, min(ncols, n))
    nrows = -(-n // ncols)
    fig = Figure(figsize=(3.1 * ncols, 2.6 * nrows), layout="constrained")
    axs = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False)).ravel()
    groups = split_levels(levels)  # each panel's rows, found once (not one pass per panel)
    none = levels.iloc[:0]
    for ax, row in zip(axs, table.to_dict("records"), strict=False):
        d = groups.get(tuple(_text(row[k]) for k in KEYS), none).sort_values("x")
        psychometric_curve(row, d, ax=ax, grouped=True)  # what group_levels would select
        ax.set_title(
            f"{textwrap.fill(_title(row), 40)}\nthreshold {row['threshold']:.3g}, lapse {row['lapse']:.2f}",
            fontsize=7,
        )
    for ax in axs[n:]:
        ax.set_visible(False)
    return fig


def psychometric_sections(res, trials: pd.DataFrame, out: Path, save, table_html):
    """The report's psychometric part: one figure per paradigm and task, then the table."""
    table = res.psychometric.copy()
    table["panel"] = [withheld_reason(r) or "drawn" for r in table.to_dict("records")]
    levels = psychometric_levels(trials)
    sections, notes = [], []
    for (paradigm, task), t in table.groupby(["paradigm", "task"], sort=True):
        w = t[t["panel"] != "drawn"]
        if len(w):  # one line per task: how many, and why
            notes.append(
                f"{task}: {len(w)} of {len(t)} panels withheld: fewer than "
                f"{MIN_TRIALS_PER_LEVEL} trials per level on average ({_span(w['n_levels'])} levels, "
                f"{_span(w['n_trials'])} trials a group); their fits are in the table (column panel)."
            )
        t = t[t["panel"] == "drawn"]
        if t.empty:
            continue
        # built and drawn on a free core (bayesobs.report.render): ~50 panels take seconds
        fig = FigureTask(psychometric_grid, (t, levels), len(t) + 1)
        sections.append(
            (
                f"Psychometric functions: {task}",
                "Proportion right per level (95% Wilson intervals) with the maximum-likelihood "
                "psychometric function guess + (1 - guess - lapse) F (cumulative normal, "
                "decreasing with the level; guess fixed at the task's chance, dotted; dashed: "
                "the threshold, where F = 0.5).",
                [save(fig, out / "figures" / f"psychometric_{paradigm}_{task}.png")],
            )
        )
    cols = [
        "subject",
        "task",
        "variant",
        "condition",
        "answer",
        "n_levels",
        "n_trials",
        "guess",
        "threshold",
        "threshold_lo",
        "threshold_hi",
        "width",
        "lapse",
        "lapse_lo",
        "lapse_hi",
        "deviance",
        "gof_p",
        "at_bound",
        "panel",
    ]
    tail = [
        "<h2>Psychometric functions</h2>",
        "<p>Per group with at least 3 levels (psychometric.csv): threshold (level where F = "
        "0.5), width (F from 0.95 to 0.05), lapse (bounded to [0, 0.5]), with 95% parametric-"
        "bootstrap intervals; gof_p compares the deviance with the deviances of data sets drawn "
        "from the fit; at_bound names estimates at a border. Groups with fewer levels are "
        "listed under Not computed.</p>",
        table_html(table[cols]),
    ]
    if notes:  # above the table: what is not drawn, and why
        tail.insert(
            2, "<ul class=m>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>"
        )
    return sections, tail
