"""Percept-V figures from the score tables (no statistics here: the tables come from :mod:`.score`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..plotting import figure_axes
from . import published
from .published import SKILLS


def plot_accuracy_vs_size(sizes: pd.DataFrame, domains=None, subject=None, ax=None):
    """Accuracy (%) against problem size, one line per domain (and subject), from :func:`score.size_table`."""
    fig, (ax,) = figure_axes(ax, size=(7, 4.5))
    df = sizes
    if domains is not None:
        df = df[df.domain.isin(list(domains))]
    if subject is not None:
        df = df[df.subject == subject]
    multi = df.subject.nunique() > 1
    for (subj, dom), g in df.groupby(["subject", "domain"], sort=True):
        g = g.sort_values("problem_size")
        label = f"{subj}: {dom}" if multi else dom
        ax.plot(g.problem_size, g.accuracy, marker=".", lw=1, label=label)
    ax.set_xlabel("problem size")
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(-2, 102)
    ax.set_xticks(range(1, 21, 2))
    ax.legend(fontsize=6, ncol=2, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1))
    return fig


def plot_skills(skills: pd.DataFrame, references=published.MODELS, ax=None):
    """Bars of each subject's skill scores against the published models."""
    fig, (ax,) = figure_axes(ax, size=(8, 4.5))
    keys = [*SKILLS, "average_of_skills"]
    x = np.arange(len(keys))
    subjects = sorted(skills.subject.unique())
    width = 0.8 / max(len(subjects), 1)
    for k, subj in enumerate(subjects):
        g = skills[skills.subject == subj].set_index("skill")
        vals = [g.accuracy.get(s, np.nan) for s in keys]
        ax.bar(x - 0.4 + width * (k + 0.5), vals, width, label=subj, alpha=0.8)
    markers = "ovs^Dx"
    for k, model in enumerate(references):
        ref = published.summary(model)
        ax.scatter(
            x,
            [ref[s] for s in keys],
            marker=markers[k % len(markers)],
            s=22,
            color="k",
            facecolors="none" if k % 2 else "k",
            label=f"{model} (published)",
            zorder=3,
        )
    # upright labels: long skill names never run into each other
    ax.set_xticks(x, [s.replace("_", " ") for s in keys], fontsize=7, rotation=90)
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 102)
    ax.legend(fontsize=6, ncol=1, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1))
    return fig
