"""The decomposed scavenger hunt as the paper runs it (Sec. 4.2, Table 1), and its metrics.

Each single-step question starts from the subject's OWN previous answer
(not from the gold path); accuracy is reported per three-step sequence
beside the per-question accuracy; the final-step error is conditioned on
the first two steps being right; the chaining prediction carries a
guessing term so that a random answerer is not flagged.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from bayesobs.runner import execute, plan
from bayesobs.store import ExperimentStore
from bayesobs.subjects import FatalSubjectError, Reply
from bayesobs.subjects.tunnel_sim import grid_from_text

_START = re.compile(r"Starting at the (\w+) (\w+), follow the label for 1 step\.")
SPEC = {
    "task": "scavenger_hunt",
    "seed": 11,
    "trials": 6,
    "modalities": ["text"],
    "sessions": [{"name": "d", "range": [2, 4], "variant": "decomposed"}],
    "ablations": {"context": 0},
}


class Scripted:
    """Reads the grid from the text table and follows the label, except on scripted trials.

    ``wrong[t]`` says what to answer instead on trial ``t``: ``"other"`` an
    on-grid cell that is not the one the label names, ``"garbage"`` no
    answer in the format; ``stop_at`` raises (a run killed) on that call.
    """

    def __init__(self, wrong=None, stop_at=None):
        self.wrong = wrong or {}
        self.stop_at = stop_at
        self.calls = 0
        self.prompts: dict[int, str] = {}

    async def complete(self, request):
        self.calls += 1
        if self.stop_at is not None and self.calls == self.stop_at:
            raise FatalSubjectError("killed")
        text = request.turns[-1].text
        t = request.meta["trial"]
        self.prompts[t] = text
        cells = grid_from_text(text)
        m = _START.search(text)
        where = {f"{c['colour']} {c['shape']}": c for c in cells}
        here = where.get(f"{m.group(1)} {m.group(2)}")
        nxt = where.get(here["label"]) if here is not None else None
        final = "what color are you on" in text
        how = self.wrong.get(t)
        if how == "garbage":
            return Reply(text="I cannot tell.")
        if how == "other" or nxt is None:
            nxt = next(c for c in cells if c is not here and c is not nxt and c["label"] in where)
        return Reply(
            text="{" + (nxt["colour"] if final else f"{nxt['colour']} {nxt['shape']}") + "}"
        )


def _run(folder, subject):
    sessions = plan(SPEC, ["sim:chainer"])
    record = {"command": "test", "specs": [SPEC]}
    with ExperimentStore(folder, record, lock=True) as store:
        execute(sessions, store, {"sim:chainer": subject}, concurrency=1, progress=False)
    lines = (folder / "trials.jsonl").read_text().splitlines()
    return pd.DataFrame([json.loads(x) for x in lines if x.strip()])


def test_each_step_starts_from_the_subjects_own_previous_answer(tmp_path):
    # trial 0: step 1 of puzzle 1 answered with a wrong (on-grid) cell;
    # trial 4: step 2 of puzzle 2 answered with no braces at all
    subject = Scripted(wrong={0: "other", 4: "garbage"})
    rows = _run(tmp_path / "o", subject)
    assert list(rows.step) == [1, 2, 3] * 6
    first = rows.iloc[0]
    assert first.response_value != first.path_answer  # wrong step 1, on the grid
    # step 2 asks from the model's answer, not from the gold path ...
    said = first.response_value
    assert f"Starting at the {said}, follow the label" in subject.prompts[1]
    second = rows.iloc[1]
    assert second.step_start == said and second.step_start_from == "answer"
    cells = {f"{c['colour']} {c['shape']}": c for c in grid_from_text(subject.prompts[1])}
    # ... and is graded against the label of the cell it starts from
    assert second.gold == cells[said]["label"] and second.correct == 1
    assert rows.iloc[0].step_start_from == "gold"
    # a step whose previous answer is unreadable is not asked, and scores as wrong
    assert 5 not in subject.prompts
    fifth = rows.iloc[5]
    assert not fifth.valid and fifth.not_asked and fifth.invalid_reason.startswith("not asked")
    # the untouched puzzles follow the gold path, step by step
    clean = rows[rows.trial_seed.isin(rows.trial_seed.unique()[2:])]
    assert (clean.correct == 1).all() and (clean.gold == clean.path_answer).all()


def test_a_killed_run_resumes_each_step_from_the_logged_answer(tmp_path):
    full = _run(tmp_path / "full", Scripted(wrong={0: "other", 4: "garbage"}))
    # killed after step 1 of puzzle 1 was logged: step 2 must come from that logged answer
    with pytest.raises(FatalSubjectError):
        _run(tmp_path / "part", Scripted(wrong={0: "other"}, stop_at=2))
    assert len((tmp_path / "part" / "trials.jsonl").read_text().splitlines()) == 1
    again = Scripted(wrong={4: "garbage"})  # would answer trial 0 right: it is not asked again
    part = _run(tmp_path / "part", again)
    assert 0 not in again.prompts
    assert f"Starting at the {full.iloc[0].response_value}," in again.prompts[1]
    same = ["trial", "prompt_id", "stimulus_id", "gold", "response_value", "correct", "step_start"]
    pd.testing.assert_frame_equal(full[same], part[same])


def test_the_chainer_is_asked_from_its_own_path_through_the_runner(tmp_path):
    from bayesobs.subjects.tunnel_sim import TunnelSubject

    spec = {**SPEC, "trials": 20, "modalities": ["image"]}
    sessions = plan(spec, ["sim:chainer"])
    with ExperimentStore(tmp_path / "c", {"command": "test"}, lock=True) as store:
        execute(sessions, store, {"sim:chainer": TunnelSubject("chainer")}, progress=False)
    lines = (tmp_path / "c" / "trials.jsonl").read_text().splitlines()
    rows = pd.DataFrame([json.loads(x) for x in lines])
    later = rows[rows.step > 1]
    prev = rows.shift(1)[rows.step > 1]
    unasked = later.get("not_asked", pd.Series(False, index=later.index))
    asked = ~unasked.fillna(False).astype(bool)
    # every later step starts where the previous answer said (never the gold path behind it)
    assert (later.step_start[asked] == prev.response_value[asked]).all()
    assert (later.step_start_from == "answer").all()
    assert (later.gold[asked] != later.path_answer[asked]).any()  # went astray, and was followed


def test_a_reversed_condition_keeps_the_steps_of_a_sequence_in_order():
    from bayesobs.runner import reverse_trials
    from bayesobs.stimuli import get_task

    task = get_task("scavenger_hunt")
    stims = task.generate(np.random.default_rng(0), 2, 4, 3, {"variant": "decomposed"})
    rev = reverse_trials(task, stims)
    assert [s.params["columns"]["step"] for s in rev] == [1, 2, 3] * 3
    assert [s.params["seed"] for s in rev[::3]] == [s.params["seed"] for s in stims[::3]][::-1]
    chains = task.generate(np.random.default_rng(0), 2, 4, 3, {"variant": "L3"})
    assert reverse_trials(task, chains) == chains[::-1]  # independent trials: plain reversal
