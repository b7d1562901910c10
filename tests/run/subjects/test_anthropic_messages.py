"""anthropic:MODEL subjects against a local server speaking Anthropic's Messages API."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from bayesobs.cli import main
from bayesobs.run.imagecost import png_size
from bayesobs.run.subjects import anthropic_messages
from bayesobs.run.subjects.anthropic_messages import EmptyReply, reply_of
from bayesobs.testing.fakeserver import Answer, FakeChatServer, messages_reasoning

SECRET = "sk-ant-test-SECRET-0123456789"


def _trials(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "trials.jsonl").read_text().splitlines() if x.strip()]


def _events(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "runs.jsonl").read_text().splitlines() if x.strip()]


def _run(srv, out: Path, *extra: str, task: str = "line_ratio", trials: int = 3) -> int:
    return main(
        [
            "run",
            task,
            "--subject",
            "anthropic:claude-test",
            "--trials",
            str(trials),
            "--out",
            str(out),
            "--base-url",
            srv.root,
            "--no-progress",
            *extra,
        ]
    )


@pytest.fixture
def waits(monkeypatch):
    """The subject's waits between attempts, recorded instead of slept."""
    seen: list[float] = []

    async def pause(seconds):
        seen.append(seconds)

    monkeypatch.setattr(anthropic_messages, "pause", pause)
    return seen


def test_text_and_image_trials_end_to_end(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    usage = {"input_tokens": 900, "output_tokens": 3, "cache_read_input_tokens": 100}
    with FakeChatServer(lambda b, n: Answer("0.42", usage=usage)) as srv:
        code = _run(
            srv,
            tmp_path / "o",
            "--modality",
            "text",
            "--modality",
            "image",
            "--cache",
            str(tmp_path / "cache"),
        )
        requests, paths, headers = list(srv.requests), list(srv.paths), list(srv.headers)
    assert code == 0
    rows = _trials(tmp_path / "o")
    assert len(rows) == 18 and {r["modality"] for r in rows} == {"text", "image"}
    assert all(r["valid"] and r["response"] == 0.42 for r in rows)
    assert set(paths) == {"/v1/messages"}
    for body in requests:
        # the system prompt apart, max_tokens always, the sampling temperature
        assert body["system"].startswith("You are") and body["max_tokens"] == 64
        assert body["temperature"] == 0.7 and "thinking" not in body
        assert all(m["role"] != "system" for m in body["messages"])
    images = [
        block
        for body in requests
        for m in body["messages"]
        if isinstance(m["content"], list)
        for block in m["content"]
        if block["type"] == "image"
    ]
    assert images, "image trials send image blocks"
    src = images[0]["source"]
    assert src["type"] == "base64" and src["media_type"] == "image/png"
    assert png_size(base64.b64decode(src["data"])) == (420, 180)
    # rolling context: the subject's own earlier answers as assistant turns
    assert max(len(b["messages"]) for b in requests) == 1 + 2 * 2
    assert any(m == {"role": "assistant", "content": "0.42"} for m in requests[-1]["messages"])
    row = rows[0]
    assert row["usage"] == {"prompt_tokens": 1000, "completion_tokens": 3}
    assert row["cached_tokens"] == 100 and row["finish_reason"] == "stop"
    assert row["token_param"] == "max_tokens" and row["temperature_effective"] == 0.7
    assert all(r["image_detail"] is None for r in rows)  # the Messages API has no detail
    # the key reached the server and is written nowhere
    assert all(SECRET in json.dumps(h) for h in headers)
    for f in [*(tmp_path / "o").rglob("*.json*"), *(tmp_path / "cache").rglob("*")]:
        if f.is_file():
            assert SECRET not in f.read_text(errors="ignore"), f
    manifest = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert manifest["experiment"]["chat"]["max_tokens"] == 64
    requests_info = json.dumps(manifest)
    assert "anthropic-messages" in requests_info


def test_overloaded_and_rate_limited_replies_are_retried(tmp_path, waits):
    def script(body, n):
        if n == 0:
            return Answer("Overloaded", status=529)  # overloaded_error
        if n == 1:
            return Answer("rate limited", status=429, headers={"retry-after": "7"})
        if n == 2:
            return Answer(None, body={"type": "error", "error": {"type": "api_error"}})  # in a 200
        return Answer("0.3")

    with FakeChatServer(script) as srv:
        code = _run(
            srv, tmp_path / "o", "--modality", "text", "--no-cache", "--concurrency", "1", trials=1
        )
        bodies = [srv.requests[i] for i in range(4)]
    assert code == 0
    rows = _trials(tmp_path / "o")
    assert len(rows) == 3 and rows[0]["attempts"] == 4
    assert waits[1] == 7.0  # the 429's retry-after, honoured
    assert len(waits) == 3
    assert bodies[0] == bodies[1] == bodies[2] == bodies[3]


def test_error_shapes_are_anthropics():
    with FakeChatServer(lambda b, n: Answer("slow down", status=429)) as srv:
        import urllib.error
        import urllib.request

        req = urllib.request.Request(
            srv.root + "/v1/messages", data=b"{}", headers={"content-type": "application/json"}
        )
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(req, timeout=5)
    assert info.value.code == 429
    assert json.loads(info.value.read()) == {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "slow down"},
    }


@pytest.mark.parametrize(
    ("status", "kind"),
    [(401, "authentication_error"), (403, "permission_error"), (404, "not_found_error")],
)
def test_fatal_errors_stop_the_run_without_the_key(tmp_path, capsys, status, kind):
    with FakeChatServer(lambda b, n: Answer(f"invalid x-api-key {SECRET}", status=status)) as srv:
        code = _run(srv, tmp_path / "o", "--modality", "text", "--no-cache", "--api-key", SECRET)
        assert srv.count <= 3  # one call per session at most: not retried
    err = capsys.readouterr().err
    assert code == 1 and kind in err and SECRET not in err and "[redacted]" in err
    assert "Traceback" not in err


def test_a_spend_limit_429_is_fatal_not_retried(tmp_path, capsys, waits):
    body = {
        "type": "error",
        "error": {
            "type": "rate_limit_error",
            "message": "monthly spend limit reached",
            "details": {"error_code": "enforced_spend_limit_reached"},
        },
    }
    with FakeChatServer(lambda b, n: Answer(None, status=429, body=body)) as srv:
        code = _run(srv, tmp_path / "o", "--modality", "text", "--no-cache")
        assert srv.count <= 3  # one call per session at most
    assert code == 1 and "spend limit" in capsys.readouterr().err and not waits


def test_an_invalid_request_fails_the_trial_and_is_redone_on_resume(tmp_path, capsys):
    bad = {"on": True}

    def script(body, n):
        if bad["on"] and body["messages"][-1]["content"] and len(body["messages"]) == 3:
            return Answer("messages: text content blocks must be non-empty", status=400)
        return Answer("0.5")

    out = tmp_path / "o"
    with FakeChatServer(script) as srv:
        assert _run(srv, out, "--modality", "text", "--no-cache") == 1
        err = capsys.readouterr().err
        assert "invalid_request_error" in err and "BadRequestError" in err
        first = len(_trials(out))
        assert first == 3  # trial 0 of each session; trial 1 failed
        failed = [e for e in _events(out) if e["event"] == "trial_failed"]
        assert len(failed) == 3
        bad["on"] = False
        assert _run(srv, out, "--modality", "text", "--no-cache") == 0
    rows = _trials(out)
    assert len(rows) == 9 and len({(r["session"], r["trial"]) for r in rows}) == 9


def test_extended_thinking_sends_a_budget_and_no_temperature(tmp_path):
    with FakeChatServer(messages_reasoning("0.6")) as srv:
        code = _run(
            srv,
            tmp_path / "o",
            "--modality",
            "text",
            "--no-cache",
            "--reasoning-effort",
            "high",
            "--reasoning-budget",
            "1024",
        )
        body = srv.requests[0]
    assert code == 0
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert body["max_tokens"] == 64 + 1024 and "temperature" not in body
    rows = _trials(tmp_path / "o")
    assert all(r["valid"] and r["temperature_effective"] == 1.0 for r in rows)


def test_a_reply_all_thinking_is_budget_exhausted(tmp_path):
    long_answer = "0.6 " * 100  # 100 tokens: no room left after 1024 of thinking
    with FakeChatServer(messages_reasoning(long_answer, thinking_tokens=5000)) as srv:
        code = _run(
            srv,
            tmp_path / "o",
            "--modality",
            "text",
            "--no-cache",
            "--reasoning-effort",
            "high",
            "--reasoning-budget",
            "1024",
            trials=1,
        )
    assert code == 0
    rows = _trials(tmp_path / "o")
    assert all(r["finish_reason"] == "length" for r in rows)
    assert all(r["invalid_reason"] == "budget_exhausted" for r in rows)
    assert all(r["reasoning_tokens"] == 1088 for r in rows)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--reasoning-effort", "low", "--reasoning-budget", "500"], "at least 1024"),
        (["--logprobs", "3"], "no logprobs"),
    ],
)
def test_options_the_messages_api_cannot_take_are_refused(tmp_path, capsys, extra, message):
    with FakeChatServer() as srv:
        code = _run(srv, tmp_path / "o", "--modality", "text", "--no-cache", *extra)
        assert srv.count == 0
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_mixed_apis_refuse_one_key_for_both(tmp_path, capsys):
    key = tmp_path / "key"
    key.write_text(SECRET)
    code = main(
        [
            "run",
            "line_ratio",
            "--subject",
            "openai:gpt",
            "--subject",
            "anthropic:claude",
            "--api-key-file",
            str(key),
            "--out",
            str(tmp_path / "o"),
            "--dry-run",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "ANTHROPIC_API_KEY" in err and SECRET not in err


def test_cache_and_resume_as_for_openai(tmp_path):
    args = ["--modality", "text", "--cache", str(tmp_path / "cache"), "--cache-scope", "global"]
    with FakeChatServer(lambda b, n: Answer("0.5")) as srv:
        assert _run(srv, tmp_path / "a", *args) == 0
        n = srv.count
        assert _run(srv, tmp_path / "a", *args) == 0  # resume: all logged, nothing asked
        assert _run(srv, tmp_path / "b", *args) == 0  # a new folder: replayed from the cache
        assert srv.count == n == 9
    assert len(_trials(tmp_path / "a")) == 9
    assert all(r["cached"] for r in _trials(tmp_path / "b"))


def test_dry_run_counts_claudes_image_tokens(tmp_path, capsys):
    def tokens(subject: str) -> int:
        argv = ["run", "line_ratio", "--subject", subject, "--modality", "image", "--trials", "1"]
        main([*argv, "--out", str(tmp_path / subject.replace(":", "_")), "--dry-run"])
        out = capsys.readouterr().out
        return int(out.split("about ")[1].split(" input")[0].replace(",", ""))

    claude, gpt = tokens("anthropic:c"), tokens("openai:g")
    # a 420 x 180 image: 15 x 7 patches of 28 px for Claude, one 512 px tile (255) for GPT
    assert gpt - claude == 3 * (255 - 105)  # three sessions, one trial each


def test_reply_of_maps_the_messages_shape():
    body = {
        "type": "message",
        "content": [
            {"type": "thinking", "thinking": "hm", "signature": "s"},
            {"type": "text", "text": "0."},
            {"type": "text", "text": "4"},
        ],
        "stop_reason": "end_turn",
        "usage": {
            "input_tokens": 5,
            "output_tokens": 9,
            "cache_creation_input_tokens": 2,
            "cache_read_input_tokens": 3,
        },
    }
    text, finish, usage, details = reply_of(json.dumps(body).encode())
    assert (text, finish) == ("0.4", "stop")
    assert usage == {"prompt_tokens": 10, "completion_tokens": 9}
    assert details == {"cached_tokens": 3}
    cut = {**body, "content": body["content"][:1], "stop_reason": "max_tokens"}
    text, finish, _, details = reply_of(json.dumps(cut).encode())
    assert (text, finish, details["reasoning_tokens"]) == ("", "length", 9)
    refusal = {**body, "content": [], "stop_reason": "refusal"}
    assert reply_of(json.dumps(refusal).encode())[:2] == ("", "content_filter")
    for bad in (b"<html>", b"[]", b'{"type": "error", "error": {"message": "x"}}', b"{}"):
        with pytest.raises(EmptyReply):
            reply_of(bad)


def test_the_docs_claude_commands_run_against_the_local_messages_server(
    tmp_path, monkeypatch, capsys
):
    """docs/llm-runs.md "Claude, Gemini, ...": its two `anthropic:` lines, at the local server."""
    import shlex

    from docs_pages import commands, fenced_blocks, page, section

    text = section(page("llm-runs.md"), "Claude, Gemini, image detail and rate limits")
    lines = commands(fenced_blocks(text)[0])
    assert len(lines) == 2 and all("anthropic:" in x for x in lines)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-local-test-key")
    with FakeChatServer(lambda b, n: Answer("0.42")) as srv:
        run, sweep = (shlex.split(x)[1:] for x in lines)
        assert main([*run, "--trials", "2", "--base-url", srv.root, "--no-progress"]) == 0
        assert main([*sweep, "--base-url", srv.root, "--no-progress"]) == 0  # --dry-run
    rows = _trials(tmp_path / "runs" / "claude")
    assert len(rows) == 2 * 2 * 3 and {r["modality"] for r in rows} == {"text", "image"}
    assert all(r["response"] == 0.42 for r in rows)
    assert "input tokens" in capsys.readouterr().out  # the dry run's estimate
    assert not (tmp_path / "runs" / "bayesbench-claude" / "trials.jsonl").exists()
