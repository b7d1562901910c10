"""Figures of many subjects: one row per subject, named on the left, one panel per number."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..plotting import Figure

MANY = 10  # beyond this many subjects: one row each (tab10 has ten colours)
ROW = 0.17  # inches per subject row: 8-pt names that do not overlap


def _outside(val, lo, hi) -> bool:
    """A number outside its interval (False where any is missing)."""
    return bool(np.isfinite([val, lo, hi]).all() and not lo - 1e-12 <= val <= hi + 1e-12)


def subject_rows(
    d: pd.DataFrame, panels: list[tuple[str, str]], bars: bool = False, caveats=None, refs=None
) -> Figure:
    """One row per subject (top first, as ``d`` is ordered), one panel per column."""
    panels = [(c, lab) for c, lab in panels if c in d and np.isfinite(d[c].astype(float)).any()]
    caveats, refs = caveats or {}, refs or {}
    n = len(d)
    fig = Figure(figsize=(2.4 * len(panels) + 1.4, ROW * n + 1.0), layout="constrained")
    axs = fig.subplots(1, len(panels), sharey=True, squeeze=False)[0]
    y = np.arange(n)
    for ax, (col, label) in zip(axs, panels, strict=True):
        v = d[col].to_numpy(float)
        flagged = np.array([col in caveats.get(s, ()) for s in d["subject"]], bool)
        if bars:
            hatch = ["////" if f else None for f in flagged]
            ax.barh(y, v, height=0.7, color="#9ab7d3", edgecolor="k", lw=0, hatch=hatch)
        else:
            ax.plot(v[~flagged], y[~flagged], "o", ms=3.5, color="C0", ls="none")
            ax.plot(v[flagged], y[flagged], "o", ms=3.5, mfc="white", mec="C0", ls="none")
        if f"{col}_lo" in d:
            lo, hi = d[f"{col}_lo"].to_numpy(float), d[f"{col}_hi"].to_numpy(float)
            ax.hlines(y, lo, hi, color="k", lw=1)
            mean = d[f"{col}_mean"].to_numpy(float) if f"{col}_mean" in d else v
            ax.plot(mean, y, "o", ms=2, color="k", ls="none")
            for i in range(n):
                if _outside(v[i], lo[i], hi[i]) or _outside(mean[i], lo[i], hi[i]):
                    top = np.nanmax([v[i], mean[i], hi[i]])
                    ax.annotate("*", (top, y[i]), xytext=(2, -3), textcoords="offset points")
        if col in refs:
            ax.axvline(refs[col], ls="--", lw=0.8, color="0.6")
        ax.set_title(label, fontsize=9)
        ax.grid(axis="y", color="0.93", lw=0.5)
        ax.tick_params(axis="y", labelsize=8, length=0)
    axs[0].set_yticks(y, d["subject"])
    axs[0].set_ylim(n - 0.5, -0.5)
    return fig
