"""Runner integrity (issue 14): the log records only answers a model gave.

Every scenario runs against a misbehaving local server on 127.0.0.1
(:class:`bayesobs.testing.fakeserver.FakeChatServer`): two endpoints behind one model
name, errors inside HTTP 200 replies, tricky replies, two runs on one folder,
torn tails in all four logs, a garbage ``Retry-After``, a trickling server.
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

import bayesobs
from bayesobs.cli import main
from bayesobs.testing import Answer, FakeChatServer

ROOT = Path(__file__).resolve().parents[2]
KEY = ["subject", "task", "modality", "condition", "session", "run", "trial"]


def _rows(folder: Path) -> list[dict]:
    p = folder / "trials.jsonl"
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()] if p.exists() else []


def _events(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "runs.jsonl").read_text().splitlines() if x.strip()]


def _run(tmp_path, url, out, *extra, task="line_ratio", trials="2"):
    """``bayesobs run`` of a text task on ``openai:m`` against ``url`` with a private cache."""
    return main(
        [
            "run",
            task,
            "--subject",
            "openai:m",
            "--modality",
            "text",
            "--trials",
            trials,
            "--out",
            str(out),
            "--base-url",
            url,
            "--api-key",
            "k",
            "--cache",
            str(tmp_path / "cache"),
            "--no-progress",
            *extra,
        ]
    )


def _one_error_line(err: str) -> None:
    lines = [x for x in err.splitlines() if x.strip()]
    assert "Traceback" not in err
    assert len(lines) == 1 and lines[0].startswith("bayesobs: error: "), err


# ------------------------------------------------------------------ 1. the cache
def test_cache_key_holds_the_endpoint_and_the_request_parameters(tmp_path, capsys):
    """One model name on two servers: the second server is asked, not the first one's cache."""
    with (
        FakeChatServer(lambda b, n: Answer("0.3")) as one,
        FakeChatServer(lambda b, n: Answer("0.7")) as two,
    ):
        assert _run(tmp_path, one.url, tmp_path / "a", "--cache-scope", "global") == 0
        assert _run(tmp_path, two.url, tmp_path / "b", "--cache-scope", "global") == 0
        assert two.count == 6  # every trial reached the second server
        rows = _rows(tmp_path / "b")
        assert {r["response"] for r in rows} == {0.7} and not any(r["cached"] for r in rows)
        manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
        assert manifest["experiment"]["chat"]["base_url"] == two.url
        # other parameters are other requests too
        n = one.count
        assert (
            _run(
                tmp_path, one.url, tmp_path / "c", "--cache-scope", "global", "--temperature", "0.2"
            )
            == 0
        )
        assert (
            _run(tmp_path, one.url, tmp_path / "d", "--cache-scope", "global", "--max-tokens", "40")
            == 0
        )
        assert one.count == n + 12
        # with the global scope a new folder replays, and the summary says from where
        capsys.readouterr()
        assert _run(tmp_path, one.url, tmp_path / "e", "--cache-scope", "global") == 0
        assert one.count == n + 12
        assert f"6 from cache (6 from {(tmp_path / 'a').resolve()})" in capsys.readouterr().out


def test_cache_scope_folder_draws_new_samples_and_replays_only_into_its_folder(tmp_path, capsys):
    with FakeChatServer(lambda b, n: Answer(f"0.{n + 10}")) as srv:
        assert _run(tmp_path, srv.url, tmp_path / "a") == 0
        assert _run(tmp_path, srv.url, tmp_path / "b") == 0  # default scope: folder
        assert srv.count == 12  # a new folder is a new sample, not a replay
        a, b = _rows(tmp_path / "a"), _rows(tmp_path / "b")
        assert not any(r["cached"] for r in b)
        assert {r["raw_response"] for r in a}.isdisjoint({r["raw_response"] for r in b})
        # a reply cached but not logged (killed in between) is replayed into its own folder
        log = tmp_path / "a" / "trials.jsonl"
        log.write_text("".join(log.read_text().splitlines(keepends=True)[:2]))
        capsys.readouterr()
        assert _run(tmp_path, srv.url, tmp_path / "a") == 0
        assert srv.count == 12
        out = capsys.readouterr().out
        assert "4 from cache (4 from this folder)" in out
        assert sorted(r["raw_response"] for r in _rows(tmp_path / "a")) == sorted(
            r["raw_response"] for r in a
        )
    assert _events(tmp_path / "a")[-1]["cached_from"] == {str((tmp_path / "a").resolve()): 4}


# ------------------------------------------------------------------ 2 and 6. bad 200 replies, Retry-After
BAD = [
    Answer(
        body={"error": {"message": "upstream provider overloaded", "code": 502}}
    ),  # OpenRouter style
    Answer(body={"id": "x", "object": "chat.completion", "choices": []}),
    Answer(text=None),  # content: null
    Answer(body={"id": "x", "object": "chat.completion"}),  # no choices key
    Answer(
        body=b'{"id": "x", "choices": [{"index": 0, "message": {"role": "assi'
    ),  # truncated JSON
    Answer(body=b"<html><body>502 Bad Gateway</body></html>", content_type="text/html"),
    Answer("slow down", status=429, headers={"retry-after": "soon"}),  # unreadable Retry-After
]


def _first_bad(bad: list[Answer]):
    """The first request of each trial gets one kind of bad reply (in turn); its retry an answer."""
    seen: dict[str, int] = {}
    lock = threading.Lock()

    def script(body, n):
        h = hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).hexdigest()
        with lock:
            first = h not in seen
            seen.setdefault(h, len(seen))
            i = seen[h]
        return bad[i % len(bad)] if first else Answer("0.4")

    return script


def test_bad_200_replies_and_garbage_retry_after_are_retried_never_logged_or_cached(tmp_path):
    with FakeChatServer(_first_bad(BAD)) as srv:
        assert _run(tmp_path, srv.url, tmp_path / "o", trials="3") == 0
        assert srv.count == 18
    rows = _rows(tmp_path / "o")
    assert len(rows) == 9 and all(r["raw_response"] == "0.4" and r["valid"] for r in rows)
    assert all(r["attempts"] == 2 for r in rows)
    cache = [
        json.loads(x) for x in (tmp_path / "cache" / "responses.jsonl").read_text().splitlines()
    ]
    assert len(cache) == 9 and all(e["text"] == "0.4" for e in cache)


def test_bad_200_replies_after_the_retries_fail_the_trial_and_are_redone_on_resume(
    tmp_path, capsys
):
    out = tmp_path / "o"
    with FakeChatServer(lambda b, n: BAD[n % 4]) as srv:
        assert _run(tmp_path, srv.url, out, "--max-attempts", "2") == 1
    assert _rows(out) == []  # nothing logged as a response
    assert "reply without an answer" in capsys.readouterr().err
    failed = [e for e in _events(out) if e["event"] == "trial_failed"]
    assert len(failed) == 3 and all(
        e["trial"] == 0 and "reply without an answer" in e["error"] for e in failed
    )
    assert not (out / "manifest.json").exists()  # item 8: no trial, no manifest
    assert not (tmp_path / "cache" / "responses.jsonl").exists()
    with FakeChatServer(lambda b, n: Answer("0.25")) as srv:
        assert _run(tmp_path, srv.url, out, "--max-attempts", "2") == 0
        assert srv.count == 6  # every trial redone, none replayed from a cache
    assert [r["response"] for r in _rows(out)] == [0.25] * 6


def test_timeout_bounds_the_whole_request_of_a_trickling_server(tmp_path):
    """1 byte every 50 ms (about 15 s for the body): --timeout 1 cuts it at about 1 s."""
    with FakeChatServer(lambda b, n: Answer("0.5", trickle_s=0.05)) as srv:
        t0 = time.perf_counter()
        code = main(
            [
                "run",
                "line_ratio",
                "--subject",
                "openai:m",
                "--modality",
                "text",
                "--trials",
                "1",
                "--out",
                str(tmp_path / "o"),
                "--base-url",
                srv.url,
                "--api-key",
                "k",
                "--no-cache",
                "--timeout",
                "1",
                "--max-attempts",
                "1",
                "--no-progress",
            ]
        )
        elapsed = time.perf_counter() - t0
    assert code == 1 and elapsed < 1 + 2.0
    failed = [e for e in _events(tmp_path / "o") if e["event"] == "trial_failed"]
    assert len(failed) == 3 and all("time-out" in e["error"] for e in failed)


# ------------------------------------------------------------------ 3. reading replies
@pytest.mark.parametrize(
    ("reply", "truncated", "value", "reason"),
    [
        ("0.4-0.5", False, None, "ambiguous: a range"),
        ("The answer is 0.45.\n\nConfidence: 80%", False, 0.45, ""),
        (
            "Line A has 12 dashes and line B has 30, so the ratio is",
            True,
            None,
            "cut off by max_tokens",
        ),
        ("Answer: 0.35. Line A has 12 dashes and line", True, 0.35, ""),
        ("0,500", False, 0.5, ""),
        ("1,500", False, None, "out of range: 1500"),
        ("0.4 or maybe 0.6", False, None, "ambiguous: 2 different numbers"),
        ("It is 45%", False, 0.45, ""),
        ("1.7", False, None, "out of range: 1.7 not in [0, 1]"),
        ("I cannot tell.", False, None, "no number"),
        ("", False, None, "empty reply"),
        ("Sure! I would estimate the ratio at about 0.42, give or take.", False, 0.42, ""),
    ],
)
def test_reply_reading_rules(reply, truncated, value, reason):
    from bayesobs.parse import read_answer

    v, why = read_answer(reply, fraction=True, answer_range=(0.0, 1.0), truncated=truncated)
    if value is None:
        assert math.isnan(v) and why.startswith(reason)
    else:
        assert v == pytest.approx(value) and why == ""


TRICKY = {
    0: Answer("0.4-0.5"),
    1: Answer("The answer is 0.45.\n\nConfidence: 80%"),
    2: Answer("Line A has 12 dashes and line B has 30, so the ratio is", finish_reason="length"),
    3: Answer("0,500"),
}


def test_tricky_replies_are_logged_invalid_with_reasons_and_counted_in_missing_csv(tmp_path):
    out = tmp_path / "o"

    def script(body, n):
        trial = (len(body["messages"]) - 2) // 2
        return TRICKY[trial]

    with FakeChatServer(script) as srv:
        assert _run(tmp_path, srv.url, out, trials="4") == 0
        assert all(
            b["max_completion_tokens"] == 64 for b in srv.requests
        )  # room for an answer and a note
    rows = pd.DataFrame(_rows(out)).sort_values(["session", "trial"])
    by = rows.groupby("trial")
    assert by["valid"].apply(list).to_dict() == {
        0: [False] * 3,
        1: [True] * 3,
        2: [False] * 3,
        3: [True] * 3,
    }
    assert set(rows.loc[rows["trial"] == 1, "response"]) == {0.45}
    assert set(rows.loc[rows["trial"] == 3, "response"]) == {0.5}
    assert set(rows.loc[rows["trial"] == 0, "invalid_reason"]) == {
        "ambiguous: a range, not one number"
    }
    assert set(rows.loc[rows["trial"] == 2, "invalid_reason"]) == {
        "cut off by max_tokens before an answer"
    }
    assert set(rows.loc[rows["trial"] == 2, "finish_reason"]) == {"length"}
    assert (
        main(
            [
                "score",
                str(out),
                "--out",
                str(tmp_path / "s"),
                "--bootstrap",
                "0",
                "--no-probe",
                "--no-progress",
            ]
        )
        == 0
    )
    missing = pd.read_csv(tmp_path / "s" / "missing.csv")
    parse = missing[missing["component"] == "invalid replies"].set_index("reason")
    assert set(parse.index) == {
        "ambiguous: a range, not one number: 3 trial(s)",
        "cut off by max_tokens before an answer: 3 trial(s)",
    }


# ------------------------------------------------------------------ 4. one run per folder
def test_two_runs_on_one_folder_cannot_both_log(tmp_path, capsys):
    out = tmp_path / "o"
    with FakeChatServer(lambda b, n: Answer("0.5", delay_s=0.1)) as srv:
        cmd = [
            sys.executable,
            "-m",
            "bayesobs.cli",
            "run",
            "line_ratio",
            "--subject",
            "openai:m",
            "--modality",
            "text",
            "--trials",
            "15",
            "--out",
            str(out),
            "--base-url",
            srv.url,
            "--api-key",
            "k",
            "--no-cache",
            "--no-progress",
        ]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        first = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.time() + 30
        while time.time() < deadline and not (out / "trials.jsonl").exists():
            time.sleep(0.02)
        assert main(cmd[3:]) == 2  # the same command while the first one runs
        err = capsys.readouterr().err
        _one_error_line(err)
        assert f"is in use by pid {first.pid} on {socket.gethostname()}" in err
        _, first_err = first.communicate(timeout=60)
        assert first.returncode == 0, first_err
    rows = pd.DataFrame(_rows(out))
    assert len(rows) == 45 and not rows.duplicated(KEY).any()


def test_a_stale_lock_of_a_dead_process_is_reclaimed(tmp_path, capsys):
    out = tmp_path / "o"
    out.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (out / ".lock").write_text(
        json.dumps({"pid": dead.pid, "host": socket.gethostname(), "since": "x"})
    )
    args = [
        "run",
        "line_ratio",
        "--subject",
        "sim:linear",
        "--modality",
        "text",
        "--trials",
        "2",
        "--out",
        str(out),
        "--no-progress",
    ]
    assert main(args) == 0
    assert f"reclaimed a stale lock on {out} left by pid {dead.pid}" in capsys.readouterr().err
    assert (out / ".lock").read_text() == ""  # released at the end
    assert len(_rows(out)) == 6


# ------------------------------------------------------------------ 5. torn tails
def test_torn_tails_in_all_four_logs_are_cut_back_on_open(tmp_path, capsys):
    from bayesobs.web import ParticipantServer

    out, cache = tmp_path / "o", tmp_path / "cache" / "responses.jsonl"
    with FakeChatServer(lambda b, n: Answer("0.5")) as srv:
        assert _run(tmp_path, srv.url, out) == 0
        log = out / "trials.jsonl"
        log.write_text("".join(log.read_text().splitlines(keepends=True)[:4]))  # two trials to redo
        frags = {
            log: b'{"subject":"openai:m","task":"line',
            out / "runs.jsonl": b'{"time_utc":"2026-',
            cache: b'{"key":"ab',
        }
        for path, frag in frags.items():
            with path.open("ab") as fh:
                fh.write(frag)
        assert _run(tmp_path, srv.url, out) == 0
    err = capsys.readouterr().err
    assert "torn last line" in err and "trials.jsonl.torn" in err
    for path, frag in frags.items():
        data = path.read_bytes()
        assert data.endswith(b"\n")
        assert all(
            json.loads(x) for x in data.splitlines()
        )  # every line whole: jq and pandas read it
        assert path.with_name(path.name + ".torn").read_bytes() == frag + b"\n"
    assert len(pd.read_json(out / "trials.jsonl", lines=True)) == 6
    assert _events(out)[-1]["event"] == "end" and _events(out)[-1]["logged"] == 2
    # the participant log of the web app
    web = tmp_path / "web"
    ParticipantServer(ROOT / "tasks" / "line_ratio.toml", web, ["text"], ["base"], 2)
    part = web / "participants.jsonl"
    part.write_bytes(b'{"event":"join","pid":"a","key_sha256":"00","time_utc":"x"}\n{"event":"jo')
    server = ParticipantServer(ROOT / "tasks" / "line_ratio.toml", web, ["text"], ["base"], 2)
    assert part.read_bytes().endswith(b'"x"}\n') and "a" in server.keys
    server.participants.append({"event": "join", "pid": "b", "key_sha256": "11", "time_utc": "y"})
    assert [json.loads(x)["pid"] for x in part.read_text().splitlines()] == ["a", "b"]


def test_a_full_disk_is_one_line_and_leaves_whole_lines(tmp_path, monkeypatch, capsys):
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
        "--concurrency",
        "1",
    ]
    real_write, calls = os.write, []

    def full(fd, data):
        if os.readlink(f"/proc/self/fd/{fd}").endswith("trials.jsonl"):
            calls.append(1)
            if len(calls) == 5:  # half a record reaches the disk, then it is full
                real_write(fd, data[: len(data) // 2])
                raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", full)
    assert main(args) == 2
    err = capsys.readouterr().err
    _one_error_line(err)
    assert "the disk is full" in err
    data = (out / "trials.jsonl").read_bytes()
    assert data.endswith(b"\n") and 4 <= len(data.splitlines()) < 12  # the half record was undone
    assert all(json.loads(x) for x in data.splitlines())
    monkeypatch.setattr(os, "write", real_write)
    assert main(args) == 0
    rows = pd.DataFrame(_rows(out))
    assert len(rows) == 12 and not rows.duplicated(KEY).any()


# ------------------------------------------------------------------ 7. bad options and specs
SPEC = 'task = "line_ratio"\nseed = 1\ntrials = 3\n[[sessions]]\nname = "a"\nrange = [0.1, 0.5]\n'


@pytest.mark.parametrize(
    ("extra", "spec", "message"),
    [
        (["--trials", "0"], None, "--trials must be a whole number >= 1"),
        (["--runs", "0"], None, "--runs must be a whole number >= 1"),
        (["--trials", "-3"], None, "--trials must be a whole number >= 1"),
        (["--concurrency", "0"], None, "--concurrency must be at least 1"),
        (["--concurrency", "-2"], None, "--concurrency must be at least 1"),
        (
            [],
            SPEC.replace("trials = 3", "trials = 2.5"),
            "trials must be a whole number >= 1, not 2.5",
        ),
        (
            [],
            'task = "line_ratio"\nseed = 1\ntrials = 3\nsessions = []\n',
            "sessions must be a non-empty list",
        ),
        ([], SPEC + '[[sessions]]\nname = "a"\nrange = [0.3, 0.7]\n', "two sessions are named 'a'"),
        ([], SPEC + "[ablations]\ncontext = -1\n", "ablations.context must be a whole number >= 0"),
        ([], SPEC.replace("[0.1, 0.5]", "[-1.0, 0.5]"), "range low must be >= 0"),
        ([], SPEC.replace("[0.1, 0.5]", "[0.1, inf]"), "range high must be a finite number"),
        ([], SPEC + "[options]\nmin_chars = -5\n", "options.min_chars must be a whole number >= 0"),
        ([], SPEC + "[ablations]\nblur_sigma = -1.0\n", "ablations.blur_sigma must be >= 0"),
        (
            [],
            SPEC + "[ablations]\nblur_sigma = inf\n",
            "ablations.blur_sigma must be a finite number",
        ),
        ([], b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe", "not a text file"),
        ([], 'task = "line_ratio"\nseed = = 1\n', "not valid TOML"),
    ],
)
def test_bad_options_and_specs_are_one_line_and_exit_2(tmp_path, capsys, extra, spec, message):
    task = "line_ratio"
    if spec is not None:
        path = tmp_path / "spec.toml"
        path.write_bytes(spec if isinstance(spec, bytes) else spec.encode())
        task = str(path)
    args = [
        "run",
        task,
        "--subject",
        "sim:linear",
        "--modality",
        "text",
        "--out",
        str(tmp_path / "o"),
        "--no-progress",
        *extra,
    ]
    assert main(args) == 2
    err = capsys.readouterr().err
    _one_error_line(err)
    assert message in err
    assert not (tmp_path / "o").exists()


def test_out_a_file_and_a_read_only_folder_are_one_line(tmp_path, capsys, monkeypatch):
    afile = tmp_path / "afile"
    afile.write_text("x")
    base = [
        "run",
        "line_ratio",
        "--subject",
        "sim:linear",
        "--modality",
        "text",
        "--trials",
        "2",
        "--no-progress",
    ]
    assert main([*base, "--out", str(afile)]) == 2
    err = capsys.readouterr().err
    _one_error_line(err)
    assert "is a file, not a folder" in err
    # a read-only folder (simulated: the tests may run as root, who may write anywhere)
    ro = tmp_path / "ro"
    ro.mkdir()
    real_open = os.open

    def denied(path, flags, *a, **k):
        if str(path).startswith(str(ro)) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *a, **k)

    monkeypatch.setattr(os, "open", denied)
    assert main([*base, "--out", str(ro)]) == 2
    err = capsys.readouterr().err
    _one_error_line(err)
    assert "Permission denied" in err


# ------------------------------------------------------------------ 8. manifests and experiments
def test_experiment_identity_ignores_the_spec_name_and_lists_differences(tmp_path, capsys):
    out = tmp_path / "o"
    base = ["--subject", "sim:linear", "--modality", "text", "--out", str(out), "--no-progress"]
    assert main(["run", "line_ratio", *base, "--trials", "3"]) == 0
    assert (
        main(["run", str(ROOT / "tasks" / "line_ratio.toml"), *base, "--trials", "3"]) == 0
    )  # the same
    capsys.readouterr()
    assert main(["run", "line_ratio", *base, "--trials", "4", "--sim-seed", "2"]) == 2
    err = capsys.readouterr().err
    _one_error_line(err)
    assert "trials: 3 -> 4" in err and "sim_seed: 0 -> 2" in err
    # a folder with trials but no manifest is not adopted
    (out / "manifest.json").unlink()
    assert main(["run", "line_ratio", *base, "--trials", "3"]) == 2
    assert "has trials.jsonl but no manifest.json" in capsys.readouterr().err


def test_a_run_that_fails_before_its_first_trial_writes_no_manifest(tmp_path):
    out = tmp_path / "o"
    with FakeChatServer(lambda b, n: Answer("this model does not take images", status=400)) as srv:
        assert _run(tmp_path, srv.url, out) == 1
    assert not (out / "manifest.json").exists() and _rows(out) == []
    with FakeChatServer() as srv:  # the corrected command may use the folder
        assert _run(tmp_path, srv.url, out, "--temperature", "0") == 0
    assert json.loads((out / "manifest.json").read_text())["experiment"]["chat"]["temperature"] == 0


# ------------------------------------------------------------------ 9. the fake server's command
def test_fakeserver_command_takes_host_and_port_and_ignores_hang_ups(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bayesobs.testing.fakeserver",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--reply",
            "0.25",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stdout.readline().strip() == f"http://127.0.0.1:{port}/v1"
        for _ in range(3):  # clients that hang up mid-request, one with a reset
            c = socket.create_connection(("127.0.0.1", port))
            c.sendall(b'POST /v1/chat/completions HTTP/1.1\r\ncontent-length: 500\r\n\r\n{"mo')
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            c.close()
        assert (
            main(
                [
                    "run",
                    "line_ratio",
                    "--subject",
                    "openai:m",
                    "--modality",
                    "text",
                    "--trials",
                    "1",
                    "--out",
                    str(tmp_path / "o"),
                    "--base-url",
                    f"http://127.0.0.1:{port}/v1",
                    "--api-key",
                    "k",
                    "--no-cache",
                    "--no-progress",
                ]
            )
            == 0
        )
        assert {r["response"] for r in _rows(tmp_path / "o")} == {0.25}
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert "Traceback" not in err and "Error" not in err and "Warning" not in err


def test_read_trials_of_a_resumed_folder_has_the_reason_column(tmp_path):
    with FakeChatServer(lambda b, n: Answer("no idea" if n % 2 else "0.3")) as srv:
        assert _run(tmp_path, srv.url, tmp_path / "o") == 0
    t = bayesobs.read_trials(tmp_path / "o")
    assert set(t["invalid_reason"].dropna()) == {"no number"}


def test_blank_replies_cached_by_older_versions_are_not_replayed(tmp_path):
    """Older versions cached error bodies as empty replies (no finish_reason): never replayed."""
    from bayesobs.run.subjects.cache import ResponseCache

    log = tmp_path / "responses.jsonl"
    log.write_text(
        '{"key":"old","text":"","usage":null,"time_utc":"x"}\n'
        '{"key":"new","text":"","usage":null,"finish_reason":"length","time_utc":"x"}\n'
        '{"key":"ok","text":"0.4","usage":null,"time_utc":"x"}\n'
    )
    cache = ResponseCache(tmp_path)
    assert cache.get("old") is None
    assert cache.get("new")["finish_reason"] == "length" and cache.get("ok")["text"] == "0.4"


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_key_inside_the_base_url_is_used_and_never_written(tmp_path, provider):
    """``http://user:KEY@host/v1?api_key=KEY2`` (issue 48): asked with, written without."""
    with FakeChatServer(lambda b, n: Answer("0.3")) as srv:  # it answers both APIs
        host = (srv.url if provider == "openai" else srv.root).removeprefix("http://")
        url = f"http://user:sk-USERINFO-0123456789@{host}?api-key=sk-QUERY-0123456789&v=2"
        argv = ["run", "line_ratio", "--subject", f"{provider}:m", "--modality", "text"]
        out, cache = tmp_path / "o", tmp_path / "cache"
        argv += ["--trials", "2", "--out", str(out), "--base-url", url, "--cache", str(cache)]
        assert main([*argv, "--no-progress"]) == 0
        assert srv.count == 6  # the URL as given reached the server
    written = [p for d in (out, cache) for p in d.rglob("*") if p.is_file()]
    assert any(p.name == "responses.jsonl" for p in written)
    leaks = [p.name for p in written if b"0123456789" in p.read_bytes()]
    assert leaks == []
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["experiment"]["chat"]["base_url"] == f"http://{host}?v=2"


@pytest.mark.parametrize(
    "url, written",
    [
        ("http://u:sk-1@h:1/v1?api-key=a&v=2", "http://h:1/v1?v=2"),
        ("https://h/v1?key=abc&design=x&keyword=y", "https://h/v1?design=x&keyword=y"),
        ("https://h/x?X-Amz-Signature=1&access_token=2&apikey=3&auth=4", "https://h/x"),
        ("http://localhost:8000/v1", "http://localhost:8000/v1"),
        ("https://h/v1/?a=1&b", "https://h/v1/?a=1&b"),  # nothing to drop: left as given
    ],
)
def test_the_endpoint_as_written_has_no_user_password_or_key_parameter(url, written):
    from bayesobs.run.subjects.openai_chat import public_url

    assert public_url(url) == written


def _sim_folder(out: Path) -> list[str]:
    argv = ["run", "line_ratio", "--subject", "sim:bayesian", "--modality", "text"]
    argv += ["--trials", "3", "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    return argv


@pytest.mark.parametrize(
    "line, needle",
    [
        ('{"stimulus": 0.5, "response": 0.4}', "no subject, task, modality"),
        ('{"subject": "sim:bayesian", "task": "line_ratio", "trial": 1}', "no modality"),
    ],
)
def test_a_logged_line_without_the_trial_keys_is_one_line_on_resume_and_rescore(
    tmp_path, capsys, line, needle
):
    """A line of trials.jsonl that is no trial record (issue 48): named by file and line, exit 2."""
    out = tmp_path / "o"
    argv = _sim_folder(out)
    log = out / "trials.jsonl"
    with log.open("a") as fh:
        fh.write(line + "\n")
    before = log.read_bytes()
    capsys.readouterr()
    for command in (argv, [*argv, "--dry-run"], ["rescore", str(out)]):
        assert main(command) == 2
        err = capsys.readouterr().err
        _one_error_line(err)
        assert f"{log}: line 10: not a trial record: {needle}" in err
    assert log.read_bytes() == before  # nothing lost, nothing added


def test_rescore_of_a_reply_that_is_not_text_is_one_line(tmp_path, capsys):
    out = tmp_path / "o"
    _sim_folder(out)
    log = out / "trials.jsonl"
    rows = _rows(out)
    rows[4]["raw_response"] = {"text": "0.5"}
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    capsys.readouterr()
    assert main(["rescore", str(out)]) == 2
    err = capsys.readouterr().err
    _one_error_line(err)
    assert f"{log}: line 5: raw_response is a dict, not the reply's text" in err
    assert not (out / "rescored.jsonl").exists()
