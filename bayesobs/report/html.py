"""The HTML report: figures, tables and provenance in one offline folder."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pandas as pd

from .. import leaderboard as LB
from ..demographics import join_participants
from ..errors import BayesobsInputError
from ..exclusions import summary
from ..fits.controls import anchoring_lines
from ..fits.predictions import predictions
from ..order import NOTE as ORDER_NOTE
from ..order import unordered
from ..paradigms import paradigm_tables_of, registered
from ..plotting import Figure
from ..provenance import provenance, read_manifest
from ..scores import (
    CONSTANT_REASON,
    SCORED_TRIALS,
    Scores,
    bias_variance,
    score,
    with_baseline,
)
from ..scores.cue import cue_predictions
from ..scores.evidence import VERIDICAL_THRESHOLD, evidence_notes, text_column, veridical_lead
from ..scores.references import subjects_only
from ..search.scores import prefer
from ..trials import CELL_KEYS, natural_key, normalize_trials, parse_mapping, read_trials
from . import figures as F
from .calibration import calibration_sections, diagnostics_only, find_diagnostics
from .psychometric import psychometric_sections
from .render import FigureWriter
from .rows import MANY

TABLES = tuple(f for f in Scores._fields if f != "plugins")  # + Scores.plugins
VISUAL = ("line_ratio", "marker_location", "maze_distance")


def _inputs(paths: list[Path]) -> tuple[pd.DataFrame, Scores | None, list[dict]]:
    """Trials, reusable scores and the manifests found among the inputs."""
    scores, frames, trial_paths, manifests = None, [], [], []
    for p in paths:
        found = Scores.from_folder(p) if p.is_dir() else None
        if found is not None:
            scores = found
            man = p / "score_manifest.json"
            m = read_manifest(man) if man.exists() else {}
            if m:
                manifests.append({"source": str(man), **m})
            if (p / SCORED_TRIALS).exists():
                frames.append(read_trials(p / SCORED_TRIALS))
            elif m.get("inputs"):
                frames.append(_manifest_trials(p, m))
                _check_scored(p, found, frames[-1])
            else:
                raise BayesobsInputError(
                    f"{p}: score folder without its trials ({SCORED_TRIALS}) or a manifest naming "
                    "them: give the trial files beside it"
                )
        elif diagnostics_only(p):  # calibrate / fit --prior-predictive output: not trials
            continue
        else:
            trial_paths.append(p)
            if (p / "manifest.json").exists():
                m = read_manifest(p / "manifest.json")
                manifests.append({"source": str(p / "manifest.json"), **m})
    if trial_paths:
        frames.append(read_trials(trial_paths))
    if not frames:
        raise BayesobsInputError("no trials to report on: give trial files or experiment folders")
    trials = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    return trials, scores, manifests


def _check_scored(folder: Path, scores: Scores, trials: pd.DataFrame) -> None:
    """Refuse trials (read from a score manifest's inputs) that lack a (subject, task) scored."""
    fits = scores.fits
    if fits is None or not {"subject", "task"} <= set(fits.columns):
        return
    have = set(zip(trials["subject"].astype(str), trials["task"].astype(str), strict=True))
    lost = set(zip(fits["subject"], fits["task"], strict=True)) - have
    if lost:
        subject, task = sorted(lost)[0]
        raise BayesobsInputError(
            f"{folder}/score_manifest.json names inputs without the trials scored there "
            f"(e.g. subject {subject!r}, task {task!r}; {len(lost)} (subject, task) pair(s)): "
            "run bayesobs score again, which keeps the trials in the folder"
        )


def _manifest_trials(folder: Path, m: dict) -> pd.DataFrame:
    """The trials a score manifest names, read again: only where that evaluates nothing."""
    where = f"{folder}/score_manifest.json"
    plain = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|@file")

    def texts(key: str) -> list[str]:
        v = m.get(key) or []
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise BayesobsInputError(f"{where}: {key!r} must be a list of texts")
        return v

    mapping = parse_mapping(texts("map"))
    recorded = [f"--map {k}={v}" for k, v in mapping.items() if not plain.fullmatch(v)]
    recorded += [f"--{k.replace('_', '-')}" for k in ("where", "missing_where") if m.get(k)]
    if recorded:
        raise BayesobsInputError(
            f"{folder}: score folder without its trials ({SCORED_TRIALS}), and its manifest records "
            f"expressions ({', '.join(recorded)}) that report does not evaluate from a folder: "
            f"run bayesobs score again, which keeps {SCORED_TRIALS} in the folder"
        )
    columns = m.get("columns")
    if columns is not None and not isinstance(columns, str):
        raise BayesobsInputError(f"{where}: 'columns' must be text")
    inputs = []
    for x in texts("inputs"):
        x = Path(x)
        if x.is_absolute() or ".." in x.parts:  # a folder from anyone: nothing outside it
            raise BayesobsInputError(
                f"{where} names {x}, outside the folder (an absolute or '..' path): "
                "run bayesobs score again to keep the trials in the folder"
            )
        if not x.exists():  # scored elsewhere: try the folder and the one above it
            x = next((a / x for a in (folder, folder.resolve().parent) if (a / x).exists()), x)
        if not x.exists():
            raise BayesobsInputError(
                f"{where} names {x}, which is not there (neither from here nor "
                f"from {folder} or above it); run bayesobs score again to keep the trials in the folder"
            )
        inputs.append(x)
    return read_trials(inputs, mapping=mapping, columns=columns.split(",") if columns else None)


FOLD_ROWS = 12  # a longer table or list is folded under a one-line summary
SIDE_BY_SIDE = 4  # at most this many subjects' panels side by side in a row, more below each other


def _table_html(df: pd.DataFrame, digits: int = 3) -> str:
    """A table in its own horizontal scroll box (the page itself never scrolls sideways)."""
    table = df.to_html(
        index=False, float_format=lambda v: f"{v:.{digits}f}", border=0, classes="t", na_rep="n/a"
    )
    return f"<div class=scroll>{table}</div>"


def folded(summary: str, inner: str, n: int, limit: int = FOLD_ROWS) -> str:
    """``inner`` as is when it has at most ``limit`` rows, else folded under ``summary``."""
    if n <= limit:
        return inner
    return f"<details><summary>{html.escape(summary)}</summary>{inner}</details>"


def _folded_table(df: pd.DataFrame) -> str:
    """A table, folded beyond :data:`FOLD_ROWS` rows."""
    return folded(f"All {len(df)} rows", _table_html(df), len(df))


STYLE = (
    "*{box-sizing:border-box}"
    "body{font:14px/1.45 system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;"
    "color:#222;overflow-wrap:anywhere}"
    "img{max-width:100%;height:auto;border:1px solid #ddd;margin:.4em 0}"
    ".scroll{overflow-x:auto;max-width:100%}"
    "table.t{border-collapse:collapse;font-size:12px}"
    ".t td,.t th{padding:2px 8px;border-bottom:1px solid #eee;text-align:right;"
    "overflow-wrap:normal}.m{color:#666}"
    "pre{background:#f6f6f6;padding:1em;overflow:auto;font-size:11px;max-height:30em;"
    "white-space:pre-wrap;overflow-wrap:anywhere}"
    "dl.legend{font-size:12px}dl.legend dt{font-weight:600;float:left;clear:left;width:4em}"
    "dl.legend dd{margin-left:4.5em}ul.warn{color:#a33}"
    "details{margin:.5em 0}summary{cursor:pointer;color:#345}"
    "@media (max-width:600px){body{margin:1em auto;padding:0 .6em}h1{font-size:1.5em}}"
)


def build_report(
    paths, out, bootstrap: int = 30, seed: int = 0, resample: str = "pooled", participants=None
) -> Path:
    """Write ``out/index.html`` with the paper's figures, the tables and provenance."""
    paths = [Path(p) for p in ([paths] if isinstance(paths, (str, Path)) else paths)]
    trials, res, manifests = _inputs(paths)
    if participants:  # (file, id column): the participant export's columns on every trial
        trials = join_participants(trials, *participants)
    diagnostics = find_diagnostics(paths)  # SBC, prior predictive: read (and checked) first
    trials = normalize_trials(trials)
    scheme = resample
    if res is None:
        res = score(trials, bootstrap=bootstrap, seed=seed, resample=resample, references=True)
    else:  # the scheme the score folder's manifest records, if any
        scheme = next((m["resample"] for m in manifests if m.get("resample")), None)
    out = Path(out)
    (out / "figures").mkdir(parents=True, exist_ok=True)
    (out / "tables").mkdir(exist_ok=True)
    written = []
    tables = res.tables()  # the fields (TABLES), then the plug-in paradigms' tables
    for name, table in tables.items():
        if table is not None and len(table.columns):
            table.to_csv(out / "tables" / f"{name}.csv", index=False)
            written.append(name)
    # the registered paradigms (bayesobs.paradigms): their rows, in registry order; the rest
    # are magnitude trials
    found, plugged = pd.Series(False, index=trials.index), []
    for paradigm in registered():
        rows = paradigm.rows(trials) & (True if paradigm.part_of else ~found)
        if rows.any():
            found = found | rows
            plugged.append((paradigm, rows))
    subjects = sorted(trials["subject"].unique())
    head, sections, notes, tail = [], [], [], []
    writer = FigureWriter()  # a large report's figures drawn on the other cores
    save = writer.save
    sections_q, tail_q = [], []  # the heaviest figures (many panels) first: drawn the longest
    if res.psychometric is not None and len(res.psychometric):  # fitted curves over the data
        sections_q, tail_q = psychometric_sections(res, trials, out, save, _folded_table)
    if not found.all():
        magnitude = with_baseline(trials[~found].reset_index(drop=True))
        cue_pred = cue_predictions(magnitude, seed)  # the cue probe's forests, for figure 4
        head, sections, notes = _magnitude_sections(magnitude, res, out, cue_pred, scheme, save)
    for paradigm, rows in plugged:
        mine = paradigm_tables_of(paradigm, tables)
        head_p, sections_p, tail_p = paradigm.report_parts(
            mine, trials[rows], out, save, _table_html
        )
        head += head_p
        sections += sections_p
        tail += tail_p
    sections += sections_q  # on the page after the others, as always
    tail += tail_q
    tail += cot_accuracy_html(res.cot_accuracy)
    tail += calibration_sections(diagnostics, out, save, _table_html)
    writer.close()  # every figure written before the page that shows them
    prov = provenance(command="report", inputs=[str(p) for p in paths])
    excluded = _exclusions(paths)
    if excluded is not None:
        excluded.to_csv(out / "tables" / "exclusions.csv", index=False)
        written.append("exclusions")
    body = [
        f"<h1>bayesobs report</h1><p class=m>{len(trials)} trials · {len(subjects)} subject(s) · "
        f"created {html.escape(prov['created_utc'])}</p>",
        *_exclusions_html(excluded),
        *head,
    ]
    for title, caption, imgs in sections:
        body.append(f"<h2>{html.escape(title)}</h2><p>{html.escape(caption)}</p>")
        body += [
            f'<a href="{src}"><img src="{src}" alt="{html.escape(title)}"></a>' for src in imgs
        ]
    if notes:  # what the data cannot support, one line each, instead of empty panels
        body.append(
            "<h2>Left out</h2><ul class=m>"
            + "".join(f"<li>{html.escape(n)}</li>" for n in notes)
            + "</ul>"
        )
    body += tail  # long tables after the figures
    if res.missing is not None and not res.missing.empty:
        body += ["<h2>Not computed</h2>", *_missing_html(res.missing)]
    links = " · ".join(f'<a href="tables/{n}.csv">{n}.csv</a>' for n in written)
    body += [
        "<h2>Tables</h2>",
        f"<p>{links}</p>",
        "<h2>Provenance</h2>",
        f"<pre>{html.escape(json.dumps({'report': prov, 'inputs': manifests}, indent=2, default=str))}</pre>",
    ]
    page = (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>bayesobs report</title>"
        f"<meta name=viewport content='width=device-width,initial-scale=1'><style>{STYLE}</style></head>"
        f"<body>{''.join(body)}</body></html>"
    )
    index = out / "index.html"
    index.write_text(page)
    return index


def search_sections(tables: dict, trials: pd.DataFrame, out: Path, save, table_html):
    """The visual-search part (the search paradigm's ``report_sections`` hook)."""
    del trials  # the tables hold everything drawn here
    search, bias = tables["search"], tables["search_bias"]
    acc = tables[
        "search_accuracy"
    ]  # error intervals: bootstrap of the mean, within the data's bounds
    base = prefer(search, "ablation", "base")
    cols = [
        "subject",
        "task",
        "condition",
        "answer",
        "n",
        "accuracy",
        "r",
        "p_bonferroni",
        "logistic_slope",
    ]
    tail = [
        "<h2>Visual search: set-size effect</h2>",
        "<p>Point-biserial r of correctness with the number of distractors (Bonferroni-corrected p "
        "across the whole table) and the logistic slope per distractor; base condition. Pop-out: "
        "r near 0; serial search: r clearly negative.</p>",
        folded(f"All {len(base)} rows", table_html(base[cols]), len(base)),
    ]
    sections = []
    ablation = "base" if (acc["ablation"] == "base").any() else acc["ablation"].iloc[0]
    for task in sorted(acc["task"].unique()):
        d = acc[acc["task"] == task]
        subjects = sorted(d["subject"].unique())
        answers = [a for a in ("cell", "coords") if a in set(d["answer"])]
        # a few subjects side by side (a row per answer), more below each other; one legend
        wide = len(subjects) <= SIDE_BY_SIDE
        shape = (len(answers), len(subjects)) if wide else (len(subjects), len(answers))
        fig = Figure(figsize=(3.6 * shape[1], 2.4 * shape[0] + 0.4), layout="constrained")
        axs = fig.subplots(*shape, squeeze=False)
        for i, answer in enumerate(answers):
            for j, subj in enumerate(subjects):
                F.search_curves(
                    acc, subj, task, answer, ablation, ax=axs[i, j] if wide else axs[j, i]
                )
        legends = {}
        for ax in axs.flat:
            if ax.get_legend() is not None:
                ax.get_legend().remove()
            legends.update(zip(*ax.get_legend_handles_labels()[::-1], strict=True))
        fig.legend(
            legends.values(),
            legends.keys(),
            loc="outside upper center",
            ncols=8,
            fontsize=8,
            frameon=False,
        )
        sections.append(
            (
                f"Visual search: {task}",
                "Accuracy (cell answers, dotted: chance) and coordinate "
                "error (point answers, dotted: a refusal's 566 px) against the number of distractors, "
                f"per search condition ({ablation}); bars are 95% intervals (Wilson for accuracy, "
                "bootstrap of the mean for errors, so both stay within their bounds).",
                [save(fig, out / "figures" / f"search_{task}.png")],
            )
        )
    pairs = bias[bias["answer"] == "cell"][["subject", "task"]].drop_duplicates()
    if len(pairs):
        tasks = sorted(pairs["task"].unique())
        subjects = sorted(pairs["subject"].unique())
        fig = Figure(figsize=(2.6 * len(tasks), 2.5 * len(subjects)), layout="constrained")
        axs = fig.subplots(len(subjects), len(tasks), squeeze=False)
        for i, subj in enumerate(subjects):
            for j, task in enumerate(tasks):
                F.search_bias(bias, subj, task, "cell", ax=axs[i, j])
        sections.append(
            (
                "Visual search: response bias",
                "How often each cell was chosen (cell answers), "
                "with its precision (P) and recall (R), and the rate of invalid answers.",
                [save(fig, out / "figures" / "search_bias.png")],
            )
        )
    return sections, tail


def _magnitude_sections(
    trials: pd.DataFrame, res: Scores, out: Path, cue_pred, resample: str | None, save
):
    """The BayesBench part: leaderboard, BCS table and the paper's figures (``save(fig, path)``)."""
    colors = F.subject_colors(trials["subject"])
    pred = predictions(trials, res.fits)
    bv = bias_variance(trials)
    tasks = [t for t in (*VISUAL, "duration", "numerosity") if t in set(trials["task"])]
    sections: list[tuple[str, str, list[str]]] = []
    notes = support_notes(trials, res)
    levels = "level" in pred

    # 1. regression to the mean: per task, the subjects as small multiples
    panels = F.response_panels(pred)
    conds = {(p["task"], p["modality"]): [] for p in panels}
    for p in panels:
        conds[(p["task"], p["modality"])].append(p["condition"])
    for k, p in enumerate(panels):
        fig = F.responses_grid(pred, **p, colors=colors)
        every = set(
            pred[(pred["task"] == p["task"]) & (pred["modality"] == p["modality"])]["condition"]
        )
        which = _condition_note(p["condition"], conds[(p["task"], p["modality"])], len(every))
        sections.append(
            (
                f"Responses against stimuli: {p['task']} ({p['modality']}, {p['condition']})",
                f"{which} Lines are the static-Bayes fits per session"
                + (" and level (one fit per level of the interleaved column)" if levels else "")
                + " (regression to each session's mean); one panel per subject, shared axes.",
                [save(fig, out / "figures" / f"fig1_regression_{k}.png")],
            )
        )
    # 2. trajectories: one panel per subject, its first task drawn above
    first = {}
    for p in panels:
        d = pred[
            (pred["task"] == p["task"])
            & (pred["modality"] == p["modality"])
            & (pred["condition"] == p["condition"])
        ]
        for s in d["subject"].unique():
            first.setdefault(s, (s, p["task"], p["modality"], p["condition"]))
    if first:
        cells = [first[s] for s in sorted(first, key=natural_key)]
        fig = F.trajectory_grid(pred, cells, colors=colors)
        sections.append(
            (
                "Trial-by-trial responses",
                "One session run per subject (its first task and condition drawn above) "
                "against the fitted sequential (Kalman) observer."
                + (f" Caution: {ORDER_NOTE}." if unordered(trials).any() else ""),
                [save(fig, out / "figures" / "fig2_trajectory.png")],
            )
        )
    else:
        notes.append("Trial-by-trial responses: no cell to draw.")
    # 3. steering and noise
    imgs = []
    multimodal = set(
        map(tuple, trials.loc[trials["modality"] == "multimodal", ["subject", "task"]].to_numpy())
    )
    for s in sorted(trials["subject"].unique(), key=natural_key):
        t = next((t for t in VISUAL if t in tasks and (s, t) in multimodal), None)
        if t is None or res.cue.empty:
            continue
        fig = F.steering(bv, res.evidence, res.cue, s, t, color=colors[s])
        if fig is not None:  # None: only base, nothing to compare with
            imgs.append(save(fig, out / "figures" / f"fig3_steering_{len(imgs)}.png"))
    if not imgs and not any(n.startswith("Steering and noise") for n in notes):
        notes.append(
            "Steering and noise: no subject has multimodal trials under a steer_* or noise_* "
            "condition beside base."
        )
    if imgs:
        sections.append(
            (
                "Steering and noise",
                "A: mean squared error split into bias² and variance under "
                "steering; B: evidence for sequential updating; C: the image weight implied by the "
                "linear cue-combination fit under blur (68% bootstrap intervals).",
                imgs,
            )
        )
    # 4. cue-combination fits
    if cue_pred.empty and not any(n.startswith("Cue combination") for n in notes):
        notes.append(
            "Cue combination: no base-condition trials pair text, image and multimodal answers "
            "to one stimulus."
        )
    if not cue_pred.empty:
        groups = cue_pred[["subject", "task"]].drop_duplicates()
        # a few subjects side by side (a row per task), more below each other
        scol = {s: j for j, s in enumerate(sorted(groups["subject"].unique()))}
        trow = {t: i for i, t in enumerate(sorted(groups["task"].unique()))}
        wide = len(scol) <= SIDE_BY_SIDE
        shape = (len(trow), len(scol)) if wide else (len(scol), len(trow))
        fig = Figure(figsize=(3.0 * shape[1], 2.7 * shape[0]), layout="constrained")
        axs = fig.subplots(*shape, squeeze=False)
        for ax in axs.flat:
            ax.set_axis_off()
        for s, t in groups.itertuples(index=False):
            ax = axs[trow[t], scol[s]] if wide else axs[scol[s], trow[t]]
            ax.set_axis_on()
            F.cue_fits(cue_pred, s, t, ax=ax)
        sections.append(
            (
                "Cue combination",
                "Multimodal responses against out-of-fold predictions from the "
                "text and image responses (base condition).",
                [save(fig, out / "figures" / "fig4_cue.png")],
            )
        )
    # 5. summary and 6. BayesBench
    imgs = []
    na = bcs_not_available(res)
    caveats = {s: {"E"} for s in constant_subjects(res.missing)}
    ranked = subjects_only(res.bayesbench)  # the reference rows are in the leaderboard only
    for name, fig in (
        ("fig5_summary", F.summary(res.summary, ranked, colors=colors)),
        ("fig6_bayesbench", F.bayesbench_scores(ranked, colors=colors, caveats=caveats)),
    ):
        if fig is not None:
            imgs.append(save(fig, out / "figures" / f"{name}.png"))
    if _has_bcs(res.bcs_tasks):
        imgs.append(save(F.bcs_table(res.bcs_tasks, na=na), out / "figures" / "fig6_bcs_table.png"))
    if not imgs:
        notes.append(
            "Summary: no subject has both an accuracy and an evidence, efficiency or "
            "consistency number to draw."
        )
    else:
        sections.append(
            (
                "Summary",
                (
                    f"More than {MANY} subjects: one row per subject, named, a panel per number "
                    "(too many for one colour each). "
                    if len(ranked) > MANY
                    else ""
                )
                + "Evidence, efficiency and consistency against accuracy; the BayesBench score "
                "and its parts (bars: full-data estimates; lines: 68% percentile intervals of "
                "the run bootstrap, not confidence intervals, with the bootstrap mean as a dot, "
                "which need not contain the bar; *: a point or mean outside its interval; "
                "diamonds: S_p; hatched: a number the leaderboard flags); BCS per task (68% "
                "percentile intervals of the run bootstrap; n/a where the leaderboard has none).",
                imgs,
            )
        )

    head = _leaderboard_html(res.bayesbench, res.missing, resample)
    head += [f"<p>{html.escape(x)}</p>" for x in veridical_lead(res.evidence)]
    head += _evidence_notes_html(res)
    head += _sequential_controls_html(res)
    if _has_bcs(res.bcs_tasks):
        col = "bcs_mean" if "bcs_mean" in res.bcs_tasks else "bcs"
        head += [
            "<h2>BCS per task</h2>",
            _table_html(bcs_pivot(res.bcs_tasks, col, na), 1),
        ]
        if "bcs_p" in res.bcs_tasks and res.bcs_tasks["bcs_p"].notna().any():
            head += [
                "<p>Robust BCS per task (sum of s_p, METHOD section 9):</p>",
                _table_html(bcs_pivot(res.bcs_tasks, "bcs_p", na), 2),
            ]
        if na.to_numpy().any():
            head.append(
                "<p class=m>n/a: no BCS for that subject and task (constant responses or no "
                "w_prior under any ablation; the leaderboard's BCS is n/a for the same reason).</p>"
            )
    head += extra_ablations_html(res.bcs_extra)
    return head, sections, notes


EXTRA_COLUMNS = (
    "subject",
    "task",
    "ablation",
    "modality",
    "w_base",
    "w_ablation",
    "delta_w",
    "s",
    "s_p",
    "nrmse_base",
    "nrmse_ablation",
    "delta_nrmse",
)


def extra_ablations_html(extra: pd.DataFrame | None) -> list[str]:
    """The ablations outside the paper's BCS (``noise_text``, ``cot``): their shifts, as a table."""
    if extra is None or extra.empty:
        return []
    cols = [c for c in EXTRA_COLUMNS if c in extra.columns]
    return [
        "<h2>Ablations outside the BCS</h2>",
        "<p>Scored like the BCS ablations but never summed into BCS, C or S: delta_w = "
        "w_prior(ablation) - w_prior(base) of the static observer, s its sign as in the BCS; "
        "delta_nrmse = NRMSE(ablation) - NRMSE(base) (negative: more accurate). cot: the "
        "subject reasons step by step before its answer; noise_text: degraded text.</p>",
        _table_html(extra[cols].sort_values(["ablation", "subject", "task"]), 3),
    ]


def cot_accuracy_html(table: pd.DataFrame | None) -> list[str]:
    """Reasoning's effect on the right/wrong tasks (``cot_accuracy.csv``); empty without one."""
    if table is None or table.empty:
        return []
    t = table.copy()
    t["x"] = t["x"].map(lambda v: "all" if v != v else f"{v:g}")
    cols = [
        "subject",
        "paradigm",
        "task",
        "variant",
        "modality",
        "answer",
        "level",
        "x",
        "n_base",
        "n_cot",
        "accuracy_base",
        "accuracy_cot",
        "delta_accuracy",
        "delta_lo",
        "delta_hi",
    ]
    t = t[[c for c in cols if c in t]].fillna("")
    pooled = t[t["x"] == "all"]
    return [
        "<h2>Reasoning (cot): accuracy on the right/wrong tasks</h2>",
        "<p>delta_accuracy = accuracy(cot) - accuracy(base) of the same subject and task "
        "(positive: more often right when reasoning), with the 95% percentile interval of a "
        "trial bootstrap (delta_lo, delta_hi); x = all pools the levels. The magnitude tasks' "
        "shift is delta_nrmse under Ablations outside the BCS.</p>",
        _table_html(pooled, 3),
        folded(
            f"per level ({len(t) - len(pooled)} rows)",
            _table_html(t[t["x"] != "all"], 3),
            len(t) - len(pooled),
            0,
        )
        if len(t) > len(pooled)
        else "",
    ]


def _condition_note(condition: str, drawn: list[str], total: int) -> str:
    """Which condition a grid of responses shows, and why (one sentence)."""
    if condition == "base":
        return "Base condition."
    shown = (
        "each condition gets its own panels"
        if len(drawn) == total
        else (f"the first {len(drawn)} of its {total} conditions get panels")
    )
    return f"Condition {condition}: these trials have no base condition, so {shown}."


def bcs_not_available(res: Scores) -> pd.DataFrame:
    """Subjects by tasks: True where the per-task BCS is not a number one may read."""
    t = res.bcs_tasks
    if t is None or t.empty:
        return pd.DataFrame(dtype=bool)
    grid = t.pivot(index="subject", columns="task", values="subject").notna() & False
    bcs = res.bcs
    if bcs is not None and not bcs.empty and "s" in bcs:
        finite = bcs.assign(ok=bcs["s"].notna()).groupby(["subject", "task"])["ok"].any()
        have = finite.unstack("task").reindex(index=grid.index, columns=grid.columns)
        grid |= ~have.fillna(False).astype(bool)
    bb = res.bayesbench
    if bb is not None and "BCS" in bb:
        gone = set(bb.loc[bb["BCS"].isna(), "subject"])
        grid.loc[grid.index.isin(gone), :] = True
    return grid


def bcs_pivot(bcs_tasks: pd.DataFrame, col: str, na: pd.DataFrame) -> pd.DataFrame:
    """Subjects by tasks of ``col`` with the cells of ``na`` as missing (shown as n/a)."""
    t = bcs_tasks.pivot(index="subject", columns="task", values=col)
    if len(na):
        t = t.mask(na.reindex(index=t.index, columns=t.columns, fill_value=False).astype(bool))
    return t.rename_axis(columns=None).reset_index()


def constant_subjects(missing: pd.DataFrame | None) -> list[str]:
    """Subjects with constant base cells: the leaderboard's caveat on their E applies."""
    if missing is None or missing.empty or "reason" not in missing:
        return []
    m = missing.fillna("").astype(str)
    rows = m[
        (m["reason"] == CONSTANT_REASON)
        & m["component"].str.startswith("fits ")
        & m["component"].str.endswith(" base")
    ]
    return sorted(rows["subject"].unique())


def _has_bcs(bcs_tasks: pd.DataFrame | None) -> bool:
    if bcs_tasks is None or bcs_tasks.empty:
        return False
    col = "bcs_mean" if "bcs_mean" in bcs_tasks else "bcs"
    return bool(bcs_tasks[col].notna().any())


def support_notes(trials: pd.DataFrame, res: Scores) -> list[str]:
    """One line per part of the report the data cannot support (and so is left out)."""
    conds = set(trials["condition"])
    mods = set(trials["modality"])
    notes = []
    if not conds & {*F.STEER[1:], *F.NOISE[1:]}:
        notes.append(
            "Steering and noise: the trials hold only "
            f"{', '.join(sorted(conds))} (no steer_* or noise_* condition to compare with base)."
        )
    if not _has_bcs(res.bcs_tasks):
        notes.append(
            "BCS and consistency C (so the score S): they compare fits under ablation "
            "conditions with base, and these trials have none."
        )
    if not {"text", "image", "multimodal"} <= mods:
        notes.append(
            f"Cue combination and efficiency E: they need text, image and multimodal trials; "
            f"these have {', '.join(sorted(mods))}."
        )
    return notes


def sequential_control_table(evidence: pd.DataFrame) -> pd.DataFrame:
    """P(sequential) of base beside ``context_none`` per subject, task and modality."""
    cols = ["subject", "task", "modality", "base", "context_none"]
    if evidence is None or evidence.empty or "context_none" not in set(evidence["condition"]):
        return pd.DataFrame(columns=cols)
    e = evidence[
        (evidence["factor"] == "sequential") & evidence["condition"].isin(["base", "context_none"])
    ]
    t = e.pivot_table(
        index=["subject", "task", "modality"], columns="condition", values="p", aggfunc="first"
    )
    t = t.reindex(columns=["base", "context_none"]).reset_index()
    t.columns.name = None
    return t[cols]


def _sequential_controls_html(res: Scores) -> list[str]:
    """The in-context-learning control (base vs context_none) and anchoring lines (folded)."""
    out = []
    table = sequential_control_table(res.evidence)
    if len(table):
        out += [
            "<h2>In-context learning control</h2>",
            "<p>P(sequential) with the rolling context (base) beside every trial shown alone "
            "(context_none).</p>",
            folded(f"All {len(table)} cells", _table_html(table, 2), len(table)),
        ]
    hits = anchoring_hits(res.controls)
    lines = anchoring_lines(res.controls)
    if lines:
        items = "".join(f"<li>{html.escape(x)}</li>" for x in lines)
        out += [
            "<h2>Anchoring control</h2>",
            f"<p>{len(lines)} cell(s) where a control that copies part of the previous answer "
            "beats every Kalman observer by AIC: their sequential evidence may be anchoring, "
            "not updating."
            + (f" Caution: {html.escape(ORDER_NOTE)}." if unordered(res.evidence).any() else "")
            + "</p>",
            _table_html(anchoring_summary(hits), 1),
            folded(f"All {len(lines)} cells", f"<ul class=warn>{items}</ul>", len(lines), 0),
        ]
    return out


def veridical_table(evidence: pd.DataFrame | None) -> pd.DataFrame:
    """Cells indistinguishable from the veridical observer or with a boundary Bayesian fit."""
    cols = ["p", "p_veridical", "veridical_dAIC", "boundary"]
    if evidence is None or not len(evidence) or "veridical_dAIC" not in evidence:
        return pd.DataFrame()
    ev = evidence[evidence["factor"] == "bayesian"].drop_duplicates(list(CELL_KEYS))
    flag = (ev["veridical_dAIC"] >= VERIDICAL_THRESHOLD) | (text_column(ev["boundary"]) != "")
    return ev.loc[flag, [*CELL_KEYS, *cols]].reset_index(drop=True)


def _evidence_notes_html(res: Scores) -> list[str]:
    """The bounds of factor evidence, the veridical reference and boundary fits."""
    ev = res.evidence
    if ev is None or not len(ev) or "p_floor" not in ev:
        return []
    ev = ev.assign(boundary=text_column(ev["boundary"]))
    items = "".join(f"<li>{html.escape(x)}</li>" for x in evidence_notes(ev))
    out = ["<h2>Factor evidence: bounds and the veridical reference</h2>", f"<ul>{items}</ul>"]
    table = veridical_table(ev)
    if len(table):
        out.append(
            folded(
                f"{len(table)} flagged cell(s) (P(bayesian) by p and p_veridical)",
                _table_html(table, 3),
                len(table),
            )
        )
    return out


def anchoring_hits(controls: pd.DataFrame | None) -> pd.DataFrame:
    """The rows of ``controls.csv`` where a control beats every Kalman observer by AIC."""
    if controls is None or controls.empty or "delta_aic_kalman" not in controls:
        return pd.DataFrame(columns=["subject", "control", "delta_aic_kalman"])
    return controls[controls["delta_aic_kalman"] < 0]


def anchoring_summary(hits: pd.DataFrame) -> pd.DataFrame:
    """Per subject and control: how many cells it wins and its largest AIC margin."""
    g = hits.groupby(["subject", "control"], sort=False)["delta_aic_kalman"]
    t = pd.DataFrame({"cells": g.size(), "largest AIC margin": -g.min()}).reset_index()
    return t.sort_values(["subject", "control"], key=_natural_order).reset_index(drop=True)


def _natural_order(col: pd.Series) -> pd.Series:
    return col.map(natural_key)


def _missing_html(missing: pd.DataFrame) -> list[str]:
    """``missing.csv`` as counts per reason and component, the full table folded."""
    m = missing.fillna("")
    counts = (
        m.groupby(["reason"], sort=True)
        .agg(rows=("reason", "size"), subjects=("subject", "nunique"))
        .reset_index()
    )
    return [
        _table_html(counts),
        folded(f"All {len(m)} rows (missing.csv)", _table_html(m), len(m), 0),
    ]


def _exclusions(paths: list[Path]) -> pd.DataFrame | None:
    """The ``exclusions.csv`` of the score folders among ``paths`` (``None`` if none has one)."""
    found = [p / "exclusions.csv" for p in paths if (p / "exclusions.csv").is_file()]
    if not found:
        return None
    return pd.concat(
        [pd.read_csv(f, dtype={"subject": str, "rule": str, "level": str}) for f in found],
        ignore_index=True,
    )


def _exclusions_html(table: pd.DataFrame | None) -> list[str]:
    """What was excluded before scoring (catch trials, ``--exclude`` rules), and by which rule."""
    if table is None:
        return []

    inner = _table_html(table)
    return [
        "<h2>Exclusions</h2>",
        f"<p>{html.escape(summary(table))} (applied before every number below; exclusions.csv)</p>",
        folded(f"every exclusion ({len(table)} rows)", inner, len(table)),
    ]


def _leaderboard_html(
    bayesbench: pd.DataFrame, missing: pd.DataFrame | None, resample: str | None = "pooled"
) -> list[str]:
    """Leaderboard table (point estimate beside bootstrap mean and interval), legend, flags."""
    header, rows = LB.board(bayesbench)
    table = pd.DataFrame(rows, columns=header)
    refs = table[table["rank"] == LB.REFERENCE_RANK] if len(table) else table
    table = table.drop(index=refs.index)
    strat = any(c.endswith("_strat_lo") for c in bayesbench.columns)
    note = LB.interval_note(resample, strat) if "S_mean" in bayesbench else LB.NO_BOOTSTRAP_NOTE
    legend = "".join(
        f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in LB.LEGEND.items()
    )
    gone = "".join(
        f"<p class=m>{html.escape(x)}</p>"
        for x in LB.left_out(bayesbench, missing) + LB.adaptive_note(bayesbench)
    )
    if len(header) > 2:  # issue 47: no table of ids without a number
        body = table.to_html(index=False, border=0, classes="t", escape=True)
        unranked = (table["rank"] == LB.UNRANKED).any()
        body = f"<div class=scroll>{body}</div>" + (
            f"<p class=m>{html.escape(LB.UNRANKED_NOTE)}</p>" if unranked else ""
        )
    else:
        n = len(table)
        body = f"<p>No BayesBench number for any of the {n} subject(s).</p>"
    out = [
        "<h2>Leaderboard</h2>",
        body,
        *_reference_html(refs, bayesbench, missing),
        gone,
        f"<p class=m>{html.escape(note)}</p>",
        f"<dl class=legend>{legend}</dl>",
    ]
    flags = LB.subject_flags(missing)
    if flags:
        items = "".join(f"<li>{html.escape(f)}</li>" for f in flags)
        out.append(f"<ul class=warn>{items}</ul>")
    return out


def _reference_html(refs: pd.DataFrame, bayesbench: pd.DataFrame, missing=None) -> list[str]:
    """The leaderboard's reference rows as their own table under it (never ranked)."""
    note = " ".join(LB.reference_note(bayesbench, missing))
    if refs.empty:
        return [f"<p class=m>{html.escape(note)}</p>"] if note else []
    table = refs.drop(columns="rank").to_html(index=False, border=0, classes="t ref", escape=True)
    return [
        "<h3>Reference rows</h3>",
        f"<div class=scroll>{table}</div>",
        f"<p class=m>{html.escape(note)}</p>",
    ]


__all__ = ["build_report"]
