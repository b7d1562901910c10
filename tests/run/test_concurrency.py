"""--concurrency auto: the AIMD policy, the session gate, and a run against a rate-limited server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from bayesobs.cli import main
from bayesobs.run.concurrency import AIMD, START_LEVEL, AdaptiveGate
from bayesobs.testing.fakeserver import FakeChatServer, TokenBucket, constant, rate_limited


def test_slow_start_doubles_each_round_until_the_first_429():
    p = AIMD(maximum=64)
    assert p.level == START_LEVEL == 4
    for _ in range(4):  # one round of 4 calls
        p.succeeded(p.epoch)
    assert p.level == 8
    for _ in range(8):
        p.succeeded(p.epoch)
    assert p.level == 16 and p.peak == 16


def test_a_429_halves_the_level_once_per_round():
    p = AIMD(maximum=64, level=16)
    sent = p.epoch  # 16 calls in flight, sent at level 16
    assert p.throttled(sent) is True
    assert p.level == 8 and p.epoch == sent + 1
    # the other calls of that round come back 429 too: the same congestion, no further cut
    for _ in range(5):
        assert p.throttled(sent) is False
    assert p.level == 8 and p.throttles == 6 and p.cuts == 1
    # a call sent after the cut that is throttled cuts again
    assert p.throttled(p.epoch) is True and p.level == 4


def test_after_a_429_the_level_returns_fast_to_just_under_it_then_grows_additively():
    p = AIMD(maximum=64, level=10)
    p.throttled(p.epoch)
    assert p.level == 5 and p.threshold == 9
    for _ in range(4):  # one a success back to 9, just under the level that met the 429
        p.succeeded(p.epoch)
    assert p.level == 9
    for _ in range(8):
        p.succeeded(p.epoch)
    assert p.level == 9  # additive now: not yet a round of 9
    p.succeeded(p.epoch)
    assert p.level == 10
    p.throttled(p.epoch)  # 429 again at 10: halved, and back to 9 at most
    assert p.level == 5 and p.threshold == 9


def test_the_level_stays_within_its_bounds():
    p = AIMD(maximum=6)
    for _ in range(100):
        p.succeeded(p.epoch)
    assert p.level == 6 == p.peak
    for _ in range(10):
        p.throttled(p.epoch)
    assert p.level == 1
    assert AIMD(maximum=2, level=9).level == 2
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="whole number"):
            AIMD(maximum=bad)


def test_the_gate_admits_up_to_the_level_and_pauses_sessions_after_a_cut():
    async def scenario():
        gate = AdaptiveGate(AIMD(maximum=8, level=2))
        order: list[str] = []

        async def session(name: str):
            await gate.acquire()
            order.append(f"{name} in")
            await asyncio.sleep(0)
            return name

        a = asyncio.create_task(session("a"))
        b = asyncio.create_task(session("b"))
        c = asyncio.create_task(session("c"))
        await asyncio.sleep(0.01)
        assert gate.active == 2 and order == ["a in", "b in"]  # c waits
        gate.throttled(gate.epoch)  # the level falls to 1: a pauses at its next trial
        paused = asyncio.create_task(gate.checkpoint())
        await asyncio.sleep(0.01)
        assert not paused.done() and gate.active == 1
        gate.release()  # b ends: the paused session goes before the new one
        await asyncio.sleep(0.01)
        assert paused.done() and gate.active == 1 and order == ["a in", "b in"]
        gate.release()  # a ends: c is admitted
        await asyncio.sleep(0.01)
        assert order == ["a in", "b in", "c in"]
        gate.succeeded(gate.epoch)  # additive: a round of 1 success raises the level to 2
        assert gate.level == 2
        gate.release()
        await asyncio.gather(a, b, c)
        assert gate.active == 0

    asyncio.run(scenario())


def test_the_token_bucket_refuses_beyond_its_rate():
    now = [0.0]
    bucket = TokenBucket(rate=10, burst=2, clock=lambda: now[0])
    assert bucket.take() == 0 and bucket.take() == 0
    assert bucket.take() == pytest.approx(0.1)  # empty: a token in 0.1 s
    now[0] = 0.05
    assert bucket.take() == pytest.approx(0.05)
    now[0] = 0.1
    assert bucket.take() == 0


def _trials(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "trials.jsonl").read_text().splitlines() if x.strip()]


def test_auto_runs_everything_against_a_rate_limited_server(tmp_path, capsys):
    script = rate_limited(constant("0.5"), rate=60, burst=3, latency_s=0.01)
    out = tmp_path / "o"
    with FakeChatServer(script, record=False) as srv:
        code = main(
            [
                "run",
                "line_ratio",
                "--subject",
                "openai:m",
                "--modality",
                "text",
                "--trials",
                "5",
                "--runs",
                "3",
                "--out",
                str(out),
                "--base-url",
                srv.url,
                "--no-cache",
                "--no-progress",
                "--concurrency",
                "auto",
                "--max-concurrency",
                "8",
                # retries wait exactly the retry-after, so a session may lose several races in
                # a row on a loaded machine: room enough that none gives up
                "--max-attempts",
                "100",
            ]
        )
    assert code == 0
    rows = _trials(out)
    assert len(rows) == 45 and len({(r["session"], r["run"], r["trial"]) for r in rows}) == 45
    end = [json.loads(x) for x in (out / "runs.jsonl").read_text().splitlines()][-1]
    c = end["concurrency"]
    assert c["mode"] == "auto" and c["max_concurrency"] == 8 and 1 <= c["final"] <= c["peak"] <= 8
    assert c["throttled"] == script.counts["throttled"]  # every 429 the server sent was seen
    assert "concurrency auto: ended at" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--concurrency", "lots"], "whole number >= 1 or auto"),
        (["--concurrency", "0"], "at least 1 or auto"),
        (["--concurrency", "auto", "--max-concurrency", "0"], "--max-concurrency must be"),
    ],
)
def test_bad_concurrency_is_one_line(tmp_path, capsys, argv, message):
    try:
        code = main(
            ["run", "line_ratio", "--subject", "sim:bayesian", "--out", str(tmp_path), *argv]
        )
    except SystemExit as exc:  # argparse's own one line
        code = exc.code
    assert code == 2 and message in capsys.readouterr().err


def test_the_progress_bar_shows_the_level(tmp_path, capsys):
    from bayesobs.run.runner import run_task

    with FakeChatServer(rate_limited(constant("0.5"), rate=100, burst=10)) as srv:
        report = run_task(
            "line_ratio",
            ["openai:m"],
            tmp_path / "o",
            modalities=["text"],
            trials=2,
            chat={"base_url": srv.url},
            use_cache=False,
            concurrency="auto",
            progress=True,
        )
    assert report.done == 6 and report.concurrency["mode"] == "auto"
    # the bar's postfix: the current level, which grew with each success (no 429 at this rate)
    level = report.concurrency["final"]
    assert level == 4 + 6 and "6/6 [" in capsys.readouterr().err.split(f"concurrency {level}")[0]


def test_the_ratelimit_server_refuses_absurd_settings(capsys):
    from bayesobs.testing.fakeserver import main as serve

    assert serve(["--mode", "ratelimit", "--rate", "0"]) == 2
    assert "--rate must be > 0" in capsys.readouterr().err
