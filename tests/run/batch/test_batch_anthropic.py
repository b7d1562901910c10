"""``--batch`` for ``anthropic:`` subjects (issue 30 section 1): Anthropic's Message Batches.

Against the local server of :mod:`bayesobs.testing.fakebatch`, which answers the
Messages API live and implements the documented Message Batches endpoints;
its ``hashed`` script answers a number hashed from the whole request, so a
batch run whose requests differ from a live run's in anything (context,
order, images) logs other answers.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import anthropic
import pytest

from bayesobs.cli import main
from bayesobs.run import batch as B
from bayesobs.testing.fakebatch import FakeBatchServer, Fate, always, hashed
from bayesobs.testing.fakeserver import Answer

ROOT = Path(__file__).resolve().parents[3]
KEY = ["subject", "task", "modality", "condition", "session", "run", "trial"]
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
    "finish_reason",
    "token_param",
    "temperature_effective",
    "image_detail",
    "cached_tokens",
]
SUBJECT = "anthropic:claude-test"


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


def _argv(srv, out, *extra, trials="3", conditions=("context_none",), modalities=("text",)):
    conds = [x for c in conditions for x in ("--condition", c)]
    mods = [x for m in modalities for x in ("--modality", m)]
    return [
        "run",
        "line_ratio",
        "--subject",
        SUBJECT,
        *mods,
        *conds,
        "--trials",
        trials,
        "--out",
        str(out),
        "--base-url",
        srv.root,
        "--api-key",
        "k",
        "--no-cache",
        "--no-progress",
        *extra,
    ]


def _batch(srv, out, *extra, **kw):
    return main(_argv(srv, out, "--batch", "--poll-max", "0.01", *extra, **kw))


def test_anthropic_batch_run_logs_exactly_the_trials_of_a_live_run(tmp_path, capsys):
    """Text and image trials, rolling contexts and none: the rows of a live run, in rounds."""
    conds = ("base", "context_short", "context_none")
    mods = ("text", "image")
    with FakeBatchServer(hashed()) as srv:
        assert main(_argv(srv, tmp_path / "live", conditions=conds, modalities=mods)) == 0
        live_calls = srv.chat_requests
        assert live_calls == 54 and not srv.created
        capsys.readouterr()
        assert _batch(srv, tmp_path / "b", conditions=conds, modalities=mods) == 0
        err = capsys.readouterr().err
        assert srv.chat_requests == live_calls  # nothing asked live
        assert srv.batch_requests == live_calls  # each trial asked once, in a Message Batch
        batches = [srv.batches[i] for i in srv.created]
        sent = [r for b in batches for r in b["_requests"]]
    # 3 trials: 3 rounds; the 6 sessions without a context all in the first
    assert [len(b["_requests"]) for b in batches] == [12 + 18, 12, 12]
    assert all(b["processing_status"] == "ended" for b in batches)
    assert all(B.CUSTOM_ID.fullmatch(r["custom_id"]) for r in sent)  # the API's pattern
    images = [
        r for r in sent if any(isinstance(m["content"], list) for m in r["params"]["messages"])
    ]
    assert images and all(r["params"]["max_tokens"] and r["params"]["system"] for r in sent)
    live, bat = _by_key(tmp_path / "live"), _by_key(tmp_path / "b")
    assert bat.keys() == live.keys()
    diff = [(k, c) for k in live for c in SAME if bat[k].get(c) != live[k].get(c)]
    assert not diff, diff[:5]
    assert {r["modality"] for r in bat.values()} == {"text", "image"}
    assert len({r["raw_response"] for r in bat.values()}) > len(bat) // 2  # answers differ
    assert all(r["batch_id"].startswith("msgbatch_") and r["attempts"] == 1 for r in bat.values())
    assert "batch: 54 request(s) in 3 round(s)" in err and "estimated saving 50%" in err
    assert "round 3/3" in err and "ended" in err
    ended = [r for r in _batches(tmp_path / "b") if r["event"] == "ended"]
    assert [r["status"] for r in ended] == ["ended"] * 3


def test_expired_and_errored_requests_are_retried_in_the_next_round(tmp_path, capsys):
    asked: dict[str, int] = {}

    def script(body, n):  # every request is overloaded the first time it runs in a batch
        h = json.dumps(body["messages"])
        asked[h] = asked.get(h, 0) + 1
        if asked[h] == 1:
            return Answer("Overloaded", status=529)
        return hashed()(body, n)

    # the first batch expires with 2 requests run (partial results), the others complete
    fates = {0: Fate("expired", polls=2, answered=2)}
    with FakeBatchServer(script, lambda n: fates.get(n, Fate())) as srv:
        assert _batch(srv, tmp_path / "o", trials="4") == 0
        counts = [srv.batches[i]["request_counts"] for i in srv.created]
    # 3 sessions of 4 trials, none with a context: 12 requests; 2 run (overloaded), 10 expire
    assert counts[0] == {
        "processing": 0,
        "succeeded": 0,
        "errored": 2,
        "canceled": 0,
        "expired": 10,
    }
    # round 2: the 12 again; the 2 overloaded before now succeed, the 10 run for the first time
    assert counts[1] == {
        "processing": 0,
        "succeeded": 2,
        "errored": 10,
        "canceled": 0,
        "expired": 0,
    }
    assert counts[2]["succeeded"] == 10 and len(counts) == 3
    rows = _by_key(tmp_path / "o")
    assert len(rows) == 12 and all(r["valid"] for r in rows.values())
    assert sorted(r["attempts"] for r in rows.values()) == [2, 2] + [3] * 10
    ended = [r for r in _batches(tmp_path / "o") if r["event"] == "ended"]
    assert [r["retry"] for r in ended] == [12, 10, 0]
    assert "2 errored, 10 expired" in ended[0]["errors"]
    # a request that cannot succeed (invalid_request_error) stops its session, and only it
    capsys.readouterr()
    with FakeBatchServer(lambda b, n: Answer("prompt is too long", status=400)) as srv:
        assert _batch(srv, tmp_path / "p", trials="2") == 1
    err = capsys.readouterr().err
    assert "errored, invalid_request_error: prompt is too long" in err and "Traceback" not in err
    assert _rows(tmp_path / "p") == []


def test_a_batch_created_but_not_logged_before_a_kill_is_found_not_resubmitted(
    tmp_path, monkeypatch
):
    """Message Batches keep no metadata: the batch is found by its time and size, and its
    results read under the nonce's tag."""
    real = B.BatchRun.note

    def killed(self, **rec):
        if rec["event"] == "submitted":
            raise KeyboardInterrupt  # as if killed right after the batch was created
        real(self, **rec)

    with FakeBatchServer(hashed(), always(Fate(polls=2))) as srv:
        srv.create_messages(  # another client's batch of another size, created meanwhile
            {"requests": [{"custom_id": "other", "params": {"model": "m"}}]}
        )
        monkeypatch.setattr(B.BatchRun, "note", killed)
        assert _batch(srv, tmp_path / "o", trials="3") == 130
        assert len(srv.created) == 2 and _rows(tmp_path / "o") == []
        monkeypatch.setattr(B.BatchRun, "note", real)
        assert _batch(srv, tmp_path / "o", trials="3") == 0
        assert len(srv.created) == 2 and srv.batch_requests == 9  # collected, not asked again
    assert len(_by_key(tmp_path / "o")) == 9
    recs = _batches(tmp_path / "o")
    assert [r["event"] for r in recs] == ["submitting", "submitted", "ended"]
    assert recs[1]["batch_id"] == "msgbatch_000002"


def test_results_of_another_batch_are_not_taken_for_this_one():
    """A wrong guess of :meth:`AnthropicBatches.find` logs nothing: results carry the nonce's tag."""
    cid = B.custom_id(("anthropic:m", "line_ratio", "text", "base", "short", 0, 0))
    mine, other = "a" * 32, "b" * 32
    msg = {
        "type": "message",
        "content": [{"type": "text", "text": "0.3"}],
        "stop_reason": "end_turn",
    }
    line = {"custom_id": B.tagged(cid, other), "result": {"type": "succeeded", "message": msg}}
    data = json.dumps(line).encode() + b"\n{broken\n"
    assert B.read_message_results(data, "x", mine) == {}
    assert B.read_message_results(data, "x", other)[cid].text == "0.3"
    assert len(B.tagged(cid, mine)) <= 64 and B.CUSTOM_ID.fullmatch(B.tagged(cid, mine))


def test_message_outcomes():
    ok = {"type": "succeeded", "message": {"content": [{"type": "text", "text": "0.4"}]}}
    assert (B.message_outcome(ok).kind, B.message_outcome(ok).text) == ("ok", "0.4")
    ok["message"]["stop_reason"] = "max_tokens"
    assert B.message_outcome(ok).finish == "length"  # read as the live subject reads it
    assert B.message_outcome({"type": "succeeded", "message": {}}).kind == "retry"
    for kind, outcome in (
        ("overloaded_error", "retry"),
        ("api_error", "retry"),
        ("rate_limit_error", "retry"),
        ("invalid_request_error", "fatal"),
    ):
        err = {
            "type": "errored",
            "error": {"type": "error", "error": {"type": kind, "message": "m"}},
        }
        assert B.message_outcome(err).kind == outcome, kind
    for kind in ("expired", "canceled", None):
        assert B.message_outcome({"type": kind}).kind == "retry"


def test_local_message_batches_server_lists_cancels_and_refuses_bad_ids():
    params = {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "x"}]}
    with (
        FakeBatchServer(fate=always(Fate(polls=2))) as srv,
        anthropic.Anthropic(api_key="k", base_url=srv.root, max_retries=0) as c,  # closed after
    ):
        reqs = [{"custom_id": f"c{i}", "params": params} for i in range(4)]
        ids = [c.messages.batches.create(requests=reqs).id for _ in range(3)]
        assert [b.id for b in c.messages.batches.list(limit=10)] == ids[::-1]
        page = c.messages.batches.list(limit=2)
        assert [b.id for b in page.data] == ids[:0:-1] and page.has_more
        assert [b.id for b in page.get_next_page().data] == ids[:1]
        b = c.messages.batches.retrieve(ids[0])
        assert b.processing_status == "in_progress" and b.request_counts.processing == 4
        assert b.results_url is None
        with pytest.raises(anthropic.BadRequestError):  # no results before it ends
            c.get(f"/v1/messages/batches/{ids[0]}/results", cast_to=object)
        c.messages.batches.retrieve(ids[0])  # half its requests run now
        assert c.messages.batches.cancel(ids[0]).processing_status == "canceling"
        b = c.messages.batches.retrieve(ids[0])
        assert b.processing_status == "ended" and b.ended_at is not None
        assert (b.request_counts.succeeded, b.request_counts.canceled) == (2, 2)
        results = {r.custom_id: r.result.type for r in c.messages.batches.results(ids[0])}
        assert results == {"c0": "succeeded", "c1": "succeeded", "c2": "canceled", "c3": "canceled"}
        for bad in ("has space", "x" * 65, ""):
            with pytest.raises(anthropic.BadRequestError, match="custom_id"):
                c.messages.batches.create(requests=[{"custom_id": bad, "params": params}])
        dup = [{"custom_id": "d", "params": params}] * 2
        with pytest.raises(anthropic.BadRequestError, match="duplicate"):
            c.messages.batches.create(requests=dup)
        with pytest.raises(anthropic.NotFoundError):
            c.messages.batches.retrieve("msgbatch_nope")
        # a request the API refuses errors in its result, the others are answered
        bad = [{"custom_id": "ok", "params": params}, {"custom_id": "no", "params": {"model": "m"}}]
        bid = c.messages.batches.create(requests=bad).id
        for _ in range(3):
            b = c.messages.batches.retrieve(bid)
        assert (b.request_counts.succeeded, b.request_counts.errored) == (1, 1)
        res = {r.custom_id: r.result for r in c.messages.batches.results(bid)}
        assert res["no"].error.error.type == "invalid_request_error"


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_nothing_and_doubles_nothing(tmp_path):
    """Killed while Message Batches are created, polled and collected; restarted; as if never."""
    seed = int.from_bytes(os.urandom(4), "little")
    rng = random.Random(seed)
    out = tmp_path / "killed"
    log = out / "batches.jsonl"
    conds = ("base", "context_none")
    with FakeBatchServer(hashed(), always(Fate(polls=3))) as srv:
        argv = _argv(srv, out, "--batch", "--poll-max", "0.05", trials="4", conditions=conds)
        cmd = [sys.executable, "-m", "bayesobs.cli", *argv]
        kills = 0
        for _ in range(3):
            lines = len(log.read_text().splitlines()) if log.exists() else 0
            wait_for = lines + rng.randint(1, 3)
            proc = subprocess.Popen(
                cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            deadline = time.time() + 60
            while proc.poll() is None and time.time() < deadline:
                if log.exists() and len(log.read_text().splitlines()) >= wait_for:
                    break
                time.sleep(0.01)
            time.sleep(rng.uniform(0.0, 0.3))
            if proc.poll() is not None:
                break
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            kills += 1
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 0, (seed, done.stderr[-2000:])
        asked = srv.batch_requests
        created = len(srv.created)
        assert main(_argv(srv, tmp_path / "live", trials="4", conditions=conds)) == 0
    killed, live = _by_key(out), _by_key(tmp_path / "live")
    assert killed.keys() == live.keys() and kills >= 1, seed
    diff = [(k, c) for k in live for c in SAME if killed[k].get(c) != live[k].get(c)]
    assert not diff, (seed, diff[:3])
    assert asked == len(live), (seed, asked, len(live))  # nothing asked twice
    recs = _batches(out)
    assert len({r["batch_id"] for r in recs if r["event"] == "submitted"}) == created, seed


def test_batch_replies_are_cached_and_a_live_resume_replays_them(tmp_path, capsys):
    out = tmp_path / "o"
    with FakeBatchServer(hashed()) as srv:
        argv = _argv(srv, out, "--batch", "--poll-max", "0.01")
        argv[argv.index("--no-cache")] = "--cache=" + str(tmp_path / "c")
        assert main(argv) == 0
        first = {k: r["raw_response"] for k, r in _by_key(out).items()}
        (out / "trials.jsonl").write_text("")  # as if the trials were never logged
        argv = _argv(srv, out)
        argv[argv.index("--no-cache")] = "--cache=" + str(tmp_path / "c")
        assert main(argv) == 0
        assert srv.chat_requests == 0 and srv.batch_requests == 9  # every reply from the cache
        assert main(_argv(srv, tmp_path / "d", "--batch", "--dry-run")) == 0
    assert "with --batch: 1 round(s)" in capsys.readouterr().out
    again = _by_key(out)
    assert {k: r["raw_response"] for k, r in again.items()} == first
    assert all(r["cached"] for r in again.values())


@pytest.mark.parametrize("lost", ["batch", "results"])
def test_a_batch_the_provider_lost_is_noted_and_its_trials_go_into_the_next_batch(
    tmp_path, monkeypatch, capsys, lost
):
    """On resume the Message Batch (or its results) answers 404 (issue 48): asked again, once."""
    real = B.BatchRun.note
    kill_after = "submitted" if lost == "batch" else "ended"

    def killed(self, **rec):
        real(self, **rec)
        if rec["event"] == kill_after:
            raise KeyboardInterrupt  # killed; the provider then loses the batch or its results

    out = tmp_path / "o"
    with FakeBatchServer(hashed()) as srv:
        monkeypatch.setattr(B.BatchRun, "note", killed)
        assert _batch(srv, out, trials="3") == 130
        monkeypatch.setattr(B.BatchRun, "note", real)
        first = srv.created[0]
        srv.forget(first, results=lost == "results")
        capsys.readouterr()
        assert _batch(srv, out, trials="3") == 0
        assert len(srv.created) == 2  # the lost batch's 9 trials went into one new batch
        assert srv.batch_requests == (9 if lost == "batch" else 18)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    notes = [x for x in err.splitlines() if first in x]
    assert len(notes) == 1 and "asked again in the next batch" in notes[0], err
    assert len(_by_key(out)) == 9
    events = [json.loads(x) for x in (out / "runs.jsonl").read_text().splitlines()]
    gone = [e for e in events if e["event"] == "batch_lost"]
    assert len(gone) == 1 and gone[0]["batch_id"] == first and gone[0]["requests"] == 9
    assert events[-1]["event"] == "end"
