"""Reasoning-model APIs in the runner (issue 27, section 1).

Each behaviour runs through the CLI against a mode of the local fake server
(:mod:`bayesobs.testing.fakeserver`): ``reasoning`` (refuses ``max_tokens`` and a
non-default ``temperature``, spends tokens on hidden reasoning), ``llamacpp``
(ignores ``max_completion_tokens`` and runs on), ``legacy`` (refuses
``max_completion_tokens``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from bayesobs.cli import main
from bayesobs.run.reasoning import DEFAULT_REASONING_BUDGET
from bayesobs.testing.fakeserver import FakeChatServer, legacy, llamacpp, reasoning

ROOT = Path(__file__).resolve().parents[2]
SPEC = str(ROOT / "tasks" / "line_ratio.toml")


def _rows(folder: Path) -> list[dict]:
    p = folder / "trials.jsonl"
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()] if p.exists() else []


def _events(folder: Path, kind: str) -> list[dict]:
    lines = (folder / "runs.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e.get("event") == kind]


def _run(url: str, out: Path, *extra: str, trials: str = "2", command: str = "run") -> int:
    return main([*_argv_of(url, out, trials=trials, command=command), *extra])


def _notes(err: str) -> list[str]:
    return [x for x in err.splitlines() if x.startswith("note: openai:o-fake")]


def test_a_reasoning_server_runs_a_sweep_with_no_invalid_trial(tmp_path, capsys):
    proto = tmp_path / "proto.toml"
    proto.write_text(f'[[experiment]]\nspec = "{SPEC}"\nmodalities = ["text"]\n')
    out = tmp_path / "o"
    with FakeChatServer(reasoning(reasoning_tokens=200, cached_tokens=8)) as srv:
        code = _run(
            srv.url, out, "--reasoning-effort", "low", "--concurrency", "3", command=str(proto)
        )
    assert code == 0
    rows = _rows(out)
    assert len(rows) == 6 and all(r["valid"] for r in rows)
    assert {r["token_param"] for r in rows} == {"max_completion_tokens"}
    assert {r["temperature_effective"] for r in rows} == {1.0}  # the server's default
    assert {r["reasoning_tokens"] for r in rows} == {200}
    assert {r["cached_tokens"] for r in rows} == {8}
    assert {r["finish_reason"] for r in rows} == {"stop"}
    # the visible budget plus the reasoning budget; temperature dropped after one refusal
    answered = [b for b in srv.requests if "temperature" not in b]
    assert {b["max_completion_tokens"] for b in answered} == {64 + DEFAULT_REASONING_BUDGET}
    assert not any("max_tokens" in b for b in srv.requests)
    # the first request finds out; the others wait for it: one refusal for the run
    assert sum("temperature" in b for b in srv.requests) == 1
    notes = _notes(capsys.readouterr().err)
    assert len(notes) == 1 and "temperature" in notes[0]
    assert [e["dropped"] for e in _events(out, "request_adapted")] == ["temperature"]
    manifest = json.loads((out / "manifest.json").read_text())
    api = manifest["requests"]["openai:o-fake"]
    assert api["temperature_effective"] == 1.0 and api["dropped"] == ["temperature"]
    assert api["token_param"] == "max_completion_tokens" and api["token_param_option"] == "auto"


def test_without_a_reasoning_budget_the_reply_budget_goes_to_reasoning(tmp_path):
    out = tmp_path / "o"

    def thought(body):  # even trials think past the 64-token reply budget, odd ones not
        return 200 if (len(body["messages"]) - 2) // 2 % 2 == 0 else 10

    with FakeChatServer(reasoning(reasoning_tokens=thought)) as srv:
        assert _run(srv.url, out, trials="4") == 0
    rows = pd.DataFrame(_rows(out))
    spent = rows[rows["trial"] % 2 == 0]
    assert len(spent) == 6 and not spent["valid"].any() and set(spent["raw_response"]) == {""}
    assert set(spent["invalid_reason"]) == {"budget_exhausted"}
    assert set(spent["reasoning_tokens"]) == {64} and set(spent["finish_reason"]) == {"length"}
    assert rows.loc[rows["trial"] % 2 == 1, "valid"].all()
    argv = ["score", str(out), "--out", str(tmp_path / "s"), "--bootstrap", "0", "--no-probe"]
    assert main([*argv, "--no-progress"]) == 0
    missing = pd.read_csv(tmp_path / "s" / "missing.csv")
    reasons = set(missing.loc[missing["component"] == "invalid replies", "reason"])
    assert reasons == {"budget_exhausted: 6 trial(s)"}


def test_a_reasoning_budget_too_small_is_budget_exhausted_too(tmp_path, capsys):
    out = tmp_path / "o"
    with FakeChatServer(reasoning(reasoning_tokens=200)) as srv:
        assert _run(srv.url, out, "--reasoning-effort", "low", "--reasoning-budget", "100") == 0
    captured = capsys.readouterr()
    assert "6 without a number" in captured.out
    # the hint names the count that ran out and the option that gives them room (issue 48)
    assert "note: 6 of 6 replies spent their whole budget reasoning" in captured.err
    assert "raise --reasoning-budget (now 100," in captured.err
    assert {b.get("max_completion_tokens") for b in srv.requests} == {164}
    assert {r["invalid_reason"] for r in _rows(out)} == {"budget_exhausted"}
    assert main(["rescore", str(out)]) == 0  # reading the replies again keeps the reason
    rescored = [json.loads(x) for x in (out / "rescored.jsonl").read_text().splitlines()]
    assert {r["invalid_reason"] for r in rescored} == {"budget_exhausted"}


def test_a_refused_max_tokens_gets_max_completion_tokens_on_the_retry_once(tmp_path, capsys):
    out = tmp_path / "o"
    with FakeChatServer(reasoning(reasoning_tokens=10)) as srv:
        code = _run(srv.url, out, "--token-param", "max_tokens", "--concurrency", "3")
    assert code == 0
    assert sum("max_tokens" in b for b in srv.requests) == 1  # one refusal for the whole run
    assert {r["token_param"] for r in _rows(out)} == {"max_completion_tokens"}
    assert all(r["valid"] for r in _rows(out))
    notes = _notes(capsys.readouterr().err)
    assert len(notes) == 2 and "max_completion_tokens" in notes[0]
    events = _events(out, "request_adapted")
    assert {e.get("token_param") for e in events} == {"max_completion_tokens", None}
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["experiment"]["chat"]["token_param"] == "max_tokens"  # what was asked
    assert manifest["requests"]["openai:o-fake"]["token_param"] == "max_completion_tokens"


def test_a_server_that_knows_only_max_tokens_gets_it(tmp_path, capsys):
    out = tmp_path / "o"
    with FakeChatServer(legacy()) as srv:
        assert _run(srv.url, out, "--concurrency", "3") == 0
    assert sum("max_completion_tokens" in b for b in srv.requests) == 1
    assert {b["max_tokens"] for b in srv.requests[1:]} == {64}
    rows = _rows(out)
    assert {r["token_param"] for r in rows} == {"max_tokens"}
    assert {r["temperature_effective"] for r in rows} == {0.7}
    assert len(_notes(capsys.readouterr().err)) == 1


def test_a_server_that_ignores_max_completion_tokens_gets_max_tokens(tmp_path, capsys):
    out = tmp_path / "o"
    with FakeChatServer(llamacpp()) as srv:
        assert _run(srv.url, out, "--concurrency", "3") == 0
    overran = [b for b in srv.requests if "max_completion_tokens" in b]
    assert len(overran) == 1  # the first reply overran; it was asked again, the rest waited
    rows = _rows(out)
    assert len(rows) == 6 and all(r["valid"] for r in rows)
    assert {r["raw_response"] for r in rows} == {"0.5"}
    assert {r["token_param"] for r in rows} == {"max_tokens"}
    notes = _notes(capsys.readouterr().err)
    assert len(notes) == 1 and "overran" in notes[0] and "max_tokens" in notes[0]
    (event,) = _events(out, "request_adapted")
    assert event["token_param"] == "max_tokens" and event["completion_tokens"] > 64
    assert (
        json.loads((out / "manifest.json").read_text())["requests"]["openai:o-fake"]["token_param"]
        == "max_tokens"
    )


def test_an_explicit_token_param_is_not_second_guessed_on_overrun(tmp_path):
    out = tmp_path / "o"
    with FakeChatServer(llamacpp()) as srv:
        assert _run(srv.url, out, "--token-param", "max_completion_tokens", trials="1") == 0
    assert all("max_completion_tokens" in b for b in srv.requests) and len(srv.requests) == 3


def test_the_cache_key_is_the_effective_request(tmp_path):
    cache = tmp_path / "cache"
    extra = ("--reasoning-effort", "low", "--cache", str(cache), "--cache-scope", "global")
    with FakeChatServer(reasoning(reasoning_tokens=20, cached_tokens=4)) as srv:
        argv = [a for a in _argv_of(srv.url, tmp_path / "a") if a != "--no-cache"]
        assert main([*argv, *extra]) == 0
        first = len(srv.requests)
        argv = [a for a in _argv_of(srv.url, tmp_path / "b") if a != "--no-cache"]
        assert main([*argv, *extra]) == 0
    # the second run: one refusal finds the effective request, then every reply is replayed
    assert len(srv.requests) - first == 1
    rows = _rows(tmp_path / "b")
    assert all(r["cached"] for r in rows) and {r["reasoning_tokens"] for r in rows} == {20}
    assert {r["cached_tokens"] for r in rows} == {4}
    assert {r["temperature_effective"] for r in rows} == {1.0}


def _argv_of(url: str, out: Path, trials: str = "2", command: str = "run") -> list[str]:
    target = ["run", SPEC, "--modality", "text"] if command == "run" else ["sweep", command]
    return [
        *target,
        "--subject",
        "openai:o-fake",
        "--base-url",
        url,
        "--api-key",
        "k",
        "--trials",
        trials,
        "--out",
        str(out),
        "--no-progress",
        "--no-cache",
    ]


def test_dry_run_estimates_include_the_reasoning_budget(tmp_path, capsys):
    argv = [*_argv_of("http://127.0.0.1:9/v1", tmp_path / "o"), "--dry-run"]
    assert main(argv) == 0
    plain = capsys.readouterr().out
    assert "at most 384 output tokens" in plain  # 6 calls x 64
    assert main([*argv, "--reasoning-effort", "low", "--reasoning-budget", "1000"]) == 0
    assert "at most 6,384 output tokens" in capsys.readouterr().out


@pytest.mark.parametrize("value", ["-5", "1000000000"])
def test_an_absurd_reasoning_budget_is_one_line(tmp_path, capsys, value):
    argv = [*_argv_of("http://127.0.0.1:9/v1", tmp_path / "o"), "--reasoning-budget", value]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "--reasoning-budget must be" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "o").exists()


def test_simulated_subjects_rows_are_unchanged(tmp_path):
    out = tmp_path / "o"
    argv = ["run", SPEC, "--modality", "text", "--subject", "sim:bayesian", "--trials", "2"]
    assert main([*argv, "--out", str(out), "--no-progress"]) == 0
    row = _rows(out)[0]
    for col in ("token_param", "temperature_effective", "reasoning_tokens", "cached_tokens"):
        assert col not in row
    assert "requests" not in json.loads((out / "manifest.json").read_text())
