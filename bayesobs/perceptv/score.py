"""Percept-V scoring: pure functions from a trial table to the paper's tables."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from . import DOMAINS, chance
from .common import ANSWER_TYPES, Trial
from .parse import parse
from .published import COUNTING_DOMAINS, SKILL_DOMAINS, SKILLS


def trial_row(trial: Trial, subject: str, reply: str | None) -> dict:
    """One trial-table row: the reply parsed and scored against the trial's gold answer."""
    value, why = parse(trial.answer_format, reply)
    return {
        "subject": subject,
        "domain": trial.domain,
        "problem_size": trial.size,
        "answer_type": trial.answer_type,
        "answer_format": trial.answer_format,
        "gold": trial.answer,
        "reply": reply,
        "value": value,
        "valid": int(why is None),
        "format_error": why or "",
        "correct": int(trial.is_correct(value)),
        "chance": chance(trial.domain, trial.size, **trial.meta.get("options", {})),
    }


def _frame(rows) -> pd.DataFrame:
    df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    need = {"subject", "domain", "problem_size", "answer_type", "correct", "valid"}
    missing = need - set(df.columns)
    if missing:
        raise ValueError(f"trial table lacks columns {sorted(missing)}")
    return df


def domain_table(rows) -> pd.DataFrame:
    """Per subject and domain: ``n``, ``accuracy``, ``format_errors`` and ``chance`` (%)."""
    df = _frame(rows)
    if "chance" not in df.columns:
        df = df.assign(
            chance=[chance(d, s) for d, s in zip(df.domain, df.problem_size, strict=True)]
        )
    g = df.groupby(["subject", "domain"], sort=True)
    out = g.agg(
        n=("correct", "size"),
        accuracy=("correct", "mean"),
        format_errors=("valid", lambda v: 1 - np.mean(v)),
        chance=("chance", "mean"),
    ).reset_index()
    for c in ("accuracy", "format_errors", "chance"):
        out[c] = 100 * out[c]
    out["answer_type"] = [DOMAINS[d].answer_type if d in DOMAINS else "" for d in out.domain]
    out["skills"] = [";".join(s for s in SKILLS if d in SKILL_DOMAINS[s]) for d in out.domain]
    out["counting"] = [int(d in COUNTING_DOMAINS) for d in out.domain]
    return out[
        [
            "subject",
            "domain",
            "answer_type",
            "skills",
            "counting",
            "n",
            "accuracy",
            "format_errors",
            "chance",
        ]
    ]


def skill_scores(accuracy: Mapping[str, float]) -> dict[str, float]:
    """Skill scores from per-domain accuracies ``{domain: %}`` (the paper's aggregation)."""
    out = {}
    for s in SKILLS:
        vals = [accuracy[d] for d in SKILL_DOMAINS[s] if d in accuracy]
        out[s] = float(np.mean(vals)) if vals else float("nan")
    out["average_of_skills"] = float(np.mean([out[s] for s in SKILLS]))
    out["full_dataset"] = float(np.mean(list(accuracy.values()))) if accuracy else float("nan")
    return out


def skill_table(domains: pd.DataFrame) -> pd.DataFrame:
    """Per subject: the seven skills, ``average_of_skills`` and ``full_dataset`` (from :func:`domain_table`)."""
    rows = []
    for subject, g in domains.groupby("subject", sort=True):
        acc = dict(zip(g.domain, g.accuracy, strict=True))
        scores = skill_scores(acc)
        for s in (*SKILLS, "average_of_skills", "full_dataset"):
            if s in SKILL_DOMAINS:
                n, tagged = sum(d in acc for d in SKILL_DOMAINS[s]), len(SKILL_DOMAINS[s])
            elif s == "full_dataset":
                n, tagged = len(acc), 30
            else:
                n, tagged = sum(not np.isnan(scores[k]) for k in SKILLS), len(SKILLS)
            rows.append(
                {
                    "subject": subject,
                    "skill": s,
                    "accuracy": scores[s],
                    "n_domains": n,
                    "n_tagged": tagged,
                }
            )
    return pd.DataFrame(rows, columns=["subject", "skill", "accuracy", "n_domains", "n_tagged"])


def format_table(rows) -> pd.DataFrame:
    """Per subject and answer type: ``n`` replies and ``format_errors`` (% invalid)."""
    df = _frame(rows)
    out = (
        df.groupby(["subject", "answer_type"], sort=True)
        .agg(n=("valid", "size"), format_errors=("valid", lambda v: 100 * (1 - np.mean(v))))
        .reset_index()
    )
    order = {t: k for k, t in enumerate(ANSWER_TYPES)}
    return out.sort_values(
        ["subject", "answer_type"], key=lambda c: c.map(order) if c.name == "answer_type" else c
    ).reset_index(drop=True)


def size_table(rows) -> pd.DataFrame:
    """Per subject, domain and problem size: ``n`` and ``accuracy`` (%)."""
    df = _frame(rows)
    out = (
        df.groupby(["subject", "domain", "problem_size"], sort=True)
        .agg(n=("correct", "size"), accuracy=("correct", "mean"))
        .reset_index()
    )
    out["accuracy"] *= 100
    return out


def counting_table(domains: pd.DataFrame) -> pd.DataFrame:
    """Per subject: mean domain accuracy over the counting and the non-counting domains (Sec. 4.3)."""
    rows = []
    for subject, g in domains.groupby("subject", sort=True):
        is_c = g.domain.isin(COUNTING_DOMAINS)
        for group, part in (("counting", g[is_c]), ("non_counting", g[~is_c])):
            rows.append(
                {
                    "subject": subject,
                    "group": group,
                    "accuracy": float(part.accuracy.mean()) if len(part) else float("nan"),
                    "n_domains": len(part),
                }
            )
    return pd.DataFrame(rows, columns=["subject", "group", "accuracy", "n_domains"])


def score_trials(
    trials: Iterable[Trial], replies: Iterable[str | None], subject: str
) -> pd.DataFrame:
    """A trial table from paired trials and replies."""
    return pd.DataFrame([trial_row(t, subject, r) for t, r in zip(trials, replies, strict=True)])


def perceptv_scores(trials: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The Percept-V tables of the ``percept_v`` rows (none if there are none)."""
    if "task" not in trials.columns:
        return {}
    t = trials[trials["task"].astype(str) == "percept_v"]
    if t.empty:
        return {}
    rows = pd.DataFrame(
        {
            "subject": t["subject"].astype(str).to_numpy(),
            "domain": t["domain"].astype(str).to_numpy(),
            "problem_size": t["problem_size"].astype(int).to_numpy(),
            "answer_type": t["answer_type"].astype(str).to_numpy(),
            "correct": pd.to_numeric(t["correct"], errors="coerce")
            .fillna(0)
            .astype(int)
            .to_numpy(),
            "valid": t["valid"].astype(bool).astype(int).to_numpy(),
            "chance": pd.to_numeric(t["chance"], errors="coerce").to_numpy(),
        }
    )
    domains = domain_table(rows)
    return {
        "perceptv_domains": domains,
        "perceptv_skills": skill_table(domains),
        "perceptv_formats": format_table(rows),
    }
