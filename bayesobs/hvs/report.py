"""The report's HVSBench-style section (task ``hvs``): the Table 3 layout and per-field bars."""

from __future__ import annotations

import html
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd

from ..hvs.logged import BASELINE, hvs_scores
from ..hvs.metrics import TABLE_COLUMNS
from ..plotting import Figure

# (panel title, hvs.csv column): accuracy per field, then the scanpath similarities
FIELD_PANELS = (
    ("Prominence (Q1) accuracy", "Prominence Q1 Acc"),
    ("Subitizing (Q2) accuracy", "Subitizing Q2 Acc"),
    ("Prioritizing (Q3-Q7) accuracy", "Prioritizing Q3-Q7 Acc"),
    ("Free-viewing (Q8, Q10) accuracy", "Free-viewing Q8,Q10 Acc"),
    ("Searching (Q11, Q13) accuracy", "Searching Q11,Q13 Acc"),
)
SCANPATH_PANELS = (
    ("Free-viewing Q9 M-Dir", "Free-viewing Q9 M-Dir"),
    ("Free-viewing Q9 M-Pos", "Free-viewing Q9 M-Pos"),
    ("Searching Q12 M-Dir", "Searching Q12 M-Dir"),
    ("Searching Q12 M-Pos", "Searching Q12 M-Pos"),
)


def field_bars(table: pd.DataFrame, panels=FIELD_PANELS, title: str = "") -> Figure:
    """One panel per field: a bar per subject and condition, the random baseline dashed."""
    subjects = [m for m in dict.fromkeys(table["model"]) if m != BASELINE]
    conditions = list(dict.fromkeys(table["condition"]))
    fig = Figure(figsize=(3.0 * len(panels), 3.4), layout="constrained")
    axs = fig.subplots(1, len(panels), squeeze=False)[0]
    width = 0.8 / max(1, len(conditions))
    cmap = [f"C{i}" for i in range(10)]
    for ax, (name, col) in zip(axs, panels, strict=True):
        for k, cond in enumerate(conditions):
            d = table[table["condition"] == cond].set_index("model")
            vals = [float(d.loc[s, col]) if s in d.index else np.nan for s in subjects]
            x = np.arange(len(subjects)) + (k - (len(conditions) - 1) / 2) * width
            ax.bar(x, vals, width, color=cmap[k % 10], label=cond)
            if BASELINE in d.index and np.isfinite(d.loc[BASELINE, col]):
                base = float(d.loc[BASELINE, col])
                ax.hlines(
                    base,
                    x[0] - width / 2,
                    x[-1] + width / 2,
                    colors="k",
                    linestyles="--",
                    label="random baseline" if k == 0 else None,
                )
        ax.set_title(name, fontsize=9)
        ax.set_xticks(np.arange(len(subjects)), subjects, rotation=30, ha="right", fontsize=8)
        ax.set_ylim(0, 1)
    axs[0].legend(fontsize=7, loc="upper left")
    if title:
        fig.suptitle(title, fontsize=9)
    return fig


def hvs_report(tables, trials: pd.DataFrame, out: Path, save, table_html):
    """The hvs paradigm's ``report_sections`` hook: :func:`hvs_sections` of its table."""
    head, sections = hvs_sections(
        SimpleNamespace(hvs=tables.get("hvs")), trials, out, save, table_html
    )
    return head, sections, []


def hvs_sections(res, trials: pd.DataFrame, out: Path, save, table_html):
    """Head (the table) and sections (the bar charts) of the report's HVSBench-style part."""
    table = getattr(res, "hvs", None)
    if table is None or not len(table.columns):  # scores without hvs.csv: computed here
        table = hvs_scores(trials)["hvs"]
    labels = sorted(set(table["benchmark"]))
    label = "; ".join(labels)
    cols = ["model", "condition", "n_trials", "invalid", *TABLE_COLUMNS]
    head = [
        "<h2>HVSBench-style perception questions (task hvs)</h2>",
        f"<p>{html.escape(label)}. Questions Q1-Q13 rebuilt from the public source datasets after "
        "Lin et al. 2024 (HVSBench publishes neither code nor question files), scored with its "
        "answer standardiser; the layout of its Table 3. HVSBench-style numbers only: not "
        "comparable to the paper's own scores. The random-baseline row holds a uniform guesser's expected scores on "
        "the same questions.</p>",
        table_html(table[cols]),
    ]
    sections = [
        (
            "HVSBench-style: accuracy per field",
            f"Accuracy per field, per subject and condition; dashed: the random baseline. {label}.",
            [
                save(
                    field_bars(table, FIELD_PANELS, f"HVSBench-style: {label}"),
                    out / "figures" / "hvs_fields.png",
                )
            ],
        ),
        (
            "HVSBench-style: scanpath prediction",
            f"MultiMatch direction and position similarity of predicted scanpaths (Q9 free-viewing, Q12 "
            f"search) to the human ones; dashed: another image's human scanpath. {label}.",
            [
                save(
                    field_bars(table, SCANPATH_PANELS, f"HVSBench-style: {label}"),
                    out / "figures" / "hvs_scanpaths.png",
                )
            ],
        ),
    ]
    return head, sections
