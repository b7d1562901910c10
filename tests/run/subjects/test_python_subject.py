"""Issue 51: ``--subject python:package.module:name``, a user's own callable or class as the subject.

The callables are ``tests/fixtures/pysub_demo/pysub_demo/observers.py``: line-ratio observers that
read the two lines of the prompt, so a reply's true value is known (the ratio of the line lengths).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from bayesobs.cli import main
from bayesobs.run.subjects import python_subject

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "tests" / "fixtures" / "pysub_demo"
KEY = ["subject", "task", "modality", "condition", "session", "run", "trial"]
RUN = ["run", "tasks/line_ratio.toml", "--modality", "text", "--trials", "2", "--no-progress"]


@pytest.fixture(autouse=True)
def demo_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(DEMO))
    monkeypatch.chdir(ROOT)


def _rows(folder: Path) -> pd.DataFrame:
    return pd.read_json(folder / "trials.jsonl", lines=True)


def _run(tmp_path, name, out="o", *more):
    spec = f"python:pysub_demo.observers:{name}"
    return main([*RUN, "--subject", spec, "--out", str(tmp_path / out), *more])


@pytest.mark.parametrize("name", ["answer", "answer_async", "Observer", "Agent"])
def test_a_function_a_coroutine_or_a_class_answers_every_trial(tmp_path, name):
    assert _run(tmp_path, name, "o", "--cache", str(tmp_path / "c")) == 0
    rows = _rows(tmp_path / "o")
    assert len(rows) == 6 and set(rows["subject"]) == {f"python:pysub_demo.observers:{name}"}
    assert rows["valid"].all() and not rows["cached"].any()
    # each reply is the ratio of the two lines it was shown (whole characters: within 1/30)
    assert (rows["response"] - rows["stimulus"]).abs().max() < 1 / 30


def test_replies_are_cached_per_callable_and_no_cache_calls_again(tmp_path, monkeypatch):
    calls = tmp_path / "calls.txt"
    monkeypatch.setenv("CALLS", str(calls))
    cache = ["--cache", str(tmp_path / "c")]
    n = lambda: len(calls.read_text().splitlines())  # noqa: E731
    assert _run(tmp_path, "answer", "o", *cache) == 0 and n() == 6
    first = _rows(tmp_path / "o")
    (tmp_path / "o" / "trials.jsonl").unlink()  # the same folder again: replayed, not called
    assert _run(tmp_path, "answer", "o", *cache) == 0 and n() == 6
    again = _rows(tmp_path / "o")
    assert (
        again["cached"].all() and again["raw_response"].tolist() == first["raw_response"].tolist()
    )
    (tmp_path / "o" / "trials.jsonl").unlink()
    assert _run(tmp_path, "answer", "o", *cache, "--no-cache") == 0 and n() == 12
    # another callable asked the same requests: its own entries, not answer's
    assert _run(tmp_path, "answer_async", "o2", *cache, "--cache-scope", "global") == 0
    assert n() == 18 and not _rows(tmp_path / "o2")["cached"].any()


def test_a_raise_is_retried_with_the_runners_backoff(tmp_path, monkeypatch, capsys):
    waits = []

    async def pause(seconds):
        waits.append(seconds)

    monkeypatch.setattr(python_subject, "pause", pause)
    assert _run(tmp_path, "flaky", "o", "--no-cache") == 0
    rows = _rows(tmp_path / "o")
    assert len(rows) == 6 and (rows["attempts"] == 2).all() and rows["valid"].all()
    assert len(waits) == 6 and all(0.5 <= w <= 1.0 for w in waits)  # backoff 1 s, jittered
    err = capsys.readouterr().err
    assert "ConnectionError: the model server hiccupped" in err and "Traceback" not in err


def test_a_callable_that_keeps_raising_fails_its_trials_as_api_failures_do(
    tmp_path, monkeypatch, capsys
):
    async def pause(seconds):
        pass

    monkeypatch.setattr(python_subject, "pause", pause)
    assert _run(tmp_path, "broken", "o", "--no-cache", "--max-attempts", "3") == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "gave up after 3 attempts: ValueError: no GPU left" in err
    events = [json.loads(x) for x in (tmp_path / "o" / "runs.jsonl").read_text().splitlines()]
    failed = [e for e in events if e.get("event") == "trial_failed"]
    assert len(failed) == 3 and all("ValueError: no GPU left" in e["error"] for e in failed)


def test_a_reply_that_is_not_text_stops_the_run_with_one_line(tmp_path, capsys):
    assert _run(tmp_path, "not_text", "o", "--no-cache") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "python:pysub_demo.observers:not_text returned float, not str" in err


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("python:pysub_demo.absent:f", "cannot import 'pysub_demo.absent': ModuleNotFoundError"),
        ("python:pysub_demo.observers:absent", "'pysub_demo.observers' has no 'absent'"),
        ("python:pysub_demo.observers:NOT_CALLABLE", "is int, not a callable or a class"),
        ("python:pysub_demo.observers", "python:package.module:name"),
    ],
)
def test_a_subject_that_cannot_be_loaded_is_refused_before_the_run(tmp_path, capsys, spec, words):
    assert main([*RUN, "--subject", spec, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err and words in err, err
    assert not (tmp_path / "o").exists()  # refused before the folder was made


@pytest.mark.slow
def test_a_killed_run_resumes_with_nothing_lost_or_doubled_and_the_folder_is_locked(tmp_path):
    calls, out = tmp_path / "calls.txt", tmp_path / "o"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(DEMO)])}
    env.update(CALLS=str(calls), HANG_AFTER="3", BAYESOBS_CACHE=str(tmp_path / "c"))
    code = "import sys; from bayesobs.cli import main; sys.exit(main(sys.argv[1:]))"
    argv = [sys.executable, "-c", code, *RUN, "--out", str(out), "--concurrency", "1"]
    argv += ["--subject", "python:pysub_demo.observers:answer"]
    proc = subprocess.Popen(argv, env=env, cwd=ROOT, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):  # until the fourth call hangs inside the callable
            if calls.exists() and len(calls.read_text().splitlines()) >= 4:
                break
            time.sleep(0.1)
        else:
            pytest.fail("the callable was never called a fourth time")
        second = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True)
        assert second.returncode == 2 and f"{out} is in use by" in second.stderr
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert len(_rows(out)) == 3
    del env["HANG_AFTER"]
    done = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    rows = _rows(out)
    assert len(rows) == 6 and not rows.duplicated(KEY).any() and rows["valid"].all()
    assert len(calls.read_text().splitlines()) == 7  # the killed trial asked again, no other


@pytest.mark.slow
def test_the_docs_custom_subject_page_runs_as_written(tmp_path, monkeypatch):
    """docs/custom-subjects.md: its module, written where the user runs bayesobs, and its commands."""
    import shlex

    from docs_pages import commands, fenced_blocks, page

    text = page("custom-subjects.md")
    code = fenced_blocks(text, "python")[0]
    (tmp_path / "mylab").mkdir()
    (tmp_path / "mylab" / "observers.py").write_text(code)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the folder the CLI adds: not kept after
    lines = commands(fenced_blocks(text, "console")[0])
    assert [x.split()[1] for x in lines] == ["run", "run", "score"]
    speed = {"run": ["--trials", "2", "--no-progress", "--cache", str(tmp_path / "c")],
             "score": ["--bootstrap", "2", "--no-probe", "--no-progress"]}  # fmt: skip
    try:
        for line in lines:
            argv = shlex.split(line)[1:]
            assert main([*argv, *speed[argv[0]]]) == 0, line
    finally:
        for name in [m for m in sys.modules if m.partition(".")[0] == "mylab"]:
            del sys.modules[name]
    for folder in ("runs/mine", "runs/class"):
        rows = _rows(tmp_path / folder)
        assert len(rows) == 6 and (rows["response"] - rows["stimulus"]).abs().max() < 1 / 30
    assert (tmp_path / "runs" / "mine" / "scores").is_dir()
