"""The cross-model page of ``bayesobs compare --report``: a coefficient plot and the tables."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from ..plotting import Figure
from .html import STYLE


def coefficient_figure(table: pd.DataFrame) -> Figure:
    """One panel per outcome: each feature term's estimate with its 95% interval (±1.96 SE)."""
    shown = table[(table["term"] != "Intercept")]
    outcomes = list(dict.fromkeys(shown["outcome"]))
    n = max(len(outcomes), 1)
    terms = list(dict.fromkeys(shown["term"]))
    fig = Figure(figsize=(3.2 * n, 0.45 * len(terms) + 1.6), layout="constrained")
    axes = fig.subplots(1, n, sharey=True, squeeze=False)[0]
    ypos = np.arange(len(terms))[::-1]
    for ax, outcome in zip(axes, outcomes, strict=False):
        g = shown[shown["outcome"] == outcome].set_index("term").reindex(terms)
        est = g["estimate"].to_numpy(float)
        ok = np.isfinite(est)
        ax.errorbar(
            est[ok],
            ypos[ok],
            xerr=np.abs(g[["ci_lo", "ci_hi"]].to_numpy(float)[ok] - est[ok, None]).T,
            fmt="o",
            color="C0",
            capsize=3,
        )
        ax.axvline(0, color="0.6", lw=0.8)
        ax.set_title(outcome, fontsize=10)
        ax.set_xlabel("estimate (95% CI)", fontsize=8)
        ax.xaxis.set_major_locator(MaxNLocator(4))
        ax.tick_params(axis="x", labelsize=8)
    axes[0].set_yticks(ypos, terms, fontsize=8)
    return fig


def compare_page(table: pd.DataFrame, board: pd.DataFrame, out) -> Path:
    """Write ``out/index.html`` and ``out/coefficients.png``; return the page's path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    fig = coefficient_figure(table)
    fig.savefig(out / "coefficients.png", dpi=110)

    def tab(df: pd.DataFrame) -> str:
        inner = df.to_html(
            index=False, float_format=lambda v: f"{v:.3f}", border=0, classes="t", na_rep="n/a"
        )
        return f"<div class=scroll>{inner}</div>"

    cols = ["outcome", "term", "estimate", "se", "ci_lo", "ci_hi", "df", "p", "n_subjects"]
    cols += ["n_groups"]
    cols += ["converged", "warning"]
    lb_cols = [
        c for c in ("rank", "folder", "subject", "S", "S_lo", "S_hi", "S_p", "BCS_p") if c in board
    ]
    body = [
        "<h1>bayesobs compare: models across score folders</h1>",
        "<p>Per outcome a linear mixed model, outcome ~ features + (1 | subject) + (1 | task) "
        "(statsmodels MixedLM, REML; t tests on subjects - terms df); numeric features per SD "
        "over the subjects, categorical ones against their first level. Points: estimates; "
        "bars: 95% intervals (t). See "
        "docs/method.md, &ldquo;Comparing models&rdquo;.</p>",
        '<img src="coefficients.png" alt="coefficients">',
        "<h2>Coefficients</h2>",
        tab(table[cols]),
        "<h2>Leaderboard across folders</h2>",
        tab(board[lb_cols]),
    ]
    page = (
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>bayesobs compare</title>"
        f"<style>{STYLE}</style></head><body>{''.join(body)}</body></html>"
    )
    index = out / "index.html"
    index.write_text(page)
    return index


__all__ = ["coefficient_figure", "compare_page"]
