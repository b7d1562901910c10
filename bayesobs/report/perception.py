"""Report figures of the perception tasks (Tunnel Vision ...), and their report section."""

from __future__ import annotations

import html
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ..perceptv import plots
from ..plotting import figure_axes
from ..tunnel.published import TABLE2, references
from .figures import subject_colors

TASK_TITLES = {
    "object_reid": "Object re-identification",
    "scavenger_hunt": "Visual scavenger hunt",
    "circuits": "Circuit connections",
}
_REF_STYLE = {"chance": ("#777777", ":"), "human": ("#2a9d8f", "--")}


def published_lines(task: str) -> pd.DataFrame:
    """The paper's accuracy numbers of a task as rows ``variant, who, value`` (fractions), with source."""
    rows = [
        {"variant": r.variant, "who": r.who, "value": r.value / 100, "source": r.source}
        for r in references(task, metric="accuracy")
    ]
    return pd.DataFrame(rows, columns=["variant", "who", "value", "source"])


def published_table2() -> pd.DataFrame:
    """The paper's Table 2 (circuits): log-odds per px of distance and per crossing, by model."""
    return pd.DataFrame(
        [
            {
                "variant": r.variant,
                "who": r.who,
                "metric": r.metric,
                "value": r.value,
                "note": r.note,
            }
            for r in TABLE2
        ]
    )


def accuracy_by_variant(
    table: pd.DataFrame,
    task: str,
    refs: pd.DataFrame | None = None,
    modality: str = "image",
    ax=None,
) -> Figure:
    """Accuracy per variant and subject (95% Wilson bars) with chance, human and model lines."""
    t = table[(table["task"] == task) & (table["modality"] == modality)]
    t = t[t["condition"] == "base"] if (t["condition"] == "base").any() else t
    t = per_sequence(t)  # the decomposed hunt on the paper's Table 1 metric
    variants = list(dict.fromkeys(t["variant"]))
    fig, (ax,) = figure_axes(ax, size=(max(7.2, 3.6 + 0.45 * len(variants)), 3.6))
    subjects = sorted(t["subject"].unique())
    colors = subject_colors(subjects)
    width = 0.8 / max(len(subjects), 1)
    for i, s in enumerate(subjects):
        r = t[t["subject"] == s].set_index("variant").reindex(variants)
        x = np.arange(len(variants)) + (i - (len(subjects) - 1) / 2) * width
        acc = r["accuracy"].to_numpy(float)
        # rounding can put a Wilson bound a hair past the estimate: no negative bar lengths
        err = np.clip(
            np.vstack([acc - r["lo"].to_numpy(float), r["hi"].to_numpy(float) - acc]), 0, None
        )
        ax.bar(x, acc, width, yerr=err, color=colors[s], label=s, capsize=2)
    paper_chance = False
    for j, v in enumerate(variants):
        own = t[t["variant"] == v]["chance"]
        if len(own):  # the trials' own chance level
            ax.hlines(own.mean(), j - 0.45, j + 0.45, color="#777777", ls=":", lw=1.2)
        theirs = t[t["variant"] == v].get("chance_paper", pd.Series(dtype=float)).dropna()
        if len(theirs) and not np.isclose(theirs.mean(), own.mean()):  # the paper's, if it differs
            ax.hlines(theirs.mean(), j - 0.45, j + 0.45, color="#444444", ls=(0, (1, 3)), lw=1.6)
            paper_chance = True
    handles, _ = ax.get_legend_handles_labels()
    handles.append(Line2D([], [], color="#777777", ls=":", lw=1.2, label="chance of these trials"))
    if paper_chance:
        handles.append(
            Line2D([], [], color="#444444", ls=(0, (1, 3)), lw=1.6, label="chance (paper)")
        )
    if refs is not None and not refs.empty:  # each reference in the legend, none on the plot
        shown = refs[refs["variant"].isin([*variants, "all"]) & (refs["who"] != "chance")]
        styles = reference_styles(list(dict.fromkeys(shown["who"])))
        for j, v in enumerate(variants):
            for r in shown[shown["variant"].isin([v, "all"])].itertuples(index=False):
                color, ls = styles[r.who]
                ax.hlines(r.value, j - 0.45, j + 0.45, color=color, ls=ls, lw=1.4)
        handles += [
            Line2D([], [], color=c, ls=ls, lw=1.4, label=f"paper: {who}" if ls == "-." else who)
            for who, (c, ls) in styles.items()
        ]
    upright = len(variants) > 4 or max(map(len, map(str, variants)), default=0) > 14
    ticks = [f"{v}\n(per sequence)" if v == "decomposed" else v for v in variants]
    ax.set_xticks(np.arange(len(variants)), ticks, fontsize=8, rotation=90 if upright else 0)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("accuracy")
    ax.set_title(f"{TASK_TITLES.get(task, task)} ({modality})", fontsize=10)
    ax.legend(
        handles=handles,
        fontsize=7,
        loc="upper left",
        bbox_to_anchor=(1.02, 1),
        frameon=False,
    )
    return fig


def per_sequence(t: pd.DataFrame) -> pd.DataFrame:
    """Rows of a sequence task (decomposed hunt) with accuracy, interval and chance per sequence."""
    if "sequence_accuracy" not in t.columns or not t["sequence_accuracy"].notna().any():
        return t
    t = t.copy()
    seq = t["sequence_accuracy"].notna()
    for a, b in (
        ("accuracy", "sequence_accuracy"),
        ("lo", "sequence_lo"),
        ("hi", "sequence_hi"),
        ("chance", "sequence_chance"),
    ):
        t.loc[seq, a] = t.loc[seq, b]
    t.loc[seq, "chance_paper"] = np.nan  # the paper states no chance per sequence
    return t


def table1_comparison(acc: pd.DataFrame) -> pd.DataFrame:
    """The decomposed hunt beside the paper's Table 1, on the same metrics."""
    cols = [
        "who",
        "modality",
        "condition",
        "n_sequences",
        "accuracy_per_question",
        "accuracy_per_sequence",
        "final_on_path",
        "final_step_error",
        "final_step_n",
    ]
    rows = []
    if "sequence_accuracy" in acc.columns:
        d = acc[(acc["task"] == "scavenger_hunt") & acc["sequence_accuracy"].notna()]
        for r in d.itertuples(index=False):
            rows.append(
                {
                    "who": r.subject,
                    "modality": r.modality,
                    "condition": r.condition,
                    "n_sequences": int(r.sequence_n),
                    "accuracy_per_question": 100 * r.accuracy,
                    "accuracy_per_sequence": 100 * r.sequence_accuracy,
                    "final_on_path": 100 * r.sequence_final_accuracy,
                    "final_step_error": 100 * r.final_step_error,
                    "final_step_n": int(r.final_step_n),
                }
            )
    paper: dict[str, dict] = {}
    for ref in references("scavenger_hunt", "decomposed"):
        if ref.variant == "decomposed":
            paper.setdefault(ref.who, {})[ref.metric] = ref.value
    for who, m in paper.items():
        rows.append(
            {
                "who": f"paper: {who}",
                "modality": "image",
                "condition": "",
                "n_sequences": 75,
                "accuracy_per_question": np.nan,
                "accuracy_per_sequence": m.get("accuracy", np.nan),
                "final_on_path": np.nan,
                "final_step_error": m.get("final_step_error", np.nan),
                "final_step_n": np.nan,
            }
        )
    return pd.DataFrame(rows, columns=cols)


def reference_styles(who: list[str]) -> dict[str, tuple]:
    """Colour and line style of each published reference line (human dashed, models dash-dot)."""
    palette = ["#e76f51", "#8e44ad", "#b5838d", "#e9c46a", "#6d597a", "#f4a261", "#264653"]
    out, k = {}, 0
    for w in who:
        if w in _REF_STYLE:
            out[w] = _REF_STYLE[w]
        else:
            out[w] = (palette[k % len(palette)], "-.")
            k += 1
    return out


def f1_by_class(f1: pd.DataFrame, task: str = "object_reid", ax=None) -> Figure:
    """Per-class F1 (yes / no) per subject and variant, as the paper's Fig. 3."""
    fig, (ax,) = figure_axes(ax, size=(6.0, 3.4))
    t = f1[f1["task"] == task]
    labels = [f"{s}\n{v}" for s, v in dict.fromkeys(zip(t["subject"], t["variant"], strict=True))]
    keys = list(dict.fromkeys(zip(t["subject"], t["variant"], strict=True)))
    for k, (cls, color) in enumerate((("yes", "#264653"), ("no", "#e9c46a"))):
        vals = [
            t[(t["subject"] == s) & (t["variant"] == v) & (t["class"] == cls)]["f1"].mean()
            for s, v in keys
        ]
        ax.bar(np.arange(len(keys)) + (k - 0.5) * 0.4, vals, 0.4, color=color, label=f"F1 {cls}")
    ax.set_xticks(np.arange(len(keys)), labels, fontsize=6, rotation=60, ha="right")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("F1")
    ax.set_title("Per-class F1 (a yes-sayer has F1 = 0 on no)", fontsize=10)
    ax.legend(fontsize=7)
    return fig


def chain_accuracy(chain: pd.DataFrame, modality: str = "image", ax=None) -> Figure:
    """Scavenger hunt: accuracy against chain length L with the ``(1 - e)^L`` prediction band."""
    fig, (ax,) = figure_axes(ax, size=(5.0, 3.6))
    t = chain[chain["modality"] == modality]
    colors = subject_colors(t["subject"].unique())
    for s, g in t.groupby("subject", sort=True):
        g = g.sort_values("L")
        L, acc = g["L"].to_numpy(float), g["accuracy"].to_numpy(float)
        err = np.clip(
            np.vstack([acc - g["lo"].to_numpy(float), g["hi"].to_numpy(float) - acc]), 0, None
        )
        ax.errorbar(L, acc, yerr=err, color=colors[s], marker="o", capsize=3, label=f"{s} observed")
        if "predicted_guess" in g.columns and g["predicted_guess"].notna().any():
            ax.plot(L, g["predicted_guess"], color=colors[s], ls="--", label=f"{s} s^L+(1-s^L)g")
            ax.fill_between(
                L, g["predicted_guess_lo"], g["predicted_guess_hi"], color=colors[s], alpha=0.15
            )
        if g["predicted"].notna().any():
            ax.plot(L, g["predicted"], color=colors[s], ls=":", label=f"{s} (1-e)^L (paper)")
    ax.axhline(1 / 11, color="#777777", ls=":", lw=1, label="chance (1/11)")
    ax.set_xlabel("chain length L")
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"Compounding error ({modality}): e = decomposed final-step error", fontsize=10)
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.02, 1))
    return fig


def effect_coefficients(
    effects: pd.DataFrame,
    covariate: str,
    task: str = "circuits",
    paper: pd.DataFrame | None = None,
    ax=None,
) -> Figure:
    """Log-odds coefficient of a covariate (+-1.96 SE) per subject and variant, beside the paper's."""
    fig, (ax,) = figure_axes(ax, size=(5.6, 3.6))
    t = effects[
        (effects["task"] == task)
        & (effects["covariate"] == covariate)
        & (effects["model"] == "univariate")
    ]
    t = t[t["modality"] == "image"] if (t["modality"] == "image").any() else t
    rows = list(t.itertuples(index=False))
    colors = subject_colors([r.subject for r in rows])
    for i, r in enumerate(rows):
        if np.isfinite(r.coef):
            ax.errorbar(
                r.coef,
                i,
                xerr=1.96 * r.se if np.isfinite(r.se) else None,
                fmt="o",
                color=colors[r.subject],
                capsize=3,
            )
    labels = [
        f"{r.subject} {r.variant}" + ("" if np.isfinite(r.coef) else f" ({r.note})") for r in rows
    ]
    metric = {"distance_px": "log_odds_distance", "crossings": "log_odds_crossings"}.get(covariate)
    if paper is not None and metric is not None:
        p = paper[paper["metric"] == metric]
        for k, r in enumerate(p.itertuples(index=False)):
            y = len(rows) + k
            ax.plot(r.value, y, marker="s", color="#e76f51")
            labels.append(f"paper: {r.who} {r.variant}")
    ax.axvline(0, color="#777777", lw=0.8)
    ax.set_yticks(np.arange(len(labels)), labels, fontsize=6)
    ax.set_xlabel(f"log-odds per unit of {covariate}")
    ax.set_title(f"{TASK_TITLES.get(task, task)}: correctness on {covariate}", fontsize=10)
    return fig


def accuracy_by_size(size: pd.DataFrame, task: str, modality: str = "image", ax=None) -> Figure:
    """Accuracy against problem size per subject (pooled variants shown separately by marker)."""
    fig, (ax,) = figure_axes(ax, size=(5.0, 3.4))
    t = size[(size["task"] == task) & (size["modality"] == modality)]
    colors = subject_colors(t["subject"].unique())
    markers = dict(zip(dict.fromkeys(t["variant"]), "osD^v<>", strict=False))
    for (s, v), g in t.groupby(["subject", "variant"], sort=True):
        g = g.sort_values("problem_size")
        ax.plot(
            g["problem_size"],
            g["accuracy"],
            color=colors[s],
            marker=markers.get(v, "o"),
            label=f"{s} {v}",
        )
        ax.plot(g["problem_size"], g["chance"], color="#777777", ls=":", lw=0.8)
    ax.set_xlabel("problem size")
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"{TASK_TITLES.get(task, task)}: accuracy by problem size", fontsize=10)
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.02, 1))
    return fig


#: the perception paradigm's tables (bayesobs.tunnel.scores) read by :func:`perception_report`
PERCEPTION_TABLES = (
    "perception",
    "perception_size",
    "perception_effects",
    "perception_f1",
    "perception_chain",
)


def perception_report(tables, trials: pd.DataFrame, out: Path, save, table_html):
    """The perception paradigm's ``report_sections`` hook: :func:`perception_sections` of its tables."""
    del trials  # the tables hold everything drawn here
    if tables.get("perception") is None:
        return [], [], []
    res = SimpleNamespace(**{name: tables.get(name) for name in PERCEPTION_TABLES})
    head, sections = perception_sections(res, out, save, table_html)
    return head, sections, []


def perception_sections(res, out: Path, save, table_html) -> tuple[list[str], list[tuple]]:
    """The report's perception part: accuracy, F1, chains, effects (figures under ``out/figures``)."""
    acc = res.perception
    head = [
        "<h2>Perception tasks: accuracy</h2>",
        "<p>Accuracy per question with 95% Wilson intervals; an invalid reply counts as "
        "wrong (invalid_rate). Two chance levels: <i>chance</i> is the mean of the trials' "
        "own chance (a guess among the options each trial shows: 1/n for a circuit of n "
        "components, so E[1/n]), <i>chance_paper</i> the level the paper states (circuits: "
        "1/7 = 1/E[n] for 4 to 10 components, which is below E[1/n] because 1/n is convex); "
        "p_above_chance and p_above_chance_paper are exact one-sided binomial tests against "
        "each, and a comparison with the paper uses the paper's. The decomposed scavenger "
        "hunt adds the paper's Table 1 metrics per three-step sequence (sequence_*: every "
        "step right; final_step_error: conditional on the first two steps right); its "
        "figure bar is per sequence.</p>",
        table_html(acc),
    ]
    table1 = table1_comparison(acc)
    if (~table1["who"].str.startswith("paper: ")).any():
        head += [
            "<h3>Decomposed scavenger hunt against the paper's Table 1</h3>",
            "<p>Each step asked from the subject's own previous answer (Sec. 4.2). "
            "accuracy_per_sequence: every step right, the metric the paper names; "
            "final_on_path: the final colour is the gold path's by any path. The paper's "
            "weaker rows (e.g. 24% accuracy with an 85% final-step error) are impossible "
            "if accuracy needs every step right, so compare them with final_on_path too "
            "(docs/method.md).</p>",
            table_html(table1),
        ]
    sections = []
    figs = out / "figures"
    for task in dict.fromkeys(acc["task"]):
        refs = published_lines(task) if task in TASK_TITLES else None
        for modality in dict.fromkeys(acc[acc["task"] == task]["modality"]):
            fig = accuracy_by_variant(acc, task, refs, modality)
            src = save(fig, figs / f"perception_{task}_{modality}.png")
            note = (
                " Lines: dotted chance, dashed human, dash-dot the paper's models."
                if refs is not None
                else ""
            )
            sections.append(
                (
                    f"{TASK_TITLES.get(task, task)} ({modality})",
                    f"Accuracy per variant and subject.{note}",
                    [src],
                )
            )
        size = res.perception_size
        if task == "percept_v":  # its own section, per domain and subject (perceptv_sections)
            size = None
        if size is not None and len(size) and (size["task"] == task).any():
            fig = accuracy_by_size(size, task)
            sections.append(
                (
                    f"{TASK_TITLES.get(task, task)}: problem size",
                    "Accuracy by problem size (dotted: chance).",
                    [save(fig, figs / f"perception_size_{task}.png")],
                )
            )
    f1 = res.perception_f1
    if f1 is not None and len(f1):
        for task in dict.fromkeys(f1["task"]):
            sections.append(
                (
                    "Per-class F1",
                    "F1 of yes and of no (the paper's Fig. 3).",
                    [save(f1_by_class(f1, task), figs / f"perception_f1_{task}.png")],
                )
            )
    chain = res.perception_chain
    if chain is not None and len(chain):
        imgs = [
            save(chain_accuracy(chain, m), figs / f"perception_chain_{m}.png")
            for m in dict.fromkeys(chain["modality"])
        ]
        sections.append(
            (
                "Scavenger hunt: compounding error",
                "Observed accuracy per chain length L against s^L + (1 - s^L) g (dashed, "
                "band: from e's 95% interval), s = (1 - e - g) / (1 - g) the step skill, "
                "g = 1/11 a lucky colour, e the decomposed final-step error conditional on "
                "reaching the final step; dotted: the paper's (1 - e)^L, which leaves out "
                "guessing and so flags a random answerer.",
                imgs,
            )
        )
    eff = res.perception_effects
    if eff is not None and len(eff) and (eff["task"] == "circuits").any():
        paper = published_table2()
        imgs = [
            save(
                effect_coefficients(eff, cov, "circuits", paper),
                figs / f"perception_effect_{cov}.png",
            )
            for cov in ("distance_px", "crossings")
            if (eff["covariate"] == cov).any()
        ]
        sections.append(
            (
                "Circuits: Table 2 regressions",
                "Univariate logistic regressions of correctness on port distance and on "
                "crossings (log-odds, bars: 95% Wald intervals); squares: the paper's "
                "Table 2.",
                imgs,
            )
        )
        head += [
            "<h2>Perception tasks: covariate effects</h2>",
            f"<p>{html.escape('Logistic regressions of correctness (perception_effects.csv).')}</p>",
            table_html(eff[eff["task"] == "circuits"]),
        ]
    return head, sections


def perceptv_report(tables, trials: pd.DataFrame, out: Path, save, table_html):
    """The Percept-V paradigm's ``report_sections`` hook: :func:`perceptv_sections`."""
    del trials, table_html  # the tables hold everything drawn here; no table is shown
    res = SimpleNamespace(
        perception_size=tables.get("perception_size"), perceptv_skills=tables.get("perceptv_skills")
    )
    return [], perceptv_sections(res, out / "figures", save), []


def perceptv_sections(res, figs: Path, save) -> list[tuple]:
    """Percept-V figures: accuracy against size per domain and subject, skills vs published models."""
    size = res.perception_size
    out = []
    if size is not None and len(size) and (size["task"] == "percept_v").any():
        s = size[size["task"] == "percept_v"].rename(columns={"variant": "domain"})
        s = s.assign(accuracy=100 * s["accuracy"])
        imgs = []
        for k, subject in enumerate(dict.fromkeys(s["subject"])):
            fig = plots.plot_accuracy_vs_size(s, subject=subject)
            fig.axes[0].set_title(str(subject))
            imgs.append(save(fig, figs / f"perceptv_size_{k}.png"))
        out.append(
            (
                "Percept-V: accuracy against problem size",
                "Accuracy (%) per domain against problem size, one panel per subject.",
                imgs,
            )
        )
    skills = res.perceptv_skills
    if skills is not None and len(skills):
        fig = plots.plot_skills(skills)
        out.append(
            (
                "Percept-V: skills",
                "Skill scores (mean accuracy of each skill's Table 1 domains) per subject; "
                "markers: the published models (Table 3). A partial run gives partial means "
                "(perceptv_skills.csv: n_domains of n_tagged).",
                [save(fig, figs / "perceptv_skills.png")],
            )
        )
    return out
