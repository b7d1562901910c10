"""Issue 32: a Tunnel Vision sweep names its plan at once, shows progress, and prints the total."""

from __future__ import annotations

from pathlib import Path

import pytest

from bayesobs.cli import main
from bayesobs.run import progress
from bayesobs.tunnel import subject as tunnel_sim

TASKS = Path(__file__).resolve().parents[2] / "tasks"
SUBJECTS = ("sim:matcher", "sim:chainer", "sim:tracer")


def test_sweep_names_the_plan_before_the_first_trial_and_prints_the_total(
    tmp_path, capsys, monkeypatch
):
    """Into a log (stderr not a terminal) with --progress: plain lines, the plan first, the total last."""
    seen: list[str] = []  # stderr written before the first trial was answered
    answer = tunnel_sim.TunnelSubject.answer

    def first_looks(self, request):
        if not seen:
            seen.append(capsys.readouterr().err)
        return answer(self, request)

    monkeypatch.setattr(tunnel_sim.TunnelSubject, "answer", first_looks)
    proto = tmp_path / "tiny.toml"  # the protocol's re-identification and circuits, 1 trial each
    proto.write_text(
        f'[[experiment]]\nspec = "{TASKS / "object_reid.toml"}"\n\n'
        f'[[experiment]]\nspec = "{TASKS / "circuits.toml"}"\n'
    )
    args = ["sweep", str(proto), "--out", str(tmp_path / "o"), "--trials", "1", "--progress"]
    assert main([*args, *(x for s in SUBJECTS for x in ("--subject", s))]) == 0
    rest = capsys.readouterr()

    assert seen, "no trial was answered"
    before = seen[0].splitlines()
    assert before[0] == (
        "plan: object_reid, circuits; 3 subject(s), 18 cell(s) "
        "(subject x session x run x condition x modality), 18 trial(s); making the stimuli first"
    )
    assert any(x.startswith("making stimuli (object_reid, circuits): 0/6") for x in before)
    assert "planned 18 session(s), 18 trial(s)" in seen[0]
    assert before[-1].startswith("trials: 0/18 trial(s) (0%)")
    last = rest.err.splitlines()[-1]
    assert last.startswith("total: 18 trial(s) logged (0 already logged) in ")
    assert "(making stimuli " in last and "trials " in last
    assert "\r" not in seen[0] + rest.err  # lines, not a bar redrawn in place
    assert "logged 18 trial(s)" in rest.out

    # resumed: nothing left to ask, the plan and the total all the same
    assert main([*args, *(x for s in SUBJECTS for x in ("--subject", s))]) == 0
    err = capsys.readouterr().err
    assert err.startswith("plan: object_reid, circuits; 3 subject(s)")
    assert err.splitlines()[-1].startswith("total: 0 trial(s) logged (18 already logged)")


@pytest.mark.parametrize("flag", [[], ["--no-progress"]])
def test_without_progress_a_log_stays_quiet(tmp_path, capsys, flag):
    """Not a terminal and no --progress (or --no-progress): stderr holds nothing (errors alone)."""
    proto = tmp_path / "tiny.toml"
    proto.write_text(f'[[experiment]]\nspec = "{TASKS / "circuits.toml"}"\n')
    args = ["sweep", str(proto), "--subject", "sim:tracer", "--trials", "1"]
    assert main([*args, "--out", str(tmp_path / "o"), *flag]) == 0
    assert capsys.readouterr().err == ""
    assert main([*args, "--out", str(tmp_path / "o"), "--progress", "--no-progress"]) == 2
    assert capsys.readouterr().err.strip() == (
        "bayesobs: error: give --progress or --no-progress, not both"
    )


def test_plan_counts_follow_the_specs_and_the_overrides():
    spec = {
        "task": "t",
        "trials": 5,
        "runs": 2,
        "modalities": ["image", "text"],
        "sessions": [{"name": "a", "trials": 3}, {"name": "b"}],
    }
    kw = {"subjects": ["sim:a", "sim:b"], "trials": None, "runs": None}
    c = progress.plan_counts([(spec, kw), (dict(spec, task="u"), dict(kw, subjects=["sim:a"]))])
    # cells: 2 sessions x 2 runs x 2 modalities x (2 + 1) subjects; trials (3 + 5) per 2 x 2 x ...
    assert c == {"tasks": ["t", "u"], "subjects": 2, "cells": 24, "trials": 96, "stimuli": 32}
    # --trials overrides every session's count
    c = progress.plan_counts([(spec, dict(kw, trials=1, runs=1))])
    assert c["cells"] == 8 and c["trials"] == 8 and c["stimuli"] == 2


def test_making_stimuli_counts_each_rendered_trial():
    """A perception task reports every trial it renders; another task its session run at once."""
    from bayesobs.run.plan import load_spec, plan

    calls: list[int] = []
    reid = plan(load_spec(TASKS / "object_reid.toml"), ["sim:matcher"], trials=2, made=calls.append)
    assert calls == [1] * 6 and len(reid) == 3  # three sessions, two trials each, one by one
    calls.clear()
    plan(
        load_spec("line_ratio"), ["sim:bayesian"], trials=4, modalities=["text"], made=calls.append
    )
    assert calls and sum(calls) == 4 * len(calls) and set(calls) == {4}


def test_line_bar_prints_at_once_then_at_most_every_interval_and_on_close(capsys, monkeypatch):
    now = [100.0]
    monkeypatch.setattr(progress.time, "perf_counter", lambda: now[0])
    with progress.LineBar(10, "trials", "trial", every=5.0) as b:
        b.update(3)  # 0 s since the first line: quiet
        now[0] += 6
        b.set_postfix_str("concurrency 4")
        b.update(2)  # 6 s: a line
        now[0] += 1
        b.update(5)
    b.update(1)  # closed: nothing more
    assert capsys.readouterr().err.splitlines() == [
        "trials: 0/10 trial(s) (0%) in 0.0 s",
        "trials: 5/10 trial(s) (50%) in 6.0 s, concurrency 4",
        "trials: 10/10 trial(s) (100%) in 7.0 s, concurrency 4",
    ]


def test_bar_is_a_tqdm_bar_plain_lines_or_none():
    from tqdm.std import tqdm

    b = progress.bar(True, 3, "x", "y")
    assert isinstance(b, tqdm)
    b.close()
    b = progress.bar("lines", 3, "x", "y")
    assert isinstance(b, progress.LineBar)
    b.close()
    assert progress.bar(False, 3, "x", "y") is None
