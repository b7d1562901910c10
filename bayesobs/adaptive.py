"""Adaptive sweeps (issue 53): rounds of session runs, refitted after each, only open cells asked again.

The rule (docs/protocol.md, "Adaptive sweeps"): round 1 asks the first
``first_runs`` runs of every session type of every cell of the protocol;
after each round the logged rows of the runs asked so far are scored with
:func:`bayesobs.scores.score` and a cell is asked ``step`` more runs of every
session type while one of its questions is open, that is while stopping now
risks a different conclusion from the cap's (:mod:`bayesobs.stopping`); it
stops when none is open or it has the protocol's runs (its cap).
Stimuli are never chosen: the runs asked are the fixed protocol's runs with
its seeds, so their rows equal the fixed sweep's rows.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .errors import BayesobsInputError
from .placed import RULE as PLACE_RULE
from .placed import cell, place_runs, threshold_questions
from .provenance import read_manifest
from .run.engine import estimate
from .run.plan import load_protocol, plan_all
from .run.runner import start, sweep
from .run.store import lock_folder
from .scores import score
from .scores.psychometric import KEYS as GROUP_KEYS
from .scores.psychometric import psychometric_levels
from .scores.psychometric_bayes import bayes_table
from .stopping import (
    EVIDENCE_THRESHOLD,
    cell_name,
    conclusions,
    open_questions,
    same_conclusions,
)
from .trials import CELL_KEYS, read_trials

RULE = (
    "rounds of runs per session type; after each, score the rows of the runs asked; "
    "a cell is asked again while, for one of its factors (P(f) against 0.5, 68% bootstrap "
    "interval) or an ablation pair it belongs to (s_p against the sign level), the "
    "probability that the protocol's runs would conclude on the other side is at least "
    "the risk; it stops when none is, or at the protocol's runs"
)


@dataclass(frozen=True)
class AdaptiveOptions:
    """The rule's settings, checked once.

    Parameters
    ----------
    first_runs : int
        Runs of every session type in round 1 (2 or more: a bootstrap needs them).
    step : int
        Runs of every session type added to each open cell per round.
    sign_level : float
        ``|s_p|`` (METHOD §9) at or above which an ablation pair's sign is decided.
    risk : float
        A question stays open while the probability that the cap's runs conclude
        otherwise is at least this (:mod:`bayesobs.stopping`).
    bootstrap : int
        Replicates of the refit after each round (METHOD §7).
    seed : int
        Its bootstrap seed (the same rows give the same decisions).
    place_width : float
        A right/wrong session's question is answered when its threshold's 95%
        interval is at most this share of its level range (:mod:`bayesobs.placed`).
    """

    first_runs: int = 2
    step: int = 1
    sign_level: float = 0.9
    risk: float = 0.1
    bootstrap: int = 30
    seed: int = 0
    place_width: float = 0.2

    def __post_init__(self):
        for name, low in (("first_runs", 2), ("step", 1), ("bootstrap", 10), ("seed", 0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise BayesobsInputError(
                    f"adaptive {name} must be a whole number >= {low}, not {v!r}"
                )
        if not 0 < self.place_width <= 1:
            raise BayesobsInputError(
                f"adaptive place_width must be in (0, 1], not {self.place_width!r}"
            )
        if not 0.5 < self.sign_level <= 1:
            raise BayesobsInputError(
                f"adaptive sign_level must be in (0.5, 1], not {self.sign_level!r}"
            )
        if not 0 < self.risk < 0.5:
            raise BayesobsInputError(f"adaptive risk must be in (0, 0.5), not {self.risk!r}")

    def record(self) -> dict:
        """The rule and its thresholds, as the manifest holds them."""
        return {
            "rule": RULE,
            "placement": PLACE_RULE,
            "evidence_threshold": EVIDENCE_THRESHOLD,
            **asdict(self),
        }


@dataclass
class AdaptiveResult:
    """What an adaptive sweep asked: rounds, stops, calls beside the fixed protocol's."""

    rounds: list[dict] = field(default_factory=list)
    stops: list[dict] = field(default_factory=list)
    calls: int = 0
    input_tokens: int = 0
    fixed_calls: int = 0
    fixed_input_tokens: int = 0
    complete: bool = (
        True  # False: a round was cut short (failed sessions); the same command resumes
    )
    reports: list = field(default_factory=list)


def _asked_rows(out: Path, runs: dict) -> object:
    """The logged rows of the runs asked so far (a killed later round's rows left out)."""
    trials = read_trials(out / "trials.jsonl")
    keys = list(zip(*(trials[k].astype(str) for k in CELL_KEYS), strict=True))
    cap = [runs.get(tuple(map(str, k)), 0) for k in keys]
    return trials[trials["run"].astype(int).to_numpy() < cap]


def _keyed(runs: dict) -> dict:
    """Runs per cell, keyed by the cell's values as text (as the trial table holds them)."""
    return {tuple(map(str, c)): n for c, n in runs.items()}


def _write_stops(out: Path, options: AdaptiveOptions, result: AdaptiveResult) -> None:
    """Record the rule and every stop in ``manifest.json`` (beside the compared experiment)."""
    path = out / "manifest.json"
    if not path.exists():
        return
    with lock_folder(out, "sweep --adaptive"):
        record = read_manifest(path)
        record["adaptive"] = {**options.record(), "rounds": result.rounds, "stops": result.stops}
        tmp = path.with_suffix(".json.part")
        tmp.write_text(json.dumps(record, indent=2) + "\n")
        tmp.replace(path)


def adaptive_sweep(
    protocol: str | Path,
    subjects: list[str],
    out: str | Path,
    options: AdaptiveOptions | None = None,
    trials: int | None = None,
    runs: int | None = None,
    **start_options,
) -> AdaptiveResult:
    """Run a protocol adaptively into folder ``out`` (``bayesobs sweep --adaptive``).

    Parameters
    ----------
    protocol : str or Path
        The protocol (:func:`bayesobs.run.plan.load_protocol`).
    subjects : list of str
        Subject specifiers.
    out : str or Path
        The experiment folder; a killed adaptive sweep resumes to the same decisions.
    options : AdaptiveOptions, optional
        The rule's settings (defaults: 2 first runs, 1 more per round, sign level 0.9).
    trials, runs : int, optional
        Trials per run and the cap of runs per session type (the fixed protocol's runs).
    **start_options
        Keyword arguments of :func:`bayesobs.run.runner.start` (``sim_seed``, ``chat``,
        ``concurrency``, ``batch`` ...).

    Returns
    -------
    AdaptiveResult
        The rounds, the stops (round, cell, runs, reason) and the calls and input
        tokens asked beside the fixed protocol's.

    Raises
    ------
    BayesobsInputError
        For bad options, a protocol that does not plan, or as ``start`` raises.
    """
    options = options or AdaptiveOptions()
    out = Path(out)
    exps = load_protocol(protocol)
    kw = dict(subjects=subjects, trials=trials, runs=runs)
    kw.update(ami=start_options.get("ami"), hvs=start_options.get("hvs"))  # as start records them
    sessions = plan_all([(e["spec"], kw) for e in exps], progress=False)
    chat = start_options.get("chat")
    cap = {c: 0 for c in map(cell, sessions)}
    for s in sessions:
        cap[cell(s)] = max(cap[cell(s)], s.run + 1)
    fixed = estimate(sessions, {}, chat)
    result = AdaptiveResult(fixed_calls=fixed["calls"], fixed_input_tokens=fixed["input_tokens"])
    settings = {"command": "sweep", "protocol": str(protocol), "trials": trials, "runs": runs}
    settings["adaptive"] = options.record()
    asked = {c: 0 for c in cap}  # runs of every session type asked per cell
    live = set(cap)  # cells still asked
    specs = [e["spec"] for e in exps]
    rnd = 0
    while live:
        rnd += 1
        before = dict(asked)
        for c in live:
            asked[c] = min(cap[c], options.first_runs if rnd == 1 else asked[c] + options.step)
        todo = [s for s in sessions if cell(s) in live and s.run < asked[cell(s)]]
        new = sum(s.run >= before[cell(s)] for s in todo)  # this round's own session runs
        if rnd > 1:  # right/wrong cells of independent trials: levels placed from the rows so far
            todo = place_runs(todo, before, _asked_rows(out, _keyed(before)), specs)
        report = start(specs, todo, subjects, out, settings, **start_options)
        result.reports.append(report)
        if report.failed_sessions or report.dry_run is not None or report.budget_reached:
            result.complete = report.dry_run is not None and not report.failed_sessions
            break  # a budget stops the rounds too: the same command with a larger one resumes
        rows = _asked_rows(out, _keyed(asked))
        scored = score(rows, bootstrap=options.bootstrap, seed=options.seed, probe=False)
        runs_of = {tuple(map(str, c)): (asked[c], cap[c]) for c in cap}
        questions = open_questions(
            scored.evidence, scored.bcs, runs_of, options.risk, options.sign_level
        )
        questions.update(threshold_questions(rows, todo, options.place_width))
        stopped = []
        for c in sorted(live, key=cell_name):
            why = questions.get(tuple(map(str, c)), ["no factor evidence"])
            if why and asked[c] < cap[c]:
                continue
            reason = "cap reached: " + ", ".join(why) + " still open" if why else "answered"
            stopped.append(c)
            result.stops.append(
                {"round": rnd, "cell": cell_name(c), "runs": asked[c], "reason": reason}
            )
        live -= set(stopped)
        result.rounds.append(
            {"round": rnd, "session_runs": new, "stopped": len(stopped), "open": len(live)}
        )
        _write_stops(out, options, result)
    spent = estimate([s for s in sessions if s.run < asked[cell(s)]], {}, chat)
    result.calls, result.input_tokens = spent["calls"], spent["input_tokens"]
    return result


def compare_fixed(
    protocol: str | Path,
    subjects: list[str],
    folder: str | Path,
    options: AdaptiveOptions | None = None,
    trials: int | None = None,
    runs: int | None = None,
    sim_seed: int = 0,
) -> dict:
    """The adaptive rule against the fixed protocol on (simulated) subjects (``design --adaptive``).

    Parameters
    ----------
    protocol : str or Path
        The protocol.
    subjects : list of str
        Subject specifiers (``sim:...`` to pay nothing).
    folder : str or Path
        Holds ``fixed/`` and ``adaptive/``, the two experiment folders.
    options : AdaptiveOptions, optional
        The rule's settings.
    trials, runs : int, optional
        Trials per run and runs per session type of the fixed protocol.
    sim_seed : int, default 0
        Seed of the simulated subjects.

    Returns
    -------
    dict
        ``calls, input_tokens`` of each (``fixed_...``); ``conclusions``: the
        fixed protocol's factor winners (P(f) > 0.5 per cell and factor) and
        BCS signs (the paper's ``s`` per pair), ``decided`` of them (the factor's
        68% interval excludes 0.5, ``|s_p|`` reaches the sign level);
        ``agreement``, ``factor_agreement``, ``sign_agreement``: the share of
        the decided ones the adaptive sweep reaches; ``agreement_all``: of all;
        ``accuracy_covered``: the share of the ``accuracy_cells`` (magnitude
        cells) whose fixed NRMSE lies in the adaptive sweep's 68% interval; ``differ``: the decided conclusions
        reached otherwise; ``thresholds``: per right/wrong group, the trials
        and threshold 95% interval of each (``bayesobs psychometric``'s fit).
    """
    options = options or AdaptiveOptions()
    folder = Path(folder)
    sweep(protocol, subjects, folder / "fixed", trials=trials, runs=runs, sim_seed=sim_seed)
    res = adaptive_sweep(
        protocol, subjects, folder / "adaptive", options, trials, runs, sim_seed=sim_seed
    )
    scored = [
        score(
            read_trials(folder / name / "trials.jsonl"),
            bootstrap=options.bootstrap,
            seed=options.seed,
            probe=False,
        )
        for name in ("fixed", "adaptive")
    ]
    fixed, adaptive = (conclusions(s.evidence, s.bcs, options.sign_level) for s in scored)
    same = same_conclusions(fixed, adaptive)
    decided = [k for k, v in fixed.items() if v[1]]

    def share(keys):
        return sum(same[k] for k in keys) / len(keys) if keys else float("nan")

    found = [_thresholds(folder / name) for name in ("fixed", "adaptive")]
    thresholds = [
        {"group": g, "fixed": f, "adaptive": found[1][g]}
        for g, f in found[0].items()
        if g in found[1]
    ]
    covered = []
    if all(len(s.accuracy) for s in scored):  # magnitude cells
        acc = scored[0].accuracy.merge(scored[1].accuracy, on=list(CELL_KEYS), suffixes=("", "_a"))
        covered = (acc["nrmse_lo_a"] <= acc["nrmse"]) & (acc["nrmse"] <= acc["nrmse_hi_a"])
    return {
        "calls": res.calls,
        "fixed_calls": res.fixed_calls,
        "input_tokens": res.input_tokens,
        "fixed_input_tokens": res.fixed_input_tokens,
        "rounds": len(res.rounds),
        "conclusions": len(same),
        "decided": len(decided),
        "agreement": share(decided),
        "factor_agreement": share([k for k in decided if k[0] == "factor"]),
        "sign_agreement": share([k for k in decided if k[0] == "sign"]),
        "agreement_all": share(list(same)),
        "accuracy_covered": float(np.mean(covered)) if len(covered) else float("nan"),
        "accuracy_cells": len(covered),
        "differ": ["/".join(map(str, k)) for k in decided if not same[k]],
        "thresholds": thresholds,
    }


def _thresholds(folder: Path) -> dict[str, dict]:
    """Right/wrong group -> trials and threshold with its 95% interval, as ``bayesobs psychometric`` fits them."""
    levels = psychometric_levels(read_trials(folder / "trials.jsonl"))
    if not len(levels):
        return {}
    table, _ = bayes_table(levels, bootstrap=0)  # the credible interval; no ML bootstrap needed
    trials = {
        tuple(map(str, k)): n for k, n in levels.fillna("").groupby(GROUP_KEYS)["n"].sum().items()
    }
    out = {}
    for row in table.to_dict("records"):
        key = tuple(str(row[k]) for k in GROUP_KEYS)
        out["/".join(v for v in key if v)] = {
            "trials": int(trials[key]),
            "threshold": row["threshold"],
            "lo": row["threshold_lo"],
            "hi": row["threshold_hi"],
        }
    return out
