"""``--batch`` (issue 30 section 1): OpenAI's Batch API in rounds, against a local batch server.

The server (:mod:`bayesobs.testing.fakebatch`) implements the documented endpoints and
file formats; its ``hashed`` script answers a number hashed from the whole
request, live and in batches alike, so a batch run that built any request
differently from a live run (another context, another order) logs other
answers.
"""

from __future__ import annotations

import io
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import openai
import pytest

from bayesobs.cli import main
from bayesobs.run import batch as B
from bayesobs.run.engine import estimate
from bayesobs.run.plan import load_protocol, plan
from bayesobs.testing.fakebatch import FakeBatchServer, Fate, always, check_input, hashed
from bayesobs.testing.fakeserver import Answer

ROOT = Path(__file__).resolve().parents[3]
KEY = ["subject", "task", "modality", "condition", "session", "run", "trial"]
# what the subject was shown and answered (timing, attempts and batch_id differ by design)
SAME = [
    "stimulus",
    "stimulus_id",
    "stimulus_text",
    "image",
    "prompt_id",
    "context_trials",
    "context_window",
    "raw_response",
    "response",
    "valid",
    "usage",
    "token_param",
    "temperature_effective",
    "image_detail",
]


def _rows(folder: Path) -> list[dict]:
    p = folder / "trials.jsonl"
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()] if p.exists() else []


def _by_key(folder: Path) -> dict[tuple, dict]:
    rows = _rows(folder)
    keyed = {tuple(r[k] for k in KEY): r for r in rows}
    assert len(keyed) == len(rows), "a trial logged twice"
    return keyed


def _batches(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "batches.jsonl").read_text().splitlines()]


def _protocol(tmp_path: Path) -> Path:
    """A reduced BayesBench: rolling contexts of every length, reversal, steering, no context."""
    conds = '["base", "context_short", "context_reversed", "steer_numeric", "context_none"]'
    p = tmp_path / "proto.toml"
    p.write_text(
        f'[[experiment]]\nspec = "{ROOT / "tasks" / "line_ratio.toml"}"\n'
        f'modalities = ["text", "multimodal"]\nconditions = {conds}\n'
        f'[[experiment]]\nspec = "{ROOT / "tasks" / "duration.toml"}"\n'
        'modalities = ["text"]\nconditions = ["base", "context_none"]\n'
    )
    return p


def _sweep(url, protocol, out, *extra, trials="4", cache=None):
    return main(
        [
            "sweep",
            str(protocol),
            "--subject",
            "openai:m",
            "--trials",
            trials,
            "--out",
            str(out),
            "--base-url",
            url,
            "--api-key",
            "k",
            *(["--cache", str(cache)] if cache else ["--no-cache"]),
            "--no-progress",
            *extra,
        ]
    )


def _run(url, out, *extra, trials="5", conditions=("context_none",), cache=None):
    """``bayesobs run line_ratio`` in text on ``openai:m`` with ``--batch``."""
    conds = [x for c in conditions for x in ("--condition", c)]
    return main(
        [
            "run",
            "line_ratio",
            "--subject",
            "openai:m",
            "--modality",
            "text",
            *conds,
            "--trials",
            trials,
            "--out",
            str(out),
            "--base-url",
            url,
            "--api-key",
            "k",
            *(["--cache", str(cache)] if cache else ["--no-cache"]),
            "--no-progress",
            "--batch",
            "--poll-max",
            "0.01",
            *extra,
        ]
    )


def _same_trials(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    diff = [(k, c) for k in a for c in SAME if a[k].get(c) != b[k].get(c)]
    assert not diff, diff[:5]


# ------------------------------------------------------------------ the same trials as live
def test_batch_sweep_logs_exactly_the_trials_of_a_live_run(tmp_path, capsys):
    proto = _protocol(tmp_path)
    with FakeBatchServer(hashed()) as srv:
        assert _sweep(srv.url, proto, tmp_path / "live") == 0
        assert srv.chat_requests > 0 and not srv.created
        live_calls = srv.chat_requests
        capsys.readouterr()
        assert _sweep(srv.url, proto, tmp_path / "batch", "--batch", "--poll-max", "0.01") == 0
        err = capsys.readouterr().err
        assert srv.chat_requests == live_calls  # nothing asked live
        assert srv.batch_requests == live_calls  # each trial asked once, in a batch
        # 4 trials: 4 rounds (one batch each, one subject); no context: all in the first
        assert len(srv.created) == 4
        sizes = [b["request_counts"]["total"] for b in srv.batches.values()]
    live, bat = _by_key(tmp_path / "live"), _by_key(tmp_path / "batch")
    _same_trials(bat, live)
    assert len({r["raw_response"] for r in bat.values()}) > len(bat) // 2  # answers differ
    sessions = [
        s for e in load_protocol(proto) for s in plan(e["spec"], ["openai:m"], trials=4, runs=None)
    ]
    dependent = sum(not B.independent(s) for s in sessions)
    free = len(sessions) - dependent
    assert sizes == [dependent + 4 * free, dependent, dependent, dependent]
    # the same per-session order: each row's context is the trials before it
    for k, r in bat.items():
        if r["context_window"]:
            t = k[-1]
            assert r["context_trials"] == list(range(max(0, t - r["context_window"]), t))
    # rows carry the batch that answered them; timing is not per request
    assert all(r["batch_id"].startswith("batch_") and r["latency_s"] == 0 for r in bat.values())
    assert all(r["attempts"] == 1 for r in bat.values())
    # the plan and the saving, printed before starting
    est = estimate(sessions, {}, {})
    assert f"batch: {len(live)} request(s) in 4 round(s)" in err
    assert f"about {est['input_tokens'] // 2:,} of {est['input_tokens']:,} input tokens" in err
    assert "round 1/4" in err and "round 4/4" in err and "requests done" in err
    events = [json.loads(x) for x in (tmp_path / "batch" / "runs.jsonl").read_text().splitlines()]
    assert events[0]["batch"] is True and events[-1]["batch_rounds"] == 4
    recs = _batches(tmp_path / "batch")
    assert [r["event"] for r in recs].count("ended") == 4
    assert all(r["status"] == "completed" for r in recs if r["event"] == "ended")


@pytest.mark.slow
def test_batch_sweep_of_the_full_bayesbench_protocol_matches_live(tmp_path, capsys):
    """The Done-when: tasks/bayesbench.toml (11,760 trials, 40 rounds) batch vs live."""
    proto = ROOT / "tasks" / "bayesbench.toml"
    with FakeBatchServer(hashed()) as srv:
        argv = ["sweep", str(proto), "--subject", "openai:m", "--base-url", srv.url]
        argv += ["--api-key", "k", "--no-cache", "--no-progress"]
        assert main([*argv, "--out", str(tmp_path / "live")]) == 0
        capsys.readouterr()
        assert main([*argv, "--out", str(tmp_path / "b"), "--batch", "--poll-max", "0.01"]) == 0
        err = capsys.readouterr().err
        assert srv.batch_requests == srv.chat_requests == 11760
        assert len(srv.created) == 40
    assert "batch: 11760 request(s) in 40 round(s)" in err and "estimated saving 50%" in err
    _same_trials(_by_key(tmp_path / "b"), _by_key(tmp_path / "live"))


# ------------------------------------------------------------------ failures: retried next round
def test_expired_batch_with_partial_outputs_is_retried_in_the_next_round(tmp_path):
    fates = {0: Fate("expired", polls=2, answered=2)}
    with FakeBatchServer(hashed(), lambda n: fates.get(n, Fate())) as srv:
        assert _run(srv.url, tmp_path / "o") == 0
        # 3 sessions (short, medium, long) of 5 trials, none with a context: one round
        assert [b["request_counts"]["total"] for b in srv.batches.values()] == [15, 13]
        assert [b["status"] for b in srv.batches.values()] == ["expired", "completed"]
        assert srv.batch_requests == 15  # the two answered before expiry are not asked again
    rows = _by_key(tmp_path / "o")
    assert len(rows) == 15
    assert sorted(r["attempts"] for r in rows.values()) == [1, 1] + [2] * 13
    assert {r["batch_id"] for r in rows.values()} == {"batch_000001", "batch_000002"}
    ended = [r for r in _batches(tmp_path / "o") if r["event"] == "ended"]
    assert ended[0]["status"] == "expired" and ended[0]["retry"] == 13
    assert ended[0]["request_counts"] == {"total": 15, "completed": 2, "failed": 13}


def test_failed_lines_and_failed_validation_are_retried_and_a_400_stops_its_session(
    tmp_path, capsys
):
    asked: dict[str, int] = {}

    def script(body, n):  # each request's first asking fails: 500, then 429, then fine
        h = json.dumps(body["messages"])
        asked[h] = asked.get(h, 0) + 1
        if asked[h] == 1:
            return Answer("upstream error", status=500)
        if asked[h] == 2:
            return Answer("slow down", status=429)
        return Answer("0.4")

    fates = {0: Fate("failed")}  # the first batch fails validation (enqueued token limit)
    with FakeBatchServer(script, lambda n: fates.get(n, Fate())) as srv:
        assert _run(srv.url, tmp_path / "o", trials="3") == 0
        assert [b["status"] for b in srv.batches.values()] == ["failed", *["completed"] * 3]
    rows = _by_key(tmp_path / "o")
    assert [r["raw_response"] for r in rows.values()] == ["0.4"] * 9
    assert {r["attempts"] for r in rows.values()} == {4}
    ended = [r for r in _batches(tmp_path / "o") if r["event"] == "ended"]
    assert "token_limit_exceeded" in ended[0]["errors"]
    # a request that cannot succeed (HTTP 400) stops its session; resumed, it is asked again
    bad = {"on": True}

    def refuse(body, n):
        if bad["on"]:
            return Answer("Invalid image", status=400)
        return Answer("0.6")

    with FakeBatchServer(refuse) as srv:
        capsys.readouterr()
        assert _run(srv.url, tmp_path / "p", trials="2") == 1
        err = capsys.readouterr().err
        assert "session(s) stopped early" in err and "HTTP 400: Invalid image" in err
        assert _rows(tmp_path / "p") == []
        bad["on"] = False
        assert _run(srv.url, tmp_path / "p", trials="2") == 0
    assert [r["response"] for r in _rows(tmp_path / "p")] == [0.6] * 6


def test_a_request_that_keeps_expiring_gives_up_after_max_attempts_batches(tmp_path, capsys):
    with FakeBatchServer(hashed(), always(Fate("expired", answered=0))) as srv:
        assert _run(srv.url, tmp_path / "o", "--max-attempts", "2", trials="2") == 1
        assert len(srv.created) == 2
    err = capsys.readouterr().err
    assert "gave up after 2 batches: batch_expired" in err and "Traceback" not in err
    assert _rows(tmp_path / "o") == []


# ------------------------------------------------------------------ resume
def test_a_batch_created_but_not_logged_before_a_kill_is_found_not_resubmitted(
    tmp_path, monkeypatch
):
    """Killed between creating a batch and logging its id: found again by its metadata nonce."""
    real = B.BatchRun.note

    def killed(self, **rec):
        if rec["event"] == "submitted":
            raise KeyboardInterrupt  # as if killed right after the batch was created
        real(self, **rec)

    with FakeBatchServer(hashed()) as srv:
        monkeypatch.setattr(B.BatchRun, "note", killed)
        assert _run(srv.url, tmp_path / "o", trials="3") == 130
        assert len(srv.created) == 1 and _rows(tmp_path / "o") == []
        monkeypatch.setattr(B.BatchRun, "note", real)
        assert _run(srv.url, tmp_path / "o", trials="3") == 0
        assert len(srv.created) == 1 and srv.batch_requests == 9  # collected, not asked again
    assert len(_by_key(tmp_path / "o")) == 9
    events = [r["event"] for r in _batches(tmp_path / "o")]
    assert events == ["submitting", "submitted", "ended"]


def _kill_cmd(url, proto, out):
    return [
        sys.executable,
        "-m",
        "bayesobs.cli",
        "sweep",
        str(proto),
        "--subject",
        "openai:m",
        "--trials",
        "4",
        "--out",
        str(out),
        "--base-url",
        url,
        "--api-key",
        "k",
        "--no-cache",
        "--no-progress",
        "--batch",
        "--poll-max",
        "0.05",
    ]


# slow: up to four CLI processes (each pays Python's and the package's start-up) killed at random
# moments, a new seed each run; the fast tier keeps the deterministic kill between creating a
# batch and logging it (test_a_batch_created_but_not_logged_before_a_kill_is_found_not_resubmitted)
@pytest.mark.slow
def test_sigkill_at_random_moments_loses_nothing_and_doubles_nothing(tmp_path):
    """Killed while batches are submitted, polled and collected; restarted; as if never killed."""
    seed = int.from_bytes(os.urandom(4), "little")  # conftest resets random: a new seed each run
    rng = random.Random(seed)
    proto = _protocol(tmp_path)
    out = tmp_path / "killed"
    log = out / "batches.jsonl"
    with FakeBatchServer(hashed(), always(Fate(polls=3))) as srv:
        cmd = _kill_cmd(srv.url, proto, out)
        kills = 0
        for _ in range(3):
            lines = len(log.read_text().splitlines()) if log.exists() else 0
            wait_for = lines + rng.randint(1, 3)  # a random record of batches.jsonl ...
            proc = subprocess.Popen(
                cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            deadline = time.time() + 60
            while proc.poll() is None and time.time() < deadline:
                if log.exists() and len(log.read_text().splitlines()) >= wait_for:
                    break
                time.sleep(0.01)
            time.sleep(rng.uniform(0.0, 0.3))  # ... and a random moment after it
            if proc.poll() is not None:
                break
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            kills += 1
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 0, (seed, done.stderr[-2000:])
        asked = srv.batch_requests
        assert _sweep(srv.url, proto, tmp_path / "live") == 0
    killed, live = _by_key(out), _by_key(tmp_path / "live")
    _same_trials(killed, live)  # as if never killed
    assert kills >= 1, seed
    # no request answered twice: every batch of a killed run was collected, not resubmitted
    assert asked == len(live), (seed, asked, len(live))
    # no trial in two batches (a batch killed before it was created is no batch)
    recs = _batches(out)
    created = {r["nonce"] for r in recs if r["event"] == "submitted"}
    ids = [
        cid
        for r in recs
        if r["event"] == "submitting" and r["nonce"] in created
        for cid in r["ids"]
    ]
    assert len(ids) == len(set(ids)) == len(live), seed
    assert len(created) == len(srv.created), seed  # every batch created was logged or found


# ------------------------------------------------------------------ plans, options, refusals
def test_rounds_and_saving_are_printed_and_dry_run_says_them(tmp_path, capsys):
    with FakeBatchServer(hashed()) as srv:
        assert _run(srv.url, tmp_path / "a", trials="6") == 0
        err = capsys.readouterr().err
        assert "batch: 18 request(s) in 1 round(s)" in err and "estimated saving 50%" in err
        assert len(srv.created) == 1
        assert _run(srv.url, tmp_path / "b", "--dry-run", trials="6", conditions=("base",)) == 0
        out = capsys.readouterr().out
        assert "dry run: 3 session run(s), 18 call(s)" in out and "with --batch: 6 round(s)" in out
        assert not srv.created[1:]


@pytest.mark.parametrize(
    ("extra", "subject", "message"),
    [
        (["--poll-max", "0"], "openai:m", "--poll-max must be a positive number"),
        (["--poll-max", "nan"], "openai:m", "--poll-max must be a positive number"),
        ([], "sim:bayesian", "which sim:bayesian does not have"),
    ],
)
def test_bad_batch_options_are_one_line(tmp_path, capsys, extra, subject, message):
    argv = ["run", "line_ratio", "--subject", subject, "--trials", "2", "--out", str(tmp_path)]
    assert main([*argv, "--batch", *extra]) == 2
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in err


def test_a_server_without_a_batch_api_is_one_line(tmp_path, capsys):
    from bayesobs.testing.fakeserver import FakeChatServer

    with FakeChatServer(lambda b, n: Answer("Not Found", status=404)) as srv:  # no /v1/files
        assert _run(srv.url, tmp_path / "o") == 1
    err = capsys.readouterr().err
    assert "Batch API: uploading the input file failed" in err and "Traceback" not in err


def test_batch_replies_are_cached_and_a_live_resume_replays_them(tmp_path, capsys):
    with FakeBatchServer(hashed()) as srv:
        assert _run(srv.url, tmp_path / "o", trials="3", cache=tmp_path / "c") == 0
        log = tmp_path / "o" / "trials.jsonl"
        first = log.read_text()
        log.write_text("")  # as if the trials were never logged
        argv = ["run", "line_ratio", "--subject", "openai:m", "--modality", "text"]
        argv += ["--condition", "context_none", "--trials", "3", "--out", str(tmp_path / "o")]
        argv += ["--base-url", srv.url, "--api-key", "k", "--cache", str(tmp_path / "c")]
        assert main([*argv, "--no-progress"]) == 0
        assert srv.chat_requests == 0  # every reply from the cache
    assert sorted(r["raw_response"] for r in _rows(tmp_path / "o")) == sorted(
        json.loads(x)["raw_response"] for x in first.splitlines()
    )


def test_pure_parts():
    d = B.poll_delays(60)
    assert [next(d) for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0]
    d = B.poll_delays(60)
    assert [next(d) for _ in range(9)][-2:] == [60.0, 60.0]
    assert next(B.poll_delays(0.2)) == 0.2
    lines = [b"x" * 10] * 7
    assert [len(c) for c in B.chunks(lines, 3, 10**6)] == [3, 3, 1]
    assert [len(c) for c in B.chunks(lines, 100, 25)] == [2, 2, 2, 1]
    ok = {"custom_id": "a", "response": {"status_code": 200, "body": {"choices": []}}}
    assert B.outcome(ok).kind == "retry"  # a 200 without an answer
    ok["response"]["body"] = {"choices": [{"message": {"content": "0.3"}, "finish_reason": "stop"}]}
    assert (B.outcome(ok).kind, B.outcome(ok).text) == ("ok", "0.3")
    for status, kind in ((429, "retry"), (503, "retry"), (400, "fatal"), (404, "fatal")):
        line = {"response": {"status_code": status, "body": {"error": {"message": "m"}}}}
        assert B.outcome(line).kind == kind
    expired = {"response": None, "error": {"code": "batch_expired", "message": "late"}}
    assert B.outcome(expired).kind == "retry" and "batch_expired" in B.outcome(expired).message
    assert B.custom_id(("s", "t", 1)) == B.custom_id(("s", "t", 1)) != B.custom_id(("s", "t", 2))
    from bayesobs.cli import build_parser

    args = build_parser().parse_args(["run", "x", "--subject", "openai:m"])
    assert args.poll_max == B.POLL_MAX_S  # the CLI's default is the module's


def test_local_batch_server_validates_input_and_lists_and_cancels():
    line = {"custom_id": "a", "method": "POST", "url": B.ENDPOINT, "body": {"model": "m"}}
    good = json.dumps(line).encode() + b"\n"
    assert check_input(good, B.ENDPOINT) == ([line], [])
    _, errs = check_input(good + good, B.ENDPOINT)
    assert [e["code"] for e in errs] == ["duplicate_custom_id"]
    other = {**line, "custom_id": "b", "body": {"model": "n"}}
    _, errs = check_input(good + json.dumps(other).encode(), B.ENDPOINT)
    assert [e["code"] for e in errs] == ["mismatched_model"]
    _, errs = check_input(b"{not json\n", B.ENDPOINT)
    assert errs[0]["code"] == "invalid_json_line" and errs[0]["line"] == 1
    with (
        FakeBatchServer(fate=always(Fate(polls=2))) as srv,
        openai.OpenAI(api_key="k", base_url=srv.url, max_retries=0) as c,  # closed after
    ):
        data = b"".join(
            json.dumps({**line, "custom_id": f"c{i}"}).encode() + b"\n" for i in range(4)
        )
        f = c.files.create(file=("in.jsonl", io.BytesIO(data)), purpose="batch")
        ids = [
            c.batches.create(
                input_file_id=f.id,
                endpoint=B.ENDPOINT,
                completion_window="24h",
                metadata={"k": str(i)},
            ).id
            for i in range(3)
        ]
        assert [b.id for b in c.batches.list(limit=10)] == ids[::-1]
        page = c.batches.list(limit=2)
        assert [b.id for b in page.data] == ids[:0:-1] and page.has_more
        assert c.batches.retrieve(ids[0]).status == "in_progress"
        c.batches.retrieve(ids[0])
        assert c.batches.cancel(ids[0]).status == "cancelling"
        b = c.batches.retrieve(ids[0])
        assert b.status == "cancelled" and b.request_counts.completed == 1
        errors = c.files.content(b.error_file_id).text.splitlines()
        assert [json.loads(x)["error"]["code"] for x in errors] == ["batch_cancelled"] * 3
        assert json.loads(c.files.content(b.output_file_id).text)["response"]["status_code"] == 200
        with pytest.raises(openai.NotFoundError):
            c.batches.retrieve("batch_nope")


@pytest.mark.parametrize("lost", ["batch", "results"])
def test_a_batch_the_provider_lost_is_noted_and_its_trials_go_into_the_next_batch(
    tmp_path, monkeypatch, capsys, lost
):
    """On resume the batch (or its output file) answers 404 (issue 48): asked again, once."""
    real = B.BatchRun.note
    kill_after = "submitted" if lost == "batch" else "ended"

    def killed(self, **rec):
        real(self, **rec)
        if rec["event"] == kill_after:
            raise KeyboardInterrupt  # killed; the provider then loses the batch or its files

    out = tmp_path / "o"
    with FakeBatchServer(hashed()) as srv:
        monkeypatch.setattr(B.BatchRun, "note", killed)
        assert _run(srv.url, out, trials="3") == 130
        monkeypatch.setattr(B.BatchRun, "note", real)
        first = srv.created[0]
        srv.forget(first, results=lost == "results")
        capsys.readouterr()
        assert _run(srv.url, out, trials="3") == 0
        assert len(srv.created) == 2  # the lost batch's 9 trials went into one new batch
        assert len(srv.batches[srv.created[1]]["_lines"]) == 9
        assert srv.batch_requests == (9 if lost == "batch" else 18)
        err = capsys.readouterr().err
        polls = srv.polls
        assert _run(srv.url, out, trials="3") == 0  # a later resume asks nothing, polls nothing
        assert len(srv.created) == 2 and srv.polls == polls
    assert "Traceback" not in err
    notes = [x for x in err.splitlines() if first in x]
    assert len(notes) == 1 and "asked again in the next batch" in notes[0], err
    assert len(_by_key(out)) == 9
    events = [json.loads(x) for x in (out / "runs.jsonl").read_text().splitlines()]
    gone = [e for e in events if e["event"] == "batch_lost"]
    assert len(gone) == 1 and gone[0]["batch_id"] == first and gone[0]["requests"] == 9
