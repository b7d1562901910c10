"""Figures modelled on the BayesBench paper.

Every function takes result tables (DataFrames from :mod:`bayesobs.scores`,
:mod:`bayesobs.api`, :mod:`bayesobs.scores.cue`) and an optional ``ax`` (or ``axes``),
draws, and returns the figure.  No statistics are computed here.  Figures use
matplotlib's object-oriented API and change no global state.
"""

from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..plotting import Figure, figure_axes
from ..trials import natural_key
from .rows import MANY, subject_rows

UNITS = {
    "line_ratio": "length ratio",
    "marker_location": "position (0–1)",
    "maze_distance": "distance (grid units)",
    "duration": "duration (s)",
    "numerosity": "number of dots",
}
MODEL_COLORS = {
    "random_forest": "#2a9d8f",
    "bayes_oracle": "#e76f51",
    "linear": "#264653",
    "bayes_non_oracle": "#f4a261",
}


def subject_colors(subjects) -> dict[str, tuple]:
    """One colour per subject, the same in every figure (sorted order, tab10).

    Parameters
    ----------
    subjects : iterable
        Subject names (repeats allowed).

    Returns
    -------
    dict
        Subject to RGBA tuple, the tab10 colours in sorted order (cycling after
        ten: the summary figures name each subject on a row beyond ten).
    """
    cmap = matplotlib.colormaps["tab10"]
    return {s: cmap(i % 10) for i, s in enumerate(sorted(set(subjects)))}


def _cell(df, subject, task, modality=None, condition=None):
    sel = (df["subject"] == subject) & (df["task"] == task)
    if modality is not None:
        sel &= df["modality"] == modality
    if condition is not None:
        sel &= df["condition"] == condition
    return df[sel]


def regression_to_the_mean(
    pred: pd.DataFrame, subject, task, modality, condition="base", ax=None, color=None, legend=True
):
    """Responses vs stimulus per session with the static-Bayes fit lines (paper Fig. 1).

    ``pred``: trials with ``pred_static`` (:func:`bayesobs.api.predictions`).
    Interleaved fits (a ``level`` column) get one set of points and one fit
    line per level and session.

    Parameters
    ----------
    pred : DataFrame
        Trials with ``pred_static``.
    subject, task, modality : str
        The cell drawn.
    condition : str
        Its condition (default ``"base"``).
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure otherwise.
    color : color, optional
        The points' and lines' colour (default ``"C0"``), lighter for earlier sessions.
    legend : bool
        Draw the legend.

    Returns
    -------
    matplotlib.figure.Figure
        The figure drawn on.
    """
    fig, (ax,) = figure_axes(ax)
    d = _cell(pred, subject, task, modality, condition)
    color = color or "C0"
    lo, hi = d["stimulus"].min(), d["stimulus"].max()  # over the stimuli: outliers stay points
    ax.plot([lo, hi], [lo, hi], ls="--", lw=0.8, color="0.6", label="identity")
    keys = ["session", "level"] if "level" in d and d["level"].notna().any() else ["session"]
    groups = list(d.groupby(keys, sort=False))
    shades = np.linspace(0.35, 1.0, max(1, len(groups)))
    one_session = d["session"].nunique() == 1
    for k, (shade, (key, g)) in enumerate(zip(shades, groups, strict=False)):
        c = matplotlib.colors.to_rgba(color, alpha=shade)
        ax.scatter(g["stimulus"], g["response"], s=9, color=c, alpha=0.45, lw=0)
        line = g.sort_values("stimulus")
        name = (
            key[-1] if len(keys) > 1 and one_session else " · ".join(map(str, np.atleast_1d(key)))
        )
        ax.plot(
            line["stimulus"],
            line["pred_static"],
            color=c,
            lw=1.8,
            ls="-" if k % 2 == 0 or len(keys) == 1 else "-.",
            label=f"{name}: static-Bayes fit",
        )
    ax.set_xlabel(f"stimulus: {UNITS.get(task, 'value')}")
    ax.set_ylabel(f"response: {UNITS.get(task, 'value')}")
    ax.set_title(f"{subject} · {task} · {modality}", fontsize=9)
    if legend:
        ax.legend(fontsize=7, loc="upper left", frameon=False)
    return fig


def trajectory(
    pred: pd.DataFrame,
    subject,
    task,
    modality,
    condition="base",
    session=None,
    ax=None,
    color=None,
    legend=True,
):
    """Responses over trials against the sequential (Kalman) prediction (paper Figs. 3–4).

    Parameters
    ----------
    pred : DataFrame
        Trials with ``pred_kalman`` (:func:`bayesobs.api.predictions`).
    subject, task, modality : str
        The cell drawn.
    condition : str
        Its condition (default ``"base"``).
    session : str, optional
        The session drawn (its first run); the cell's first session by default.
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure otherwise.
    color : color, optional
        The responses' colour (default ``"C0"``).
    legend : bool
        Draw the legend (outside the axes, on the right).

    Returns
    -------
    matplotlib.figure.Figure
        The figure drawn on.
    """
    fig, (ax,) = figure_axes(ax, size=(6, 3.2))
    d = _cell(pred, subject, task, modality, condition)
    session = session or d["session"].iloc[0]
    d = d[(d["session"] == session) & (d["run"] == d["run"].min())].sort_values("trial")
    ax.plot(d["trial"], d["stimulus"], color="0.55", lw=1, marker=".", label="stimulus")
    ax.plot(
        d["trial"], d["response"], color=color or "C0", lw=1.4, marker="o", ms=3, label="response"
    )
    ax.plot(d["trial"], d["pred_kalman"], color="k", ls=":", lw=1.6, label="Kalman model")
    ax.set_xlabel("trial")
    ax.set_ylabel(UNITS.get(task, "value"))
    ax.set_title(f"{subject} · {task} · {modality} · {session} session", fontsize=9)
    if legend:  # outside the data
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return fig


def small_multiples(n: int, ncols: int = 4, panel=(2.7, 2.3), sharex=True, sharey=True):
    """A figure of ``n`` small panels in rows of ``ncols`` (shared axes); returns ``(fig, axes)``.

    Panels past ``n`` in the last row are switched off.

    Parameters
    ----------
    n : int
        Number of panels.
    ncols : int
        Panels per row (at most ``n``).
    panel : tuple of float
        Width and height of one panel in inches.
    sharex, sharey : bool
        Share the x and y axes.

    Returns
    -------
    fig : matplotlib.figure.Figure
        The new figure.
    axes : list of matplotlib.axes.Axes
        The ``n`` panels in reading order.
    """
    ncols = max(1, min(n, ncols))
    nrows = -(-n // ncols)
    fig = Figure(figsize=(panel[0] * ncols, panel[1] * nrows + 0.5), layout="constrained")
    axs = fig.subplots(nrows, ncols, squeeze=False, sharex=sharex, sharey=sharey)
    for ax in axs.flat[n:]:
        ax.set_axis_off()
    for i, ax in enumerate(axs.flat[:n]):  # tick labels where no panel sits below
        ax.xaxis.set_tick_params(labelbottom=i + ncols >= n)
    return fig, list(axs.flat[:n])


def outer_labels(axes: list, ncols: int) -> None:
    """Keep axis labels on the bottom panels and the first column of a small-multiples grid.

    Parameters
    ----------
    axes : list of matplotlib.axes.Axes
        The panels in reading order, as :func:`small_multiples` gives them.
    ncols : int
        Panels per row.
    """
    n = len(axes)
    ncols = max(1, min(n, ncols))
    for i, ax in enumerate(axes):
        if i + ncols < n:
            ax.set_xlabel("")
        if i % ncols:
            ax.set_ylabel("")


MODALITY_ORDER = ("multimodal", "image", "text")
MAX_CONDITIONS = 4  # without a base condition, the first few conditions get panels


def response_panels(pred: pd.DataFrame) -> list[dict]:
    """The ``task, modality, condition`` of each grid of responses the report draws.

    Tasks under the data's own names (known tasks first); per task the
    richest modality present (multimodal, image, text, else the first), and
    the ``base`` condition where there is one, else each condition (the
    first :data:`MAX_CONDITIONS`, in natural order).

    Parameters
    ----------
    pred : DataFrame
        Trials with ``task``, ``modality`` and ``condition``.

    Returns
    -------
    list of dict
        One ``{"task", "modality", "condition"}`` per grid.
    """
    known = [t for t in UNITS if t in set(pred["task"])]
    tasks = known + sorted(set(pred["task"]) - set(known), key=natural_key)
    out = []
    for task in tasks:
        d = pred[pred["task"] == task]
        mods = set(d["modality"])
        modality = next((m for m in MODALITY_ORDER if m in mods), None)
        modality = modality or sorted(mods, key=natural_key)[0]
        conds = sorted(set(d[d["modality"] == modality]["condition"]), key=natural_key)
        for condition in ["base"] if "base" in conds else conds[:MAX_CONDITIONS]:
            out.append({"task": task, "modality": modality, "condition": condition})
    return out


def responses_grid(pred: pd.DataFrame, task, modality, condition="base", colors=None, ncols=4):
    """Responses against stimuli of every subject of a cell type, as small multiples.

    One panel per subject (shared axes), :func:`regression_to_the_mean` in
    each, one legend for the figure (the shades are sessions or levels).

    Parameters
    ----------
    pred : DataFrame
        Trials with ``pred_static`` (:func:`bayesobs.api.predictions`).
    task, modality : str
        The cell type drawn.
    condition : str
        Its condition (default ``"base"``).
    colors : dict, optional
        Subject to colour (default :func:`subject_colors`).
    ncols : int
        Panels per row.

    Returns
    -------
    matplotlib.figure.Figure
        The new figure.
    """
    d = pred[
        (pred["task"] == task) & (pred["modality"] == modality) & (pred["condition"] == condition)
    ]
    subjects = sorted(d["subject"].unique(), key=natural_key)
    colors = colors or subject_colors(pred["subject"])
    fig, axs = small_multiples(len(subjects), ncols)
    for ax, s in zip(axs, subjects, strict=True):
        regression_to_the_mean(
            d, s, task, modality, condition, ax=ax, color=colors[s], legend=False
        )
        ax.set_title(str(s), fontsize=8)
    outer_labels(axs, ncols)
    handles, labels = axs[0].get_legend_handles_labels()
    fig.legend(
        handles,
        labels,
        loc="outside upper center",
        ncols=4,
        fontsize=7,
        frameon=False,
        title=f"{task} · {modality} · condition {condition}",
        title_fontsize=8,
    )
    return fig


def trajectory_grid(pred: pd.DataFrame, panels: list[tuple], colors=None, ncols=None):
    """Trial-by-trial responses (:func:`trajectory`) of several subjects as small multiples.

    ``panels``: ``(subject, task, modality, condition)`` per panel; the y axes
    are shared when every panel is of one task; ``ncols`` defaults to one row
    of up to four panels, else 2, or 3 beyond six panels.

    Parameters
    ----------
    pred : DataFrame
        Trials with ``pred_kalman`` (:func:`bayesobs.api.predictions`).
    panels : list of tuple
        ``(subject, task, modality, condition)`` per panel.
    colors : dict, optional
        Subject to colour (default :func:`subject_colors`).
    ncols : int, optional
        Panels per row.

    Returns
    -------
    matplotlib.figure.Figure
        The new figure.
    """
    colors = colors or subject_colors(pred["subject"])
    ncols = ncols or (len(panels) if len(panels) <= 4 else 2 if len(panels) <= 6 else 3)
    one_task = len({p[1] for p in panels}) == 1
    fig, axs = small_multiples(len(panels), ncols, panel=(3.6, 2.2), sharey=one_task)
    for ax, (s, t, m, c) in zip(axs, panels, strict=True):
        trajectory(pred, s, t, m, c, ax=ax, color=colors[s], legend=False)
        ax.set_title(f"{s}" if one_task else f"{s} · {t}", fontsize=8)
    outer_labels(axs, ncols)
    handles, labels = axs[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside upper center", ncols=3, fontsize=7, frameon=False)
    return fig


STEER = ["base", "steer_verbal", "steer_numeric", "steer_biased"]
NOISE = ["base", "noise_constant", "noise_gradual"]


def steering(bias_var, evidence, cue, subject, task, modality="multimodal", axes=None, color=None):
    """Steering and noise (paper Fig. 6): error decomposition, sequential evidence, image weight.

    A panel is drawn only where the data hold a condition to compare with
    ``base`` (a steering condition for A and B, a noise condition for C);
    returns None when none does.  Given ``axes``, unused ones are switched off.

    Parameters
    ----------
    bias_var : DataFrame
        :func:`bayesobs.scores.bias_variance` per cell (``bias2``, ``variance``).
    evidence : DataFrame
        ``evidence.csv`` rows (``factor``, ``p`` and, with a bootstrap, ``p_lo``, ``p_hi``).
    cue : DataFrame
        ``cue.csv`` rows (``alpha_text`` and, with a bootstrap, its interval).
    subject, task : str
        The subject and task drawn.
    modality : str
        The modality of the steering panels (default ``"multimodal"``).
    axes : sequence of matplotlib.axes.Axes, optional
        Where to draw (up to three); a new figure otherwise.
    color : color, optional
        The marks' colour (default ``"C0"``).

    Returns
    -------
    matplotlib.figure.Figure or None
        The figure, or None when no panel has data.
    """
    color = color or "C0"
    bv = (
        _cell(bias_var, subject, task, modality)
        .set_index("condition")
        .reindex(STEER)
        .dropna(how="all")
    )
    ev = _cell(evidence, subject, task, modality)
    ev = ev[ev["factor"] == "sequential"].set_index("condition").reindex(STEER).dropna(how="all")
    cw = _cell(cue, subject, task).set_index("condition").reindex(NOISE).dropna(how="all")
    panels = [
        (draw, t)
        for draw, t in ((_steer_error, bv), (_steer_evidence, ev), (_noise_weight, cw))
        if len(set(t.index) - {"base"})
    ]
    if not panels:
        return None
    fig, axs = figure_axes(axes, n=len(panels), size=(3.6, 2.7))
    for ax in axs[len(panels) :]:
        ax.set_axis_off()
    for ax, (draw, table) in zip(axs, panels, strict=False):
        draw(ax, table, color)
    fig.suptitle(f"{subject} · {task}", fontsize=9)
    return fig


def _steer_error(ax, bv, color):
    x = np.arange(len(bv))
    ax.bar(x, bv["bias2"], color=color, label="bias²")
    ax.bar(x, bv["variance"], bottom=bv["bias2"], color=color, alpha=0.45, label="variance")
    ax.set_xticks(x, [c.replace("steer_", "") for c in bv.index], fontsize=8)
    ax.set_ylabel("mean squared error")
    ax.set_title("A  error under steering", fontsize=9, loc="left")
    ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))


def _steer_evidence(ax, ev, color):
    x = np.arange(len(ev))
    if "p_lo" in ev:
        err = np.vstack([ev["p"] - ev["p_lo"], ev["p_hi"] - ev["p"]]).clip(0)
        ax.errorbar(x, ev["p"], yerr=err, fmt="o", color=color, capsize=3)
    else:
        ax.plot(x, ev["p"], "o", color=color)
    ax.set_xticks(x, [c.replace("steer_", "") for c in ev.index], fontsize=8)
    ax.set_ylim(-0.05, 1.05)
    ax.set_ylabel("P(sequential)")
    ax.set_title("B  sequential evidence", fontsize=9, loc="left")


def _noise_weight(ax, cw, color):
    x = np.arange(len(cw))
    w_img = 1 - cw["alpha_text"]
    if "alpha_text_lo" in cw:
        err = np.vstack(
            [cw["alpha_text_hi"] - cw["alpha_text"], cw["alpha_text"] - cw["alpha_text_lo"]]
        ).clip(0)
        ax.errorbar(x, w_img, yerr=err, fmt="s", color=color, capsize=3)
    else:
        ax.plot(x, w_img, "s", color=color)
    ax.set_xticks(x, [c.replace("noise_", "") for c in cw.index], fontsize=8)
    ax.set_ylim(-0.05, 1.05)
    ax.set_ylabel("implied image weight (1 − α)")
    ax.set_title("C  image weight under blur", fontsize=9, loc="left")


def cue_fits(cue_pred: pd.DataFrame, subject, task, condition="base", ax=None):
    """Multimodal responses against the random-forest, Bayes-optimal and linear fits (paper Fig. 7).

    Parameters
    ----------
    cue_pred : DataFrame
        :func:`bayesobs.scores.cue.cue_predictions` rows.
    subject, task : str
        The group drawn.
    condition : str
        Its condition (default ``"base"``).
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure otherwise.

    Returns
    -------
    matplotlib.figure.Figure
        The figure drawn on; the legend gives each fit's R².
    """
    fig, (ax,) = figure_axes(ax)
    d = _cell(cue_pred, subject, task, condition=condition)
    y = d["y_multimodal"]
    lo, hi = y.min(), y.max()
    ax.plot([lo, hi], [lo, hi], ls="--", lw=0.8, color="0.6")
    for model, marker in (("random_forest", "o"), ("bayes_oracle", "s"), ("linear", "^")):
        p = d[f"pred_{model}"]
        r2 = 1 - ((y - p) ** 2).sum() / ((y - y.mean()) ** 2).sum()
        ax.scatter(
            y,
            p,
            s=10,
            marker=marker,
            color=MODEL_COLORS[model],
            alpha=0.6,
            lw=0,
            label=f"{model.replace('_', ' ')} (R² {r2:.2f})",
        )
    ax.set_xlabel(f"multimodal response: {UNITS.get(task, 'value')}")
    ax.set_ylabel("prediction from text + image responses")
    ax.set_title(f"{subject} · {task}", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", frameon=False)
    return fig


SUMMARY_PANELS = [
    ("nrmse", "p_bayesian", "NRMSE (base)", "P(Bayesian)", None),
    ("nrmse_multimodal", "rre_bayes_oracle", "multimodal NRMSE", "RRE (Bayes oracle)", 1.0),
    ("nrmse_multimodal", "BCS", "multimodal NRMSE", "BCS", 0.0),
]


def summary_panels(summary: pd.DataFrame, bayesbench: pd.DataFrame) -> list[tuple]:
    """The panels of :func:`summary` that have at least one subject with both numbers.

    Parameters
    ----------
    summary : DataFrame
        The per-subject summary table.
    bayesbench : DataFrame
        The per-subject BayesBench table, joined on ``subject``.

    Returns
    -------
    list of tuple
        Entries of :data:`SUMMARY_PANELS`: ``(x column, y column, x label,
        y label, reference line or None)``.
    """
    d = summary.merge(bayesbench, on="subject", how="left", suffixes=("", "_bb"))
    return [
        p
        for p in SUMMARY_PANELS
        if p[0] in d
        and p[1] in d
        and (np.isfinite(d[p[0]].astype(float)) & np.isfinite(d[p[1]].astype(float))).any()
    ]


def summary(summary: pd.DataFrame, bayesbench: pd.DataFrame, axes=None, colors=None):
    """Evidence, efficiency and consistency against accuracy, one colour per subject (paper Fig. 8).

    Dots are full-data estimates; lines span the 68% percentile intervals of
    the run bootstrap where they are (an interval need not contain its point
    estimate: a ``*`` marks a dot outside its interval).  Only panels
    with data are drawn (e.g. no BCS panel without ablation conditions); None
    when there are none.  Beyond :data:`bayesobs.report.rows.MANY` subjects
    (and no ``axes``) the numbers are drawn one row per subject instead
    (:func:`bayesobs.report.rows.subject_rows`), each subject named.

    Parameters
    ----------
    summary : DataFrame
        The per-subject summary table (``nrmse``, ``p_bayesian``,
        ``nrmse_multimodal``, ``rre_bayes_oracle`` and their intervals).
    bayesbench : DataFrame
        The per-subject BayesBench table (``BCS``...), joined on ``subject``.
    axes : sequence of matplotlib.axes.Axes, optional
        Where to draw; a new figure otherwise.
    colors : dict, optional
        Subject to colour (default :func:`subject_colors`).

    Returns
    -------
    matplotlib.figure.Figure or None
        The figure, or None when no panel has data.
    """
    panels = summary_panels(summary, bayesbench)
    if not panels:
        return None
    if axes is None and summary["subject"].nunique() > MANY:  # one row per subject, named
        d = summary.merge(bayesbench, on="subject", how="left", suffixes=("", "_bb"))
        d = d.sort_values("subject", key=lambda c: c.map(natural_key))
        cols = dict.fromkeys((c, lab) for p in panels for c, lab in ((p[0], p[2]), (p[1], p[3])))
        return subject_rows(d, list(cols), refs={p[1]: p[4] for p in panels if p[4] is not None})
    fig, axs = figure_axes(axes, n=len(panels), size=(3.8, 3.4))
    for ax in axs[len(panels) :]:
        ax.set_axis_off()
    colors = colors or subject_colors(summary["subject"])
    d = summary.merge(bayesbench, on="subject", how="left", suffixes=("", "_bb"))
    for ax, (xc, yc, xl, yl, ref) in zip(axs, panels, strict=False):
        for _, row in d.iterrows():
            if not (np.isfinite(row[xc]) and np.isfinite(row[yc])):
                continue
            color = colors[row["subject"]]
            ax.plot(row[xc], row[yc], "o", color=color, label=row["subject"])
            if f"{xc}_lo" in d:
                ax.hlines(row[yc], row[f"{xc}_lo"], row[f"{xc}_hi"], color=color, lw=1)
            if f"{yc}_lo" in d:
                ax.vlines(row[xc], row[f"{yc}_lo"], row[f"{yc}_hi"], color=color, lw=1)
            if any(
                _outside(row[c], row.get(f"{c}_lo", np.nan), row.get(f"{c}_hi", np.nan))
                for c in (xc, yc)
            ):  # a point outside its own interval, as the leaderboard stars it
                ax.annotate("*", (row[xc], row[yc]), xytext=(3, 3), textcoords="offset points")
        ax.set_xlabel(xl)
        ax.set_ylabel(yl)
        if ref is not None:
            ax.axhline(ref, ls="--", lw=0.8, color="0.6")
    handles, labels = axs[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right center", fontsize=7, frameon=False)
    return fig


def _outside(val, lo, hi) -> bool:
    if not all(np.isfinite(v) for v in (val, lo, hi)):
        return False
    tol = 1e-12 * max(1.0, abs(val))
    return bool(val < lo - tol or val > hi + tol)


def outside_tops(d: pd.DataFrame, col: str) -> list[float | None]:
    """Per row, where to draw a ``*``: the point or the bootstrap mean outside its interval.

    The top of the highest of point, mean and interval where one of the two
    lies outside ``[col_lo, col_hi]``; None elsewhere (and without an interval).

    Parameters
    ----------
    d : DataFrame
        Rows with ``col`` and, where bootstrapped, ``col_mean``, ``col_lo``, ``col_hi``.
    col : str
        The column.

    Returns
    -------
    list of float or None
        One entry per row of ``d``.
    """
    out: list[float | None] = []
    for _, r in d.iterrows():
        lo, hi = float(r.get(f"{col}_lo", np.nan)), float(r.get(f"{col}_hi", np.nan))
        vals = [float(r.get(col, np.nan)), float(r.get(f"{col}_mean", np.nan))]
        if any(_outside(v, lo, hi) for v in vals):
            out.append(float(np.nanmax([*vals, hi])))
        else:
            out.append(None)
    return out


def bayesbench_scores(bayesbench: pd.DataFrame, ax=None, colors=None, caveats=None):
    """The BayesBench score with its A, E, C breakdown and 68% intervals (paper Fig. 9).

    ``caveats``: ``{subject: parts}`` (e.g. ``{"s1": {"E"}}``) of numbers the
    leaderboard flags; their bars are hatched, and the legend says so.

    Bars are the full-data point estimates.  With bootstrap columns, each bar
    gets a black line from ``_lo`` to ``_hi`` with a dot at the bootstrap
    mean, drawn where the interval is (it need not contain the bar's top:
    sums of signs shrink under resampling), a ``*`` above a bar whose point
    estimate or bootstrap mean lies outside its interval, and a white
    diamond marks ``S_p`` (METHOD §9) beside ``S``.  Beyond
    :data:`bayesobs.report.rows.MANY` subjects (and no ``ax``) the parts are
    panels of horizontal bars, one row per subject, each subject named.

    Parameters
    ----------
    bayesbench : DataFrame
        The per-subject BayesBench table: ``subject``, ``A``, ``E``, ``C``,
        ``S`` and, with a bootstrap, ``COL_mean``, ``COL_lo``, ``COL_hi`` and ``S_p``.
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure otherwise.
    colors : dict, optional
        Subject to colour (default :func:`subject_colors`).
    caveats : dict, optional
        Subject to the set of parts flagged.

    Returns
    -------
    matplotlib.figure.Figure or None
        The figure, or None when none of A, E, C, S has a value.
    """
    d = bayesbench.sort_values("S", ascending=False, na_position="last").reset_index(drop=True)
    parts = [
        ("A", "accuracy A", 0.35),
        ("E", "efficiency E", 0.6),
        ("C", "consistency C", 0.85),
        ("S", "score S", 1.0),
    ]
    parts = [p for p in parts if d[p[0]].notna().any()]  # e.g. no C and S without ablations
    if not parts:
        return None
    has_s = any(c == "S" for c, _, _ in parts)
    caveats = caveats or {}
    if ax is None and len(d) > MANY:  # one row per subject, named; S_p beside S
        cols = [(c, label) for c, label, _ in parts] + [("S_p", "S_p (robust)")] * has_s
        return subject_rows(d, cols, bars=True, caveats=caveats)
    fig, (ax,) = figure_axes(ax, size=(max(5, 1.2 * len(bayesbench) + 2), 3.4))
    colors = colors or subject_colors(d["subject"])
    width = 0.2
    x = np.arange(len(d))
    starred = False
    for k, (col, label, alpha) in enumerate(parts):
        pos = x + (k - (len(parts) - 1) / 2) * width
        ax.bar(
            pos,
            d[col],
            width,
            label=label,
            color=[matplotlib.colors.to_rgba(colors[s], alpha) for s in d["subject"]],
            edgecolor="k",
            lw=0.5 if col == "S" else 0,
            hatch=[("////" if col in caveats.get(s, ()) else None) for s in d["subject"]],
        )
        if f"{col}_lo" in d:  # the interval where it is, not clipped around the point
            ax.vlines(pos, d[f"{col}_lo"], d[f"{col}_hi"], color="k", lw=1.2)
            ax.plot(pos, d[f"{col}_mean"], "o", color="k", ms=2.5, ls="none")
            for xi, top in zip(pos, outside_tops(d, col), strict=True):
                if top is not None:  # the bar or the mean outside its interval
                    ax.text(xi, top, "*", ha="center", va="bottom", fontsize=9)
                    starred = True
    if has_s and "S_p" in d and d["S_p"].notna().any():
        ax.plot(x + 1.5 * width, d["S_p"], "D", mfc="white", mec="k", ms=4, ls="none")
    ax.set_xticks(x, d["subject"], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("score")
    ax.set_title(
        "BayesBench: S = (A + E + C) / 3" if has_s else "BayesBench parts (no S without C)",
        fontsize=9,
    )
    # neutral swatches: the bars take each subject's colour, lighter for the parts
    handles = [
        Patch(facecolor=(0.3, 0.3, 0.3, a), edgecolor="k", lw=0.5 if c == "S" else 0, label=lab)
        for c, lab, a in parts
    ]
    if any(f"{c}_lo" in d for c, _, _ in parts):
        handles.append(
            Line2D(
                [],
                [],
                color="k",
                marker="o",
                ms=2.5,
                lw=1.2,
                label="bootstrap mean, 68% percentile\ninterval of the run bootstrap",
            )
        )
    if starred:
        handles.append(
            Line2D([], [], ls="none", marker="$*$", color="k", label="* bar or mean outside it")
        )
    if has_s and "S_p" in d and d["S_p"].notna().any():
        handles.append(
            Line2D([], [], marker="D", mfc="white", mec="k", ls="none", label="S_p (robust)")
        )
    flagged = {p for s in d["subject"] for p in caveats.get(s, ())} & {c for c, _, _ in parts}
    if flagged:
        handles.append(
            Patch(
                facecolor="white",
                edgecolor="k",
                hatch="////",
                lw=0.5,
                label=f"{', '.join(sorted(flagged))}: flagged (see the leaderboard)",
            )
        )
    ax.legend(
        handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False
    )
    return fig


def bcs_table(bcs_tasks: pd.DataFrame, ax=None, na=None):
    """Per-task BCS as bootstrap means, subjects by tasks (paper Table 4).

    ``na``: a subjects-by-tasks boolean frame (as the pivot of ``bcs_tasks``)
    of cells whose BCS is not available (e.g. constant responders): they are
    left blank with the text ``n/a``, never drawn as a value.

    Parameters
    ----------
    bcs_tasks : DataFrame
        ``subject, task`` and ``bcs_mean`` (else ``bcs``).
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure otherwise.
    na : DataFrame, optional
        Subjects by tasks, true where the BCS is not available.

    Returns
    -------
    matplotlib.figure.Figure
        The figure drawn on (a heat map from -5 to 5 with a colour bar).
    """
    col = "bcs_mean" if "bcs_mean" in bcs_tasks else "bcs"
    t = bcs_tasks.pivot(index="subject", columns="task", values=col)
    if na is not None:
        t = t.mask(na.reindex(index=t.index, columns=t.columns, fill_value=False).astype(bool))
    fig, (ax,) = figure_axes(ax, size=(1.6 * t.shape[1] + 2, 0.45 * t.shape[0] + 1.2))
    im = ax.imshow(t.to_numpy(dtype=float), cmap="RdBu", vmin=-5, vmax=5, aspect="auto")
    ax.set_xticks(range(t.shape[1]), t.columns, fontsize=8)
    ax.set_yticks(range(t.shape[0]), t.index, fontsize=8)
    for (i, j), v in np.ndenumerate(t.to_numpy(dtype=float)):
        if np.isfinite(v):
            ax.text(j, i, f"{v:.1f}", ha="center", va="center", fontsize=8)
        else:
            ax.text(j, i, "n/a", ha="center", va="center", fontsize=8, color="0.45")
    fig.colorbar(im, ax=ax, label="BCS per task (−5 … 5)")
    ax.set_title("BCS by task" + (" (bootstrap means)" if col == "bcs_mean" else ""), fontsize=9)
    return fig


def posterior_predictive(ppc: pd.DataFrame, ax=None, color=None, title: str = ""):
    """Observed responses against the posterior predictive 90% band (posterior fits).

    Parameters
    ----------
    ppc : DataFrame
        :func:`bayesobs.fits.posterior.ppc_table` rows of one cell and variant:
        ``session, run, trial, response, pred_q05, pred_median, pred_q95, variant``.
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure otherwise.
    color : color, optional
        The observed responses' colour (default ``"C0"``).
    title : str
        The title; by default it names the variant.

    Returns
    -------
    matplotlib.figure.Figure
        The figure drawn on (dotted lines separate the sessions).
    """
    fig, (ax,) = figure_axes(ax, size=(6, 3.2))
    d = ppc.sort_values(["session", "run", "trial"]).reset_index(drop=True)
    x = np.arange(len(d))
    ax.fill_between(x, d["pred_q05"], d["pred_q95"], color="0.8", label="posterior predictive 90%")
    ax.plot(x, d["pred_median"], color="0.35", lw=1, label="predictive median")
    ax.plot(x, d["response"], "o", ms=3, color=color or "C0", label="observed")
    for b in np.flatnonzero(d["session"].ne(d["session"].shift()).to_numpy())[1:]:
        ax.axvline(b - 0.5, color="0.6", lw=0.6, ls=":")
    ax.set_xlabel("trial (sessions in sequence)")
    ax.set_ylabel("response")
    ax.set_title(title or f"posterior predictive check · {d['variant'].iat[0]}", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return fig


def search_curves(acc: pd.DataFrame, subject, task, answer="cell", ablation="base", ax=None):
    """Accuracy (cell answers) or coordinate error (point answers) against set size, per condition.

    ``acc``: :func:`bayesobs.search.scores.search_accuracy` (binned or not).  Bars
    are its 95% intervals, conditions dodged side by side; the dotted line is chance (25%) for cells and the
    image diagonal (a refusal's error) for points.  Pop-out shows as a flat
    curve, serial search as a falling (or, for errors, rising) one.

    Parameters
    ----------
    acc : DataFrame
        The accuracy table.
    subject, task : str
        The subject and task drawn.
    answer : {"cell", "point"}
        Which answers: accuracy of cells, or coordinate error of points.
    ablation : str
        The ablation drawn (default ``"base"``).
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure otherwise.

    Returns
    -------
    matplotlib.figure.Figure
        The figure drawn on.
    """
    fig, (ax,) = figure_axes(ax)
    d = acc[
        (acc["subject"] == subject)
        & (acc["task"] == task)
        & (acc["answer"] == answer)
        & (acc["ablation"] == ablation)
    ]
    y, lo, hi = (
        ("accuracy", "acc_lo", "acc_hi")
        if answer == "cell"
        else ("error_px", "error_lo", "error_hi")
    )
    conds = sorted(d["condition"].unique())
    sizes = np.unique(d["set_size"].to_numpy(dtype=float))
    step = float(np.diff(sizes).min()) if len(sizes) > 1 else 1.0
    for i, cond in enumerate(conds):
        g = d[d["condition"] == cond].sort_values("set_size")
        x = g["set_size"].to_numpy(dtype=float) + (i - (len(conds) - 1) / 2) * 0.6 * step / len(
            conds
        )
        err = np.vstack([g[y] - g[lo], g[hi] - g[y]]).clip(0)  # NaN (no interval): no bar
        ax.errorbar(
            x,
            g[y],
            yerr=np.nan_to_num(err),
            fmt="o-",
            ms=3,
            lw=1,
            capsize=2,
            color=f"C{i}",
            label=cond,
        )
    if answer == "cell":
        ax.axhline(0.25, ls=":", color="0.5", lw=1)
        ax.set_ylim(0, 1.02)
        ax.set_ylabel("accuracy")
    else:
        ax.axhline(565.7, ls=":", color="0.5", lw=1)
        top = max(600.0, 1.05 * float(np.nanmax(d[[y, hi]].to_numpy()))) if len(d) else 600.0
        ax.set_ylim(0, top)
        ax.set_ylabel("coordinate error (px)")
    ax.set_xlabel("number of distractors")
    ax.set_title(f"{subject} · {task} · {answer}", fontsize=9)
    if len(d):  # outside the data
        ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def search_bias(bias: pd.DataFrame, subject, task, answer="cell", ax=None):
    """Selection rate of each grid cell (2 x 2 heat map) with its precision and recall.

    Parameters
    ----------
    bias : DataFrame
        :func:`bayesobs.search.scores.response_bias` rows (``cell`` as ``"row,col"``,
        ``selected``, ``precision``, ``recall``, ``invalid``).
    subject, task : str
        The subject and task drawn.
    answer : {"cell", "point"}
        Which answers.
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure otherwise.

    Returns
    -------
    matplotlib.figure.Figure
        The figure drawn on; the title gives the share of invalid answers.
    """
    fig, (ax,) = figure_axes(ax, size=(3.2, 3.0))
    d = bias[(bias["subject"] == subject) & (bias["task"] == task) & (bias["answer"] == answer)]
    grid = np.full((2, 2), np.nan)
    for r in d.itertuples(index=False):
        i, j = (int(v) - 1 for v in r.cell.split(","))
        grid[i, j] = r.selected
        ax.text(
            j,
            i,
            f"{r.selected:.2f}\nP {r.precision:.2f}\nR {r.recall:.2f}",
            ha="center",
            va="center",
            fontsize=8,
        )
    ax.imshow(grid, cmap="Blues", vmin=0, vmax=0.5)
    ax.set_xticks([0, 1], ["col 1", "col 2"])
    ax.set_yticks([0, 1], ["row 1", "row 2"])
    invalid = d["invalid"].iloc[0] if len(d) else np.nan
    ax.set_title(f"{subject} · {task}\ninvalid {invalid:.0%}", fontsize=9)
    return fig
