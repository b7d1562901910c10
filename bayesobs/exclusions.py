"""Attention checks and preregistered exclusion rules, applied at ``fit``/``score`` time."""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd

from .errors import BayesobsInputError
from .paradigms import registered
from .trials import TRUE_WORDS, catch_rows, natural_key

#: participant measures a rule may name, with what they are
PARTICIPANT_MEASURES: dict[str, str] = {
    "catch_error_rate": "share of the participant's catch trials answered wrongly "
    "(a participant without catch trials is never excluded by it)",
    "catch_trials": "number of the participant's catch trials",
    "missing_rate": "share of the participant's (non-catch) trials without a response",
    "median_rt_ms": "median response time in ms over the participant's (non-catch) trials "
    "(rt_ms, else the rt_client_s of a served study)",
    "trials": "number of the participant's (non-catch) trials",
}
#: the columns of ``exclusions.csv``
COLUMNS: tuple[str, ...] = ("subject", "rule", "level", "value", "trials")
CATCH_RULE = "catch trial (never fitted)"
_OPS = {
    "<=": operator.le,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    ">": operator.gt,
}
_RULE = re.compile(
    r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=|==|!=|<|>)\s*"
    r"([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*"
)


@dataclass(frozen=True)
class Rule:
    """One exclusion rule, ``name op value``."""

    text: str
    name: str
    op: str
    value: float

    @property
    def level(self) -> str:
        """``participant`` for a participant measure, else ``trial``."""
        return "participant" if self.name in PARTICIPANT_MEASURES else "trial"

    def holds(self, values) -> np.ndarray:
        """Where the rule holds (never where ``values`` is missing)."""
        v = np.asarray(values, dtype=float)
        with np.errstate(invalid="ignore"):
            return np.asarray(_OPS[self.op](v, self.value)) & ~np.isnan(v)


class Exclusions(NamedTuple):
    """What :func:`exclude` returns."""

    trials: pd.DataFrame
    """The trials left: no catch trial, no excluded participant, excluded trials missing or removed."""
    table: pd.DataFrame
    """One row per participant and rule that excluded something (the columns :data:`COLUMNS`)."""


def parse_rule(text: str) -> Rule:
    """Read ``NAME OP NUMBER``; anything else is refused with a one-line reason."""
    m = _RULE.fullmatch(text)
    if not m:
        raise BayesobsInputError(
            f'--exclude {text!r}: expected NAME OP NUMBER, e.g. "catch_error_rate > 0.2" or '
            f'"rt_ms < 200" (OP one of < <= > >= == !=; NAME a trial column or one of '
            f"{', '.join(PARTICIPANT_MEASURES)})"
        )
    name, op, num = m.groups()
    value = float(num)
    if not np.isfinite(value):
        raise BayesobsInputError(f"--exclude {text!r}: {num} is not a finite number")
    return Rule(text=" ".join(text.split()), name=name, op=op, value=value)


def _correct(values: pd.Series) -> np.ndarray:
    """A ``correct`` column as 1.0/0.0, NaN where it says nothing."""

    def one(v):
        if v is None or v != v:
            return np.nan
        s = str(v).strip().lower()
        if s in TRUE_WORDS:
            return 1.0
        if s in {"false", "0", "0.0", "no"}:
            return 0.0
        return np.nan

    return values.map(one).to_numpy(float)


def _rt_ms(trials: pd.DataFrame) -> np.ndarray | float:
    """Response times in ms: ``rt_ms``, else ``serve``'s ``rt_client_s`` (seconds), else NaN."""
    for name, scale in (("rt_ms", 1.0), ("rt_client_s", 1000.0)):
        if name in trials:
            return pd.to_numeric(trials[name], errors="coerce").to_numpy(float) * scale
    return np.nan


def participant_measures(trials: pd.DataFrame) -> pd.DataFrame:
    """Per ``subject``: every measure of :data:`PARTICIPANT_MEASURES` (NaN where undefined)."""
    catch = catch_rows(trials)
    subject = trials["subject"].astype(str).to_numpy()
    frame = pd.DataFrame(
        {
            "subject": subject,
            "catch": catch,
            "wrong": np.where(
                catch,
                1.0 - _correct(trials["correct"]) if "correct" in trials else np.nan,
                np.nan,
            ),
            "missing": np.where(catch, np.nan, trials["response"].isna().to_numpy(float)),
            "rt": np.where(catch, np.nan, _rt_ms(trials)),
        }
    )
    g = frame.groupby("subject", sort=False)
    out = pd.DataFrame(
        {
            "catch_trials": g["catch"].sum().astype(float),
            "catch_error_rate": g["wrong"].mean(),
            "missing_rate": g["missing"].mean(),
            "median_rt_ms": g["rt"].median(),
            "trials": g["catch"].apply(lambda c: float((~c).sum())),
        }
    )
    return out.reset_index()


def exclude(trials: pd.DataFrame, rules=()) -> Exclusions:
    """Apply exclusion ``rules`` (strings or :class:`Rule`) and remove catch trials."""
    rules = [r if isinstance(r, Rule) else parse_rule(r) for r in rules]
    for r in rules:
        if r.level == "trial":
            if r.name not in trials.columns:
                cols = ", ".join(c for c in map(str, trials.columns) if not c.startswith("_"))
                raise BayesobsInputError(
                    f"--exclude {r.text!r}: {r.name!r} is neither a participant measure "
                    f"({', '.join(PARTICIPANT_MEASURES)}) nor a column (columns: {cols})"
                )
            if pd.to_numeric(trials[r.name], errors="coerce").notna().sum() == 0:
                raise BayesobsInputError(
                    f"--exclude {r.text!r}: column {r.name!r} holds no numbers"
                )
    rows: list[dict] = []
    catch = catch_rows(trials)
    subjects = trials["subject"].astype(str).to_numpy()
    if catch.any():
        for s, n in pd.Series(subjects[catch]).value_counts(sort=False).items():
            rows.append(dict(subject=s, rule=CATCH_RULE, level="catch", value=np.nan, trials=n))
    gone = catch.copy()  # rows removed
    measures = participant_measures(trials).set_index("subject")
    for r in [r for r in rules if r.level == "participant"]:
        hit = measures.index[r.holds(measures[r.name])]
        for s in hit:
            mask = (subjects == s) & ~gone
            if mask.any():
                rows.append(
                    dict(
                        subject=s,
                        rule=r.text,
                        level="participant",
                        value=float(measures.at[s, r.name]),
                        trials=int(mask.sum()),
                    )
                )
            gone |= subjects == s
    kept = trials.loc[~gone].copy()
    if len(kept) == 0:
        raise BayesobsInputError(
            f"--exclude: every trial is excluded ({', '.join(r.text for r in rules)})"
        )
    other = pd.Series(False, index=kept.index)
    for paradigm in registered():  # every registered paradigm's rows (bayesobs.paradigms)
        other = other | paradigm.rows(kept)
    other = other.to_numpy()
    done = kept["response"].isna().to_numpy() & ~other  # already missing: nothing to exclude
    drop = np.zeros(len(kept), dtype=bool)
    ksub = kept["subject"].astype(str).to_numpy()
    for r in [r for r in rules if r.level == "trial"]:
        hit = r.holds(pd.to_numeric(kept[r.name], errors="coerce")) & ~done
        done |= hit
        for s, n in pd.Series(ksub[hit]).value_counts(sort=False).items():
            rows.append(dict(subject=s, rule=r.text, level="trial", value=np.nan, trials=int(n)))
        kept.loc[hit & ~other, "response"] = np.nan
        drop |= hit & other
    kept = kept.loc[~drop].reset_index(drop=True)
    if "catch" in kept.columns:
        kept = kept.drop(columns="catch")
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    return Exclusions(kept, table)


def summary(table: pd.DataFrame) -> str:
    """One line for the terminal: what was excluded, by which rule."""
    if table.empty:
        return "exclusions: none (no catch trials; no rule held for any participant or trial)"
    parts = []
    for (rule, level), g in table.groupby(["rule", "level"], sort=False):
        n, k = int(g["trials"].sum()), len(g)
        if level == "catch":
            parts.append(f"{n} catch trial(s) of {k} participant(s) set aside, never fitted")
        elif level == "participant":
            names = sorted(g["subject"].astype(str), key=natural_key)
            shown = ", ".join(names[:5]) + (f" and {k - 5} more" if k > 5 else "")
            parts.append(f"{rule}: {k} participant(s) ({shown}), {n} trial(s)")
        else:
            parts.append(f"{rule}: {n} trial(s) of {k} participant(s)")
    return "exclusions: " + "; ".join(parts)


__all__ = [
    "COLUMNS",
    "PARTICIPANT_MEASURES",
    "Exclusions",
    "Rule",
    "exclude",
    "parse_rule",
    "participant_measures",
    "summary",
]
