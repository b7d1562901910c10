"""Re-read every logged reply with today's parsers (``bayesobs rescore``)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from .. import trials
from ..errors import BayesobsInputError
from ..jsonl import read_records
from ..logprobs import COLUMNS as DISTRIBUTION_COLUMNS
from ..logprobs import reply_distribution
from ..provenance import read_manifest
from ..stimuli import get_task
from ..stimuli.base import Stimulus
from ..trials import RUN_KEYS
from .ablations import condition
from .engine import reasoned, reasoned_start
from .plan import plan
from .reasoning import BUDGET_EXHAUSTED, budget_exhausted
from .store import FolderLock, trial_id

# columns a task's record() may (re)write; stale ones are cleared first
SCORED = ("response", "valid", "invalid_reason", *DISTRIBUTION_COLUMNS, "response_dist_note")


def _experiment(folder: Path) -> dict:
    """The experiment a folder's ``manifest.json`` describes."""
    man = folder / "manifest.json"
    if not man.exists():
        raise BayesobsInputError(
            f"{folder}: no manifest.json, so the experiment cannot be re-planned"
        )
    exp = read_manifest(man).get("experiment")
    if not isinstance(exp, dict) or not isinstance(exp.get("specs"), list):
        raise BayesobsInputError(
            f"{man}: not an experiment manifest (no 'experiment' with its specs)"
        )
    return exp


def _sessions(exp: dict) -> dict[tuple, object]:
    """Planned session runs of an experiment, by session key."""
    out = {}
    for spec in exp["specs"]:
        sessions = plan(
            spec,
            exp["subjects"],
            exp.get("modalities"),
            exp.get("conditions"),
            exp.get("trials"),
            exp.get("runs"),
            ami=exp.get("ami"),
            hvs=exp.get("hvs"),
        )
        out.update({s.key: s for s in sessions})
    return out


def _json_object(text) -> bool:
    """Whether ``text`` is a JSON object's text."""
    try:
        return isinstance(json.loads(text), dict)
    except (TypeError, ValueError):
        return False


def _replanned(rec: dict, sessions: dict[tuple, object]) -> tuple:
    """A record's re-planned session and stimulus, checked against the logged one."""
    key = tuple(rec[k] for k in RUN_KEYS)
    sess = sessions.get(key)
    t = int(rec["trial"])
    if sess is None or t >= len(sess.stimuli):
        raise BayesobsInputError(
            f"trial {'/'.join(map(str, key))}/{t} is not in the experiment the manifest describes"
        )
    stim = sess.stimuli[t]
    if rec.get("stimulus_id") not in (None, stim.key()):
        raise BayesobsInputError(
            f"trial {'/'.join(map(str, key))}/{t}: the logged stimulus differs from the "
            "re-planned one (was the folder made by another version of the task?)"
        )
    return sess, stim


def rescore_records(
    records: list[dict], sessions: dict[tuple, object], tasks: Callable | None = None
) -> pd.DataFrame:
    """Score every record's ``raw_response`` again; adds ``response_logged`` and ``rescored_changed``."""
    rows = []
    for rec in records:
        if rec.get("parse_params") is not None and tasks is not None:  # the row carries it
            sess = SimpleNamespace(task=tasks(rec["task"]), cond=condition(rec["condition"]))
            params = json.loads(rec["parse_params"])
            stim = Stimulus(rec["task"], rec["stimulus"], "", params)
        else:
            sess, stim = _replanned(rec, sessions)
        # cot: the answer after the reply's last answer label, as the runner read it
        answer = sess.task.record(
            stim,
            reasoned(sess, rec.get("raw_response")),
            truncated=rec.get("finish_reason") == "length",
        )
        if rec.get("logprobs") and not sess.task.worded():  # --logprobs: recomputed, too
            answer.update(
                reply_distribution(
                    rec["logprobs"],
                    rec.get("raw_response"),
                    sess.task.fraction,
                    sess.task.answer_range,
                    truncated=rec.get("finish_reason") == "length",
                    start=reasoned_start(sess, rec.get("raw_response")),
                )
            )
        if budget_exhausted(
            rec.get("raw_response"), rec.get("finish_reason"), rec.get("reasoning_tokens")
        ):
            answer["valid"], answer["invalid_reason"] = False, BUDGET_EXHAUSTED
        if not answer["valid"]:
            answer.setdefault("invalid_reason", "no answer in the asked format")
        new = {k: v for k, v in rec.items() if k not in SCORED}
        new.update(answer)
        new["response_logged"] = rec.get("response")
        old, now = rec.get("response"), answer["response"]
        new["rescored_changed"] = not (
            (old is None and now is None) or (old is not None and now is not None and old == now)
        )
        rows.append(new)
    return pd.DataFrame(rows)


def rescore_folder(folder: str | Path, out: str | Path | None = None) -> pd.DataFrame:
    """Rescore an experiment folder's ``trials.jsonl``; write ``out`` (default ``DIR/rescored.jsonl``)."""
    folder = Path(folder)
    target = Path(out) if out is not None else folder / "rescored.jsonl"
    if target.resolve() == (folder / "trials.jsonl").resolve():
        raise BayesobsInputError("rescore never rewrites trials.jsonl; choose another --out")
    # writing into the folder makes rescore one of its writers: it holds the folder's lock,
    # so it never runs beside a run, sweep or server of that folder (nor another rescore)
    writes_here = folder.is_dir() and target.resolve().is_relative_to(folder.resolve())
    with FolderLock(folder, "rescore") if writes_here else contextlib.nullcontext():
        log = folder / "trials.jsonl"
        records, lines, _ = read_records(log)
        if not records:
            raise BayesobsInputError(f"{folder}: no logged trials to rescore")
        for rec, i in zip(records, lines, strict=True):  # one line naming a line not rescorable
            trial_id(rec, f"{log}: line {i}")
            if not isinstance(rec.get("raw_response"), (str, type(None))):
                kind = type(rec["raw_response"]).__name__
                raise BayesobsInputError(
                    f"{log}: line {i}: raw_response is a {kind}, not the reply's text"
                )
            if rec.get("parse_params") is not None and not _json_object(rec["parse_params"]):
                raise BayesobsInputError(f"{log}: line {i}: parse_params is not a JSON object")
        exp = _experiment(folder)
        # only a log of an older version (rows without parse_params) is re-planned
        old = any(rec.get("parse_params") is None for rec in records)
        tables = {s.get("task"): s.get("table") for s in exp.get("specs", [])}  # table tasks
        tasks = cache(
            lambda name: get_task(
                name, ami=exp.get("ami"), hvs=exp.get("hvs"), table=tables.get(name)
            )
        )
        table = rescore_records(records, _sessions(exp) if old else {}, tasks)
        trials.write_trials(table, target)
    return table
