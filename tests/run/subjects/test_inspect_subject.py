"""``inspect:PROVIDER/MODEL`` subjects (issue 51): inspect_ai's model API as a bayesobs subject.

The provider runs for real: ``mockllm/model`` in process, and inspect's ``openai`` provider
against the local fake server (:mod:`bayesobs.testing.fakeserver`), compared with an
``openai:`` run against the same kind of server.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from docs_pages import checkout, commands, fenced_blocks, page, section, shell_argv

pytest.importorskip("inspect_ai", reason="the [inspect] extra is not installed")
# inspect_ai 0.3.285 builds its retry wait with tenacity's deprecated ``initial`` (its own code)
pytestmark = pytest.mark.filterwarnings(
    "ignore:The 'initial' parameter is deprecated:DeprecationWarning"
)

from bayesobs.cli import main  # noqa: E402
from bayesobs.testing import Answer, FakeChatServer  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
KEY = ["subject", "task", "modality", "condition", "session", "run", "trial"]
# what differs between the same run through inspect: and openai: (who asked, when, how fast)
PROVIDER_FIELDS = ["subject", "provider", "model", "latency_s", "timestamp"]


def _rows(folder: Path) -> list[dict]:
    p = folder / "trials.jsonl"
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()] if p.exists() else []


def _run(out: Path, subject: str, *extra: str) -> list[str]:
    return [
        "run",
        "line_ratio",
        "--subject",
        subject,
        "--modality",
        "text",
        "--out",
        str(out),
        "--no-progress",
        *extra,
    ]


@pytest.fixture
def offline_token_counts(monkeypatch):
    """mockllm counts its usage with tiktoken, which downloads its table: a character count here."""
    from inspect_ai.model import ModelAPI

    async def count(self, text: str) -> int:
        return max(1, len(text) // 4)

    monkeypatch.setattr(ModelAPI, "count_text_tokens", count)


def test_a_mockllm_run_logs_its_fixed_reply_with_provider_model_and_usage(
    tmp_path, offline_token_counts, capsys
):
    out = tmp_path / "o"
    argv = _run(out, "inspect:mockllm/model", "--trials", "3", "--no-cache", "--logprobs", "3")
    assert main(argv) == 0
    # mockllm returns no logprobs: one note, and the run goes on without distributions
    assert capsys.readouterr().err.count("returned no logprobs for --logprobs 3") == 1
    rows = pd.DataFrame(_rows(out))
    assert len(rows) == 9 and not rows.duplicated(KEY).any()
    assert set(rows["subject"]) == {"inspect:mockllm/model"}
    assert set(rows["raw_response"]) == {"Default output from mockllm/model"}  # mockllm's text
    assert not rows["valid"].any()  # not a number: logged invalid with the reason
    assert set(rows["invalid_reason"]) == {"no number"}
    assert set(rows["provider"]) == {"mockllm"} and set(rows["model"]) == {"mockllm"}
    assert set(rows["finish_reason"]) == {"stop"}
    usage = pd.DataFrame(list(rows["usage"]))
    # mockllm reports one output token per character of its reply
    assert set(usage["completion_tokens"]) == {len("Default output from mockllm/model")}
    # the rolling context grows the prompt trial by trial
    first = rows[rows["trial"] == 0]["usage"].map(lambda u: u["prompt_tokens"])
    last = rows[rows["trial"] == 2]["usage"].map(lambda u: u["prompt_tokens"])
    assert (last.to_numpy() > first.to_numpy()).all()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["experiment"]["chat"]["max_tokens"] == 64  # an API subject's chat options
    requests = manifest["requests"]["inspect:mockllm/model"]
    assert requests["provider"] == "mockllm" and requests["logprobs_effective"] is None


def _script(body: dict, n: int) -> Answer:
    """A reply that follows the request (its turn count), with logprobs, usage and a cut reply."""
    from bayesobs.testing.fakeserver import token_logprobs

    turns = len(body["messages"])
    text = f"0.{turns + 10}"
    usage = {
        "prompt_tokens": 20 + turns,
        "completion_tokens": 4,
        "total_tokens": 24 + turns,
        "prompt_tokens_details": {"cached_tokens": 5},
        "completion_tokens_details": {"reasoning_tokens": 1},
    }
    lp = token_logprobs(text, int(body.get("top_logprobs") or 0)) if body.get("logprobs") else None
    return Answer(text, finish_reason="length" if turns == 4 else "stop", usage=usage, logprobs=lp)


def test_inspect_openai_and_openai_on_one_server_log_identical_rows(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # inspect's openai provider wants one
    common = ["--trials", "3", "--logprobs", "3", "--token-param", "max_tokens", "--no-cache"]
    common += ["--modality", "image"]  # and text: images go as data URLs with their detail
    with (
        FakeChatServer(_script, record=True) as a,
        FakeChatServer(_script, record=True) as b,
    ):
        spec = "inspect:openai/gpt-4o-mini"
        assert main(_run(tmp_path / "i", spec, *common, "--base-url", a.url)) == 0
        assert main(_run(tmp_path / "o", "openai:gpt-4o-mini", *common, "--base-url", b.url)) == 0
    # the same conversations were sent: system, rolling context, the trial
    key = lambda r: json.dumps(r["messages"], sort_keys=True)  # noqa: E731
    assert sorted(map(key, a.requests)) == sorted(map(key, b.requests)) and len(a.requests) == 18
    assert sum("image_url" in key(r) for r in a.requests) == 9
    assert {r["max_tokens"] for r in a.requests} == {64}
    assert {r["top_logprobs"] for r in a.requests} == {3}
    ins, oai = (pd.DataFrame(_rows(tmp_path / d)) for d in ("i", "o"))
    assert set(ins["provider"]) == {"openai"} and set(ins["model"]) == {"gpt-4o-mini"}
    key_cols = KEY[1:]
    ins, oai = (t.sort_values(key_cols).reset_index(drop=True) for t in (ins, oai))
    pd.testing.assert_frame_equal(
        ins.drop(columns=PROVIDER_FIELDS),
        oai.drop(columns=[c for c in PROVIDER_FIELDS if c in oai]),
    )
    # what the comparison covered: usage, token details, a cut reply, the answer distributions
    assert ins["usage"][0] == {"prompt_tokens": 22, "completion_tokens": 4}
    assert set(ins["cached_tokens"]) == {5} and set(ins["reasoning_tokens"]) == {1}
    assert (ins["finish_reason"] == "length").sum() == 6  # the third trial of each run
    assert set(ins["image_detail"].dropna()) == {"auto"} and ins["image"].notna().sum() == 9
    # a cut reply is invalid; every other trial has its answer distribution
    assert (ins["response_expected"].notna() == (ins["finish_reason"] != "length")).all()


# slow: a CLI process (inspect_ai's import) killed mid-run, then two runs in process (~15 s)
@pytest.mark.slow
def test_kill_resume_cache_and_lock_hold_for_an_inspect_subject(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    out, cache = tmp_path / "o", tmp_path / "cache"
    killed = threading.Event()  # slow replies until then, so the kill falls mid-run

    def script(body: dict, n: int) -> Answer:
        return Answer(f"0.{len(body['messages']) + 10}", delay_s=0 if killed.is_set() else 0.3)

    with FakeChatServer(script) as srv:
        argv = _run(out, "inspect:openai/gpt-4o-mini", "--trials", "12")
        argv += ["--base-url", srv.url, "--concurrency", "1"]
        argv += ["--cache", str(cache), "--cache-scope", "global"]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "bayesobs.cli", *argv],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.time() + 60
        while time.time() < deadline and len(_rows(out)) < 3:
            time.sleep(0.02)
        assert main(argv) == 2  # a second writer on the folder is refused
        assert f"is in use by pid {proc.pid} on {socket.gethostname()}" in capsys.readouterr().err
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        killed.set()
        partial = len(_rows(out))
        assert 3 <= partial < 36
        assert main(argv) == 0  # resume
        asked = srv.count
        # a new folder with the same cache: every reply replayed, no call made
        assert main([*argv, "--out", str(tmp_path / "again")]) == 0
        assert srv.count == asked
    rows = pd.DataFrame(_rows(out))
    assert len(rows) == 36 and not rows.duplicated(KEY).any()  # nothing lost, nothing doubled
    # each reply is the one its request asked for (the context rebuilt from the log on resume)
    expected = rows["trial"].map(lambda t: f"0.{2 * min(t, 10) + 12}")
    assert (rows["raw_response"] == expected).all()
    replayed = pd.DataFrame(_rows(tmp_path / "again"))
    assert len(replayed) == 36 and replayed["cached"].all()
    assert set(replayed["model"]) == {"gpt-4o-mini"}  # the model kept with the cached reply


def test_transient_failures_are_retried_by_the_runner_and_hard_ones_fail_the_trial(
    tmp_path, monkeypatch, capsys
):
    """429s (inspect's own retry loop off; the SDK's two quick retries inside one attempt)."""
    import bayesobs.run.subjects.inspect_model as im

    waits: list[float] = []

    async def pause(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(im, "pause", pause)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")

    def script(body: dict, n: int) -> Answer:
        if n < 3:  # the first attempt (the SDK's three requests) is rate limited
            return Answer("slow down", status=429, headers={"retry-after": "0"})
        if len(body["messages"]) == 6:  # the third trial of each run cannot be asked
            return Answer("this model does not take that", status=400)
        return Answer("0.3")

    out = tmp_path / "o"
    argv = _run(out, "inspect:openai/gpt-4o-mini", "--trials", "3", "--no-cache")
    with FakeChatServer(script) as srv:
        main([*argv, "--base-url", srv.url, "--concurrency", "1"])
    rows = pd.DataFrame(_rows(out))
    assert waits == [0.0]  # one wait, the Retry-After the server asked for
    assert sorted(rows["attempts"]) == [1, 1, 1, 1, 1, 2]  # two trials of each run logged
    assert set(rows["trial"]) == {0, 1}
    failed = [json.loads(x) for x in (out / "runs.jsonl").read_text().splitlines()]
    failed = [e for e in failed if e["event"] == "trial_failed"]
    assert len(failed) == 3 and "Error code: 400" in failed[0]["error"]  # redone on resume


@pytest.mark.parametrize(
    "spec, message",
    [
        ("inspect:", "inspect:<provider>/<model>"),
        ("inspect:openai", "use inspect:PROVIDER/MODEL"),
        ("inspect:nosuch/x", "Model API nosuch of model 'nosuch/x' not recognized"),
        ("inspect:openai/gpt-4o", "No OPENAI_API_KEY"),
        ("inspect:google/gemini-2.5-pro", "pip install google-genai"),
    ],
)
def test_bad_inspect_subjects_are_one_line_before_any_call(
    tmp_path, monkeypatch, capsys, spec, message
):
    if "google" in spec and importlib.util.find_spec("google") is not None:
        pytest.skip("google-genai is installed: the missing-package line cannot show")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    out = tmp_path / "o"
    assert main(_run(out, spec, "--trials", "2", "--no-cache")) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "[bold]" not in err
    errors = [x for x in err.splitlines() if x.startswith("bayesobs: error: ")]
    assert len(errors) == 1 and message in errors[0], err
    assert not (out / "trials.jsonl").exists()


def test_dry_run_counts_the_calls_and_tokens_as_for_openai(tmp_path, capsys):
    argv = ["--trials", "4", "--dry-run"]
    assert main(_run(tmp_path / "a", "inspect:mockllm/model", *argv)) == 0
    ins = capsys.readouterr().out
    assert (
        main(_run(tmp_path / "b", "openai:model", *argv)) == 0
    )  # the same model name: priced alike
    assert "12 call(s) to make" in ins and ins.replace("/a)", "/b)") == capsys.readouterr().out


def test_the_docs_inspect_subject_commands_run(tmp_path, monkeypatch, offline_token_counts):
    """docs/inspect.md "inspect_ai models as subjects": each command, servers at the fake one."""
    (block,) = fenced_blocks(section(page("inspect.md"), "inspect_ai models as subjects"))
    lines = commands(block)
    assert len(lines) == 4
    cwd = checkout(tmp_path)
    monkeypatch.chdir(cwd)
    with FakeChatServer(lambda b, n: Answer("0.42")) as srv:
        for line in lines:
            argv = shell_argv(line.replace("http://127.0.0.1:8080/v1", srv.url), cwd)[1:]
            if "inspect:ollama/" in line:  # ollama's own port: the fake server instead
                argv += ["--base-url", srv.url]
            assert main([*argv, "--trials", "1", "--no-progress", "--no-cache"]) == 0, line
        assert srv.count == 2 * 3  # ollama and llama.cpp: one trial of each session
    mock = pd.DataFrame(_rows(cwd / "runs" / "mock"))
    assert len(mock) == 3 and not mock["valid"].any()  # mockllm's reply holds no number
    for folder in ("llama", "smollm2"):
        rows = pd.DataFrame(_rows(cwd / "runs" / folder))
        assert len(rows) == 3 and set(rows["response"]) == {0.42}
