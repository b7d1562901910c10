"""The task runner: a misbehaving local chat API, resume after kill, stimuli, subjects."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import bayesobs
from bayesobs.cli import main
from bayesobs.scores import score
from bayesobs.testing.fakeserver import Answer, FakeChatServer

SECRET = "sk-test-SECRET-0123456789"


def _trials(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "trials.jsonl").read_text().splitlines() if x.strip()]


def misbehaving(body: dict, n: int) -> Answer:
    """500s, 429s with Retry-After, wordy replies and a slow reply."""
    if n % 11 == 3:
        return Answer("overloaded", status=500)
    if n % 7 == 2:
        return Answer("rate limited", status=429, headers={"retry-after": "0.05"})
    if n == 5:
        return Answer("0.5", delay_s=1.5)  # longer than the client's time-out: retried
    if n % 3 == 0:
        return Answer("Sure! I would estimate the ratio at about 0.42, give or take.")
    return Answer("0.37")


def test_api_run_survives_a_misbehaving_server(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    out, cache = tmp_path / "exp", tmp_path / "cache"
    with FakeChatServer(misbehaving) as srv:
        code = main(
            [
                "run",
                "line_ratio",
                "--subject",
                "openai:fake-model",
                "--modality",
                "multimodal",
                "--trials",
                "6",
                "--out",
                str(out),
                "--base-url",
                srv.url,
                "--cache",
                str(cache),
                "--timeout",
                "0.5",
                "--no-progress",
            ]
        )
        requests = list(srv.requests)
        headers = list(srv.headers)
    assert code == 0
    rows = _trials(out)
    assert len(rows) == 18 and all(r["valid"] for r in rows)
    assert {r["response"] for r in rows} <= {0.37, 0.42, 0.5}
    assert any("give or take" in r["raw_response"] for r in rows)  # raw reply kept
    assert max(r["attempts"] for r in rows) >= 2
    # requests carry the image and the rolling context (system + 2 per earlier trial + current)
    first = next(b for b in requests if len(b["messages"]) == 2)
    parts = first["messages"][1]["content"]
    assert parts[0]["type"] == "text" and parts[1]["image_url"]["url"].startswith(
        "data:image/png;base64,"
    )
    assert max(len(b["messages"]) for b in requests) == 2 + 2 * 5
    assert all(b["temperature"] == 0.7 for b in requests)
    by_trial = {(r["session"], r["trial"]): r for r in rows}
    assert by_trial[("short", 5)]["context_trials"] == [0, 1, 2, 3, 4]
    # the key reaches the server as a header but is written nowhere
    assert any(
        SECRET in {k.lower(): v for k, v in h.items()}.get("authorization", "") for h in headers
    )
    for f in [*out.rglob("*.json*"), *cache.rglob("*")]:
        if f.is_file():
            assert SECRET not in f.read_text(errors="ignore"), f


def test_cache_hit_on_rerun_into_a_new_folder(tmp_path):
    # replies shared across folders: --cache-scope global (the default, folder, draws new samples)
    args = [
        "run",
        "marker_location",
        "--subject",
        "openai:fake",
        "--modality",
        "text",
        "--trials",
        "4",
        "--cache",
        str(tmp_path / "cache"),
        "--api-key",
        SECRET,
        "--no-progress",
        "--cache-scope",
        "global",
    ]
    with FakeChatServer() as srv:
        assert main([*args, "--out", str(tmp_path / "a"), "--base-url", srv.url]) == 0
        n = srv.count
        assert main([*args, "--out", str(tmp_path / "b"), "--base-url", srv.url]) == 0
        assert srv.count == n  # nothing paid twice
        rows = _trials(tmp_path / "b")
        assert all(r["cached"] for r in rows)
        # a different run index is a different sample, not a replay
        assert (
            main([*args, "--out", str(tmp_path / "c"), "--base-url", srv.url, "--runs", "2"]) == 0
        )
        assert srv.count == n + 12


def test_fatal_api_error_stops_with_a_clear_message(tmp_path, capsys):
    with FakeChatServer(lambda b, n: Answer("bad key " + SECRET, status=401)) as srv:
        code = main(
            [
                "run",
                "line_ratio",
                "--subject",
                "openai:m",
                "--modality",
                "text",
                "--trials",
                "2",
                "--out",
                str(tmp_path / "o"),
                "--base-url",
                srv.url,
                "--api-key",
                SECRET,
                "--no-cache",
                "--no-progress",
            ]
        )
    err = capsys.readouterr().err
    assert code == 1 and "AuthenticationError" in err and SECRET not in err


def test_unparseable_replies_are_kept_as_nan(tmp_path):
    with FakeChatServer(lambda b, n: Answer("I cannot tell." if n % 2 else "0.4")) as srv:
        main(
            [
                "run",
                "line_ratio",
                "--subject",
                "openai:m",
                "--modality",
                "text",
                "--trials",
                "4",
                "--out",
                str(tmp_path / "o"),
                "--base-url",
                srv.url,
                "--api-key",
                "k",
                "--no-cache",
                "--no-progress",
            ]
        )
    rows = _trials(tmp_path / "o")
    bad = [r for r in rows if not r["valid"]]
    assert len(bad) == 6 and all(
        r["response"] is None and r["raw_response"] == "I cannot tell." for r in bad
    )
    t = bayesobs.read_trials(tmp_path / "o")
    assert t["response"].isna().sum() == 6


def test_dry_run_counts_calls_and_calls_nothing(tmp_path, capsys):
    with FakeChatServer() as srv:
        main(
            [
                "run",
                "line_ratio",
                "--subject",
                "openai:m",
                "--trials",
                "5",
                "--out",
                str(tmp_path / "o"),
                "--base-url",
                srv.url,
                "--dry-run",
            ]
        )
        assert srv.count == 0
    out = capsys.readouterr().out
    assert "45 call(s) to make" in out and "input tokens" in out
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "nosuchtask", "--subject", "sim:bayesian"], "no task spec 'nosuchtask'"),
        (
            ["run", "line_ratio", "--subject", "sim:bayesian", "--condition", "steer_loud"],
            "unknown condition 'steer_loud'",
        ),
        (
            ["run", "line_ratio", "--subject", "sim:wizard"],
            "unknown simulated subject 'sim:wizard'",
        ),
        (["run", "line_ratio", "--subject", "gpt4"], "unknown subject 'gpt4'"),
        (
            ["run", "duration", "--subject", "sim:bayesian", "--modality", "image"],
            "takes modalities text",
        ),
    ],
)
def test_bad_specs_fail_before_any_call(tmp_path, argv, message, capsys):
    assert main([*argv, "--out", str(tmp_path / "o")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_spec_missing_key(tmp_path, capsys):
    spec = tmp_path / "bad.toml"
    spec.write_text('task = "line_ratio"\nseed = 1\n[[sessions]]\nname = "a"\nrange = [0.1, 0.5]\n')
    assert main(["run", str(spec), "--subject", "sim:bayesian", "--out", str(tmp_path / "o")]) == 2
    assert "missing key 'trials'" in capsys.readouterr().err


def test_identical_stimuli_across_modalities_and_conditions(tmp_path):
    assert (
        main(
            [
                "run",
                "maze_distance",
                "--subject",
                "sim:bayesian",
                "--trials",
                "5",
                "--condition",
                "base",
                "--condition",
                "noise_constant",
                "--out",
                str(tmp_path / "o"),
                "--no-progress",
            ]
        )
        == 0
    )
    t = pd.DataFrame(_trials(tmp_path / "o"))
    seqs = (
        t.groupby(["modality", "condition", "session"])["stimulus_id"]
        .apply(tuple)
        .unstack("session")
    )
    assert (seqs.nunique() == 1).all()
    assert (
        t.loc[t["modality"] != "text", "blur_sigma"].groupby(t["condition"]).max() == [0.0, 3.0]
    ).all()


def test_context_reversed_and_none(tmp_path):
    main(
        [
            "run",
            "line_ratio",
            "--subject",
            "sim:bayesian",
            "--trials",
            "6",
            "--modality",
            "text",
            "--condition",
            "base",
            "--condition",
            "context_reversed",
            "--condition",
            "context_none",
            "--condition",
            "context_short",
            "--out",
            str(tmp_path / "o"),
            "--no-progress",
        ]
    )
    t = pd.DataFrame(_trials(tmp_path / "o"))
    s = t[t["session"] == "short"].set_index(["condition", "trial"])
    assert (
        list(s.loc["context_reversed", "stimulus_id"]) == list(s.loc["base", "stimulus_id"])[::-1]
    )
    assert all(c == [] for c in s.loc["context_none", "context_trials"])
    assert s.loc[("context_short", 5), "context_trials"] == [2, 3, 4]


# slow: three CLI processes run the whole BayesBench protocol (2,352 trials each, ~14 s of CPU);
# the fast tier keeps the deterministic resume checks (test_torn_line_is_cut_and_redone_on_resume,
# run/test_runner_integrity.py's torn tails and redone trials)
@pytest.mark.slow
def test_resume_after_kill_loses_nothing_and_doubles_nothing(tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "bayesobs.cli",
        "sweep",
        "tasks/bayesbench.toml",
        "--subject",
        "sim:bayesian",
        "--trials",
        "8",
        "--out",
        str(tmp_path / "killed"),
        "--no-progress",
    ]
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(cmd, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = tmp_path / "killed" / "trials.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline and (not log.exists() or log.stat().st_size < 20_000):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = len(log.read_text().splitlines())
    assert 0 < partial < 2352
    subprocess.run(cmd, cwd=root, check=True, stdout=subprocess.DEVNULL)
    ref = [*cmd[:-3], "--out", str(tmp_path / "clean"), "--no-progress"]
    subprocess.run(ref, cwd=root, check=True, stdout=subprocess.DEVNULL)
    key = ["subject", "task", "modality", "condition", "session", "run", "trial"]
    a = pd.DataFrame(_trials(tmp_path / "killed"))
    b = pd.DataFrame(_trials(tmp_path / "clean"))
    assert len(a) == len(b) == 2352 and not a.duplicated(key).any()
    merged = a.merge(b, on=key, suffixes=("", "_ref"))
    assert len(merged) == len(b)
    np.testing.assert_array_equal(
        merged["raw_response"], merged["raw_response_ref"]
    )  # as if never killed
    events = [
        json.loads(x)["event"]
        for x in (tmp_path / "killed" / "runs.jsonl").read_text().splitlines()
    ]
    assert events[0] == "start" and events[-1] == "end"


def test_resume_refuses_a_different_experiment(tmp_path, capsys):
    base = [
        "run",
        "line_ratio",
        "--subject",
        "sim:bayesian",
        "--modality",
        "text",
        "--out",
        str(tmp_path / "o"),
        "--no-progress",
    ]
    assert main([*base, "--trials", "3"]) == 0
    assert main([*base, "--trials", "4"]) == 2
    assert "holds a different experiment" in capsys.readouterr().err


@pytest.mark.slow
def test_bcs_sign_of_simulated_observers(tmp_path):
    """sim:bayesian is Bayes-consistent (BCS > 0), sim:antibayes is not (BCS < 0)."""
    proto = tmp_path / "proto.toml"
    root = Path(__file__).resolve().parents[2] / "tasks"
    conds = '["base", "steer_verbal", "steer_numeric", "noise_constant", "noise_gradual", "context_long"]'
    proto.write_text(
        "".join(
            f'[[experiment]]\nspec = "{root / t}.toml"\nmodalities = ["image", "multimodal"]\nconditions = {conds}\n'
            for t in ("line_ratio", "marker_location", "maze_distance")
        )
    )
    out = tmp_path / "o"
    assert (
        main(
            [
                "sweep",
                str(proto),
                "--subject",
                "sim:bayesian",
                "--subject",
                "sim:antibayes",
                "--trials",
                "30",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    res = score(bayesobs.read_trials(out), bootstrap=0, probe=False)
    bcs = res.bayesbench.set_index("subject")["BCS"]
    assert bcs["sim:bayesian"] > 0 > bcs["sim:antibayes"]


def test_torn_line_is_cut_and_redone_on_resume(tmp_path, capsys):
    out = tmp_path / "o"
    args = [
        "run",
        "line_ratio",
        "--subject",
        "sim:linear",
        "--modality",
        "text",
        "--trials",
        "4",
        "--out",
        str(out),
        "--no-progress",
    ]
    assert main(args) == 0
    log = out / "trials.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    # simulate a crash in the middle of writing the last record
    log.write_bytes(b"".join(lines[:-1]) + lines[-1][:25])
    with pytest.warns(UserWarning, match="skipped 1 torn line"):  # the reader skips it meanwhile
        bayesobs.read_trials(out)
    assert main(args) == 0
    assert "torn last line" in capsys.readouterr().err
    t = bayesobs.read_trials(out)  # the fragment was cut back (kept aside): no warning
    assert len(t) == 12 and t["response"].notna().all()
    assert (out / "trials.jsonl.torn").read_bytes() == lines[-1][:25] + b"\n"
    assert main(args) == 0  # a later resume has nothing torn to report
    assert "torn" not in capsys.readouterr().err


def test_planning_shows_progress_and_the_total_before_any_trial(tmp_path, capsys):
    """A large protocol renders its stimuli first: the bar shows that from the start."""
    from bayesobs.run.runner import sweep

    proto = tmp_path / "p.toml"
    proto.write_text(
        "".join(
            f'[[experiment]]\nspec = "{Path(__file__).resolve().parents[2] / "tasks" / t}.toml"\nmodalities = ["text"]\n\n'
            for t in ("line_ratio", "numerosity")
        )
    )
    sweep(proto, ["sim:bayesian"], tmp_path / "o", trials=3, progress=True)
    err = capsys.readouterr().err.replace("\r", "\n")
    lines = [x for x in err.splitlines() if x.strip()]
    # issue 32: the plan is named first
    assert lines[0].startswith("plan: line_ratio, numerosity; 1 subject(s), 6 cell(s)")
    assert lines[1].startswith("making stimuli (line_ratio, numerosity)")
    assert "planned 6 session(s), 18 trial(s)" in err
    assert err.index("planned") < err.index("trials:")  # before the trials' bar
