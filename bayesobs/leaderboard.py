"""The BayesBench leaderboard as the terminal and the HTML report show it."""

from __future__ import annotations

import math
import textwrap

import pandas as pd

from .scores import CONSTANT_REASON, FEW_RUNS_REASON, PERFECT_REASON
from .scores.references import HUMAN, KINDS, is_reference, subjects_only
from .trials import natural_key

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


def interval_note(resample: str | None = "pooled", stratified: bool = False) -> str:
    """What the leaderboard's intervals are, and why a point can sit outside its own."""
    scheme = (
        f"the {resample} run bootstrap"
        if resample
        else "the run bootstrap (pooled unless the scores were made with --resample stratified)"
    )
    note = (
        f"point = full data; mean [lo, hi] = bootstrap mean and 68% percentile interval of "
        f"{scheme} (METHOD section 7): the spread of the replicates, not a confidence interval; "
        "* = a point estimate or bootstrap mean outside its interval. They can differ because "
        "BCS, C and S add up signs, which shrink under resampling, and with one run per session "
        "type the pooled bootstrap mixes runs of different session types and has only a handful "
        "of distinct resamples (--resample stratified needs 2+ runs per type)."
    )
    if stratified:
        note += (
            " strat [lo, hi] = the 68% percentile interval of the stratified run bootstrap "
            "(runs drawn within each session type), given where every cell has 2+ runs per type."
        )
    return note


INTERVAL_NOTE = interval_note()
#: the rank column of a reference row (never ranked among the subjects)
REFERENCE_RANK = "ref"
#: the rank column of a subject without S: nothing to rank it by (issue 47)
UNRANKED = "-"
UNRANKED_NOTE = (
    f"{UNRANKED} = not ranked: no S to rank by (S needs A, E and C); rows without S are "
    "listed in natural order of their ids"
)
REFERENCE_LEGEND: dict[str, str] = {
    "random": "reference:random answers uniformly over each session's response range",
    "ideal": "reference:ideal answers the Bayes-optimal posterior mean given the simulated "
    "subjects' perceptual noise and the session's stimulus distribution (on the cells of "
    "subjects bayesobs run prompted, never people's)",
    "humans": "reference:humans pools the human participants' trials (--humans)",
    HUMAN: "a subject marked human (--humans) is shown as a reference",
}
NO_BOOTSTRAP_NOTE = "S_p and BCS_p need bootstrap replicates (--bootstrap B > 0)."
#: the terminal leaderboard, its notes and warnings fit this many columns
WIDTH = 100
#: longest subject name shown in the terminal (longer ones are cut in the middle)
SUBJECT_WIDTH = 30
# what each number needs, for the line that says why a column is left out
NEEDS: dict[str, str] = {
    "A": "needs base-condition trials",
    "E": "needs base-condition text, image and multimodal trials",
    "S": "needs A, E and C",
    "S_p": "needs A, E and BCS_p",
    "C": "needs the BCS",
    "BCS": "needs base and ablation fits of the multimodal tasks",
    "BCS_p": "needs the BCS and bootstrap replicates",
}


def _num(val, digits: int) -> str:
    if val is None or (isinstance(val, float) and math.isnan(val)):
        return "n/a"
    return f"{val:.{digits}f}"


def shown_metrics(bayesbench: pd.DataFrame) -> list[tuple[str, int]]:
    """The :data:`METRICS` that at least one subject has (point or bootstrap mean)."""
    shown = []
    for name, digits in METRICS:
        cols = [c for c in (name, f"{name}_mean") if c in bayesbench]
        if cols and bayesbench[cols].notna().to_numpy().any():
            shown.append((name, digits))
    return shown


def left_out(bayesbench: pd.DataFrame, missing: pd.DataFrame | None = None) -> list[str]:
    """One line naming the leaderboard columns that no subject has, each with its reason."""
    bayesbench = subjects_only(bayesbench)  # "no subject has them": the references aside
    shown = {n for n, _ in shown_metrics(bayesbench)}
    gone = [n for n, _ in METRICS if n not in shown]
    if not gone:
        return []
    reasons: dict[str, list[str]] = {}
    m = None
    if missing is not None and len(missing) and {"component", "reason"} <= set(missing.columns):
        m = missing.astype({"component": str, "reason": str})
    for name in gone:
        why = None
        if m is not None:
            hit = m.loc[m["component"] == name, "reason"]
            if len(hit):
                why = hit.value_counts().index[0]
        if why is None:
            if name in ("S_p", "BCS_p") and "S_mean" not in bayesbench:
                why = "need bootstrap replicates (--bootstrap B > 0)"
            else:
                why = NEEDS.get(name, "not computed")
        reasons.setdefault(why, []).append(name)
    parts = "; ".join(f"{', '.join(names)} ({why})" for why, names in reasons.items())
    return [f"left out, no subject has them: {parts}"]


def _short(name: str, width: int = SUBJECT_WIDTH) -> str:
    """``name`` cut in the middle to ``width`` characters."""
    if len(name) <= width:
        return name
    keep = width - 1
    return name[: (keep + 1) // 2] + "…" + name[len(name) - keep // 2 :]


def _outside(row, name: str, value: str | None = None, interval: str = "") -> bool:
    """Whether ``row[value]`` (default ``row[name]``) lies outside ``[name{interval}_lo, _hi]``."""
    val = row.get(value or name)
    lo, hi = row.get(f"{name}{interval}_lo"), row.get(f"{name}{interval}_hi")
    if any(v is None or v != v for v in (val, lo, hi)):
        return False
    tol = 1e-12 * max(1.0, abs(val))
    return bool(val < lo - tol or val > hi + tol)


def subject_flags(missing: pd.DataFrame | None) -> list[str]:
    """Warnings about subjects whose numbers can mislead, from ``missing.csv`` rows."""
    lines: list[str] = []
    if missing is None or missing.empty or "reason" not in missing:
        return lines
    m = missing.fillna("").astype({"subject": str, "component": str, "reason": str})
    fits = m[(m["reason"] == CONSTANT_REASON) & m["component"].str.startswith("fits ")]
    for subject, g in sorted(fits.groupby("subject"), key=lambda kv: natural_key(kv[0])):
        base = int(g["component"].str.endswith(" base").sum())
        lines.append(
            f"{subject}: {CONSTANT_REASON} in {base} base cell(s) ({len(g)} cell(s) in all): "
            "no evidence and no BCS from them (METHOD section 8); its E compares constant answers and says "
            "nothing about cue combination"
        )
    exact = m[(m["reason"] == PERFECT_REASON) & (m["component"] == "E")]
    for subject in sorted(exact["subject"].unique(), key=natural_key):
        lines.append(
            f"{subject}: E and S not computed ({PERFECT_REASON}); it is not ranked (listed after every "
            "subject with S) although its answers are exact"
        )
    few = m[m["reason"] == FEW_RUNS_REASON]
    if len(few):
        n = few["component"].str.extract(r"(\d+) of \d+").astype(float).sum()
        subjects = sorted(few["subject"].unique(), key=natural_key)
        names = ", ".join(subjects[:4]) + (
            f" and {len(subjects) - 4} more" if len(subjects) > 4 else ""
        )
        lines.append(
            f"{FEW_RUNS_REASON} in {int(n[0])} cell(s) of {len(subjects)} "
            f"subject(s) ({names}): the bootstrap intervals rest on few distinct resamples"
        )
    return lines


def board(bayesbench: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Header and rows (strings) of the leaderboard, best ``S`` first."""
    refs = is_reference(bayesbench).to_numpy()
    order = sorted(
        range(len(bayesbench)),
        key=lambda i: (
            bool(refs[i]),  # reference rows after every subject, never ranked
            _reference_order(bayesbench["reference"].iloc[i]) if refs[i] else 0,
            _sort_score(bayesbench["S"].iloc[i] if "S" in bayesbench else None),
            natural_key(bayesbench["subject"].iloc[i]),
        ),
    )
    rows = bayesbench.iloc[order]
    boot = "S_mean" in bayesbench
    metrics = shown_metrics(subjects_only(bayesbench) if not refs.all() else bayesbench)
    header = ["rank", "subject"]
    strat = {name for name, _ in metrics if f"{name}_strat_lo" in bayesbench}
    for name, _ in metrics:
        header += [name, f"{name} mean [68%]"] if boot else [name]
        if name in strat:
            header.append(f"{name} strat [68%]")
    lines = []
    rank = 0
    for k, (_, r) in enumerate(rows.iterrows()):
        if refs[order[k]]:
            line = [REFERENCE_RANK, str(r["subject"])]
        elif _sort_score(r.get("S"))[0]:  # no S: nothing to rank it by
            line = [UNRANKED, str(r["subject"])]
        else:
            rank += 1
            line = [str(rank), str(r["subject"])]
        for name, d in metrics:
            point = _num(r.get(name), d) + ("*" if _outside(r, name) else "")
            line.append(point)
            if boot:
                mean, lo, hi = (r.get(f"{name}_{k}") for k in ("mean", "lo", "hi"))
                star = "*" if _outside(r, name, f"{name}_mean") else ""
                line.append(
                    "n/a"
                    if mean is None or mean != mean
                    else f"{_num(mean, d)}{star} [{_num(lo, d)}, {_num(hi, d)}]"
                )
            if name in strat:
                lo, hi = r.get(f"{name}_strat_lo"), r.get(f"{name}_strat_hi")
                star = "*" if _outside(r, name, name, "_strat") else ""
                line.append(
                    "n/a" if lo is None or lo != lo else f"[{_num(lo, d)}, {_num(hi, d)}]{star}"
                )
        lines.append(line)
    return header, lines


def _reference_order(kind) -> tuple:
    """Reference rows in the order of :data:`bayesobs.scores.references.KINDS`, then humans."""
    kind = str(kind)
    return (KINDS.index(kind), "") if kind in KINDS else (len(KINDS), kind)


def reference_note(bayesbench: pd.DataFrame, missing: pd.DataFrame | None = None) -> list[str]:
    """One line saying what the reference rows are; empty when the table has none."""
    refs = is_reference(bayesbench)
    kinds = set(bayesbench.loc[refs, "reference"].astype(str)) if refs.any() else set()
    withheld = []
    if missing is not None and len(missing) and {"component", "reason"} <= set(missing.columns):
        withheld = list(missing.loc[missing["component"] == "reference", "reason"].astype(str))
    if not kinds:
        return ["; ".join(withheld) + "."] if withheld else []
    said = [REFERENCE_LEGEND[k] for k in (*KINDS, HUMAN) if k in kinds]
    return [
        f"{REFERENCE_RANK} = a reference row, not ranked: scored by the same code on the same "
        "cells as the subjects (docs/method.md, Reference rows): "
        + "; ".join(said + withheld)
        + "."
    ]


def _sort_score(val) -> tuple:
    """Best S first, subjects without S last."""
    if val is None or val != val:
        return (1, 0.0)
    return (0, -float(val))


def _blocks(header: list[str], lines: list[list[str]], width: int) -> list[list[str]]:
    """The table as text blocks no wider than ``width``; each repeats rank and subject."""
    cols = list(zip(header, *lines, strict=True))
    cols[1] = tuple(_short(x) for x in cols[1])
    widths = [max(len(x) for x in col) for col in cols]
    # the point estimates side by side first, then the intervals
    points = [j for j in range(2, len(cols)) if not header[j].endswith(" [68%]")]
    groups = [points] + [[j] for j in range(2, len(cols)) if j not in points]
    key_w = widths[0] + 2 + widths[1]
    blocks: list[list[int]] = []
    current: list[int] = []
    used = key_w
    for k, g in enumerate(groups):
        add = sum(widths[j] + 2 for j in g)
        if current and (k == 1 or used + add > width):
            blocks.append(current)
            current, used = [], key_w
        current += g
        used += add
    blocks.append(current)
    out = []
    for block in blocks:
        idx = [0, 1, *block]
        text = []
        for row in range(len(lines) + 1):
            cells = [cols[j][row].ljust(widths[j]) for j in idx]
            text.append("  ".join(cells).rstrip())
        out.append(text)
    return out


def wrap(line: str, width: int = WIDTH) -> str:
    """``line`` wrapped to ``width`` columns, continuation lines indented by two."""
    return textwrap.fill(line, width=width, subsequent_indent="  ", break_on_hyphens=False)


def text_table(table: pd.DataFrame, width: int = WIDTH, indent: int = 2) -> str:
    """A table of strings as aligned text no wider than ``width``."""
    table = table.astype(str)
    same = [c for c in table.columns if len(table) > 1 and table[c].nunique() == 1]
    shown = table.drop(columns=same)
    cols = {c: [str(c), *shown[c]] for c in shown.columns}
    widths = {c: max(len(x) for x in v) for c, v in cols.items()}

    def total() -> int:
        return indent + sum(widths.values()) + 2 * max(len(widths) - 1, 0)

    while widths and total() > width:  # cut the widest column, never below 8
        c = max(widths, key=widths.get)
        if widths[c] <= 8:
            break
        widths[c] -= 1
    pad = " " * indent
    out = []
    if same:
        out.append(wrap(pad + ", ".join(f"{c}: {table[c].iloc[0]}" for c in same), width))
    for row in range(len(shown) + 1):
        cells = [_short(cols[c][row], widths[c]).ljust(widths[c]) for c in shown.columns]
        out.append((pad + "  ".join(cells)).rstrip())
    return "\n".join(out)


def adaptive_note(bayesbench: pd.DataFrame) -> list[str]:
    """A line naming the subjects whose numbers come from an adaptive sweep (issue 53)."""
    if "adaptive" not in bayesbench or not bayesbench["adaptive"].fillna(False).astype(bool).any():
        return []
    who = ", ".join(
        map(str, bayesbench.loc[bayesbench["adaptive"].fillna(False).astype(bool), "subject"])
    )
    return [
        f"{who}: from an adaptive sweep (sweep --adaptive): cells whose conclusion was answered "
        "early have fewer runs than the fixed protocol, so their intervals are wider; the rule, "
        "its thresholds and every stop are in the experiment folder's manifest.json"
    ]


def leaderboard_text(
    bayesbench: pd.DataFrame,
    missing: pd.DataFrame | None = None,
    width: int = WIDTH,
    resample: str | None = "pooled",
) -> str:
    """Plain-text leaderboard that fits ``width`` columns."""
    header, lines = board(bayesbench)
    out: list[str] = []
    if len(header) > 2:
        for i, block in enumerate(_blocks(header, lines, width)):
            if i:
                out.append("")
            out += block
    else:
        n = len(subjects_only(bayesbench))
        out.append(f"no BayesBench number for any of the {n} subject(s)")
    if len(header) > 2 and any(r[0] == UNRANKED for r in lines):
        out.append(wrap(f"note: {UNRANKED_NOTE}", width))
    out += [wrap(f"note: {line}", width) for line in left_out(bayesbench, missing)]
    out += [wrap(f"note: {line}", width) for line in reference_note(bayesbench, missing)]
    out += [wrap(f"note: {line}", width) for line in adaptive_note(bayesbench)]
    if len(header) > 2:
        strat = any(c.endswith("_strat_lo") for c in bayesbench.columns)
        note = interval_note(resample, strat) if "S_mean" in bayesbench else NO_BOOTSTRAP_NOTE
        out.append(wrap(f"note: {note}", width))
    out += [wrap(f"warning: {line} (see missing.csv)", width) for line in subject_flags(missing)]
    return "\n".join(out)


def cot_accuracy_summary(table: pd.DataFrame) -> str:
    """Plain-text digest: the rows pooling every level (the per-level rows are in the CSV)."""
    pooled = table[table["x"].isna()]
    rows = [
        {
            "subject": r.subject,
            "paradigm": r.paradigm,
            "task": r.task + (f" {r.variant}" if str(r.variant) not in ("", "nan") else ""),
            "modality": r.modality,
            "base": f"{r.accuracy_base:.2f}",
            "cot": f"{r.accuracy_cot:.2f}",
            "cot - base [95%]": f"{r.delta_accuracy:+.2f} [{r.delta_lo:+.2f}, {r.delta_hi:+.2f}]",
            "n": f"{r.n_base}/{r.n_cot}",
        }
        for r in pooled.itertuples(index=False)
    ]
    return text_table(pd.DataFrame(rows))


__all__ = [
    "LEGEND",
    "METRICS",
    "WIDTH",
    "board",
    "cot_accuracy_summary",
    "interval_note",
    "leaderboard_text",
    "left_out",
    "reference_note",
    "search_summary",
    "search_text",
    "shown_metrics",
    "subject_flags",
    "text_table",
    "wrap",
]


def search_summary(search) -> str:
    """Plain-text digest of search.csv: base ablation and cell answers where present (all rows are in the file)."""
    from .search.scores import prefer  # start-up time: scipy.stats only for a search digest

    t = prefer(prefer(search, "ablation", "base"), "answer", "cell")
    rows = [
        {
            "subject": r.subject,
            "task": r.task,
            "condition": r.condition,
            "answer": r.answer,
            "accuracy": f"{r.accuracy:.2f}",
            "r": "n/a" if r.r != r.r else f"{r.r:+.2f}",
            "p": "n/a" if r.p_bonferroni != r.p_bonferroni else f"{r.p_bonferroni:.2g}",
        }
        for r in t.itertuples(index=False)
    ]
    return text_table(pd.DataFrame(rows))


def search_text(tables: dict[str, pd.DataFrame], out) -> str:
    """The visual-search paradigm's terminal summary (its ``summary`` hook): heading and digest."""
    head = wrap(
        "Visual search: accuracy and set-size effect (r: point-biserial, Bonferroni p; "
        f"every ablation and answer mode in {out}/search.csv)"
    )
    return f"{head}\n{search_summary(tables['search'])}"


def perception_summary(table) -> str:
    """Plain-text digest of perception.csv, one line per subject x task x variant x modality."""

    def chance(r) -> str:  # the trials' own; the paper's beside it where it differs
        paper = getattr(r, "chance_paper", math.nan)
        if paper == paper and not math.isclose(paper, r.chance, abs_tol=5e-3):
            return f"{r.chance:.2f} (paper {paper:.2f})"
        return f"{r.chance:.2f}"

    def sequence(r) -> str:  # the decomposed hunt: every step right (Table 1's metric)
        acc = getattr(r, "sequence_accuracy", math.nan)
        return f"{acc:.2f} of {int(r.sequence_n)}" if acc == acc else ""

    rows = [
        {
            "subject": r.subject,
            "task": r.task,
            "variant": r.variant,
            "modality": r.modality,
            "condition": r.condition,
            "accuracy [95%]": f"{r.accuracy:.2f} [{r.lo:.2f}, {r.hi:.2f}]",
            "chance": chance(r),
            "n": str(r.n),
            "invalid": f"{r.invalid_rate:.0%}",
            "per sequence": sequence(r),
        }
        for r in table.itertuples(index=False)
    ]
    out = pd.DataFrame(rows)
    if not out["per sequence"].astype(bool).any():
        out = out.drop(columns="per sequence")
    return text_table(out)


def perception_text(tables: dict[str, pd.DataFrame], out) -> str:
    """The perception paradigm's terminal summary (its ``summary`` hook): heading and digest."""
    if tables.get("perception") is None:
        return ""
    head = wrap(
        "Perception tasks: accuracy per question (95% Wilson interval) against the "
        "trials' chance (the paper's where it differs; per sequence: every step right) "
        f"(every table in {out}/perception*.csv)"
    )
    return f"{head}\n{perception_summary(tables['perception'])}"


def hvs_text(tables: dict[str, pd.DataFrame], out) -> str:
    """The hvs paradigm's terminal summary (its ``summary`` hook): heading and digest."""
    table = tables.get("hvs")
    if table is None or not len(table.columns):
        return ""
    from .hvs.logged import hvs_summary  # start-up time: the HVS modules load only for hvs rows

    head = wrap(f"HVSBench-style questions (accuracy; all columns in {out}/hvs.csv)")
    return f"{head}\n{hvs_summary(table)}"
