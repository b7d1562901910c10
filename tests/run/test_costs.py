"""Money and budgets (issue 53): prices, the running total, ``--max-cost`` and ``--max-total-tokens``.

Every dollar figure is checked against a hand computation from the usage the
fake servers report and the table's prices (closed form); the budget stops a
run cleanly and the same command with a larger budget resumes to exactly the
rows of an uninterrupted run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bayesobs.cli import main
from bayesobs.run.budget import Budget
from bayesobs.run.prices import TABLE, load_prices, money, row_cost
from bayesobs.testing import Answer, FakeChatServer
from bayesobs.testing.fakebatch import FakeBatchServer, hashed

KEY = ["subject", "task", "modality", "condition", "session", "run", "trial"]
# per call: 1,000 input tokens (200 of them read from the provider's prompt cache), 20 output
USAGE = {
    "prompt_tokens": 1000,
    "completion_tokens": 20,
    "prompt_tokens_details": {"cached_tokens": 200},
    "completion_tokens_details": {"reasoning_tokens": 12},
}


def _rows(folder: Path) -> list[dict]:
    p = folder / "trials.jsonl"
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()] if p.exists() else []


def _events(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "runs.jsonl").read_text().splitlines() if x.strip()]


def _run(url, out, *extra, model="m", trials="6", cache=None):
    """``bayesobs run line_ratio`` in text on ``openai:MODEL`` against ``url`` (18 calls at 6 trials)."""
    return main(
        [
            "run",
            "line_ratio",
            "--subject",
            f"openai:{model}",
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
            *(["--cache", str(cache)] if cache else ["--no-cache"]),
            "--no-progress",
            *extra,
        ]
    )


def _hand(rows: list[dict], inp: float, cached: float, out: float, batch: float = 1.0) -> float:
    """Dollars of logged rows by hand: uncached input, cached input, output (reasoning included)."""
    total = 0.0
    for r in rows:
        if r["cached"]:
            continue
        p, o = r["usage"]["prompt_tokens"], r["usage"]["completion_tokens"]
        c = r.get("cached_tokens") or 0
        total += ((p - c) * inp + c * cached + o * out) / 1e6 * batch
    return total


def test_running_total_is_the_usage_priced_by_the_shipped_table(tmp_path, capsys):
    with FakeChatServer(lambda b, n: Answer("0.5", usage=USAGE)) as srv:
        assert _run(srv.url, tmp_path / "a", model="gpt-4o-mini", trials="2") == 0
    rows = _rows(tmp_path / "a")
    assert len(rows) == 6 and all(r["cached_tokens"] == 200 for r in rows)
    # gpt-4o-mini in the shipped table: $0.15 in, $0.075 cached in, $0.60 out per million
    want = _hand(rows, 0.15, 0.075, 0.60)
    assert want == pytest.approx(6 * (800 * 0.15 + 200 * 0.075 + 20 * 0.60) / 1e6)
    end = _events(tmp_path / "a")[-1]
    assert end["event"] == "end" and end["cost_usd"] == pytest.approx(want, abs=1e-6)
    assert end["tokens"] == 6 * 1020 and end["billed_calls"] == 6
    out = capsys.readouterr().out
    assert (
        f"spent {money(want)} on 6 billed call(s) (6,000 input tokens, 1,200 of them cached" in out
    )


def test_price_flags_and_files_override_the_table_and_unknown_models_say_so(tmp_path, capsys):
    table = load_prices()
    assert "developers.openai.com" in table.source and table.date
    for name in ("gpt-4o", "o4-mini", "gpt-5-mini", "claude-sonnet-4-5"):  # the docs' models
        assert table.price(f"openai:{name}") is not None
    assert table.price("anthropic:claude-sonnet-4-5-20250929") == table.price("x:claude-sonnet-4-5")
    user = tmp_path / "p.toml"
    user.write_text('date = "2026-01-02"\n[models.m]\ninput = 2\noutput = 8\n')
    prices = load_prices(user, ["gpt-4o=1,4,0.5"])
    assert prices.price("openai:m").cached_input == 2  # no cached price: the input price
    assert prices.price("openai:gpt-4o").output == 4
    row = {"subject": "openai:m", "usage": {"prompt_tokens": 100, "completion_tokens": 10}}
    assert row_cost(row, prices) == pytest.approx((100 * 2 + 10 * 8) / 1e6)
    assert row_cost({**row, "subject": "openai:unknown"}, prices) is None
    assert row_cost({**row, "cached": True}, prices) == 0.0
    with FakeChatServer(lambda b, n: Answer("0.5", usage=USAGE)) as srv:
        assert _run(srv.url, tmp_path / "a", trials="1") == 0  # model m: no price
    out = capsys.readouterr().out
    assert "3 call(s) of m not counted in dollars" in out and "--price MODEL=IN,OUT" in out


def test_budget_stops_at_about_half_and_a_larger_one_resumes_to_an_uninterrupted_runs_rows(
    tmp_path, capsys
):
    price = ["--price", "m=1,10,0.5"]  # per call: (800 * 1 + 200 * 0.5 + 20 * 10) / 1e6 = $0.0011
    per_call = (800 * 1 + 200 * 0.5 + 20 * 10) / 1e6
    with FakeChatServer(lambda b, n: Answer("0.5", usage=USAGE)) as srv:
        assert _run(srv.url, tmp_path / "whole", *price) == 0
        assert srv.count == 18
        capsys.readouterr()
        budget = 9.5 * per_call  # about half of the 18 calls
        assert _run(srv.url, tmp_path / "a", *price, "--max-cost", str(budget)) == 2
        err = capsys.readouterr().err
        half = _rows(tmp_path / "a")
        assert 5 <= len(half) <= 9  # never past the budget: calls in flight were counted
        assert _hand(half, 1, 0.5, 10) <= budget
        line = [x for x in err.splitlines() if x.startswith("bayesobs: budget reached")]
        assert len(line) == 1 and "the running mean of the billed calls" in line[0]
        assert f"on {len(half)} billed call(s)" in line[0] and "larger budget resumes" in line[0]
        events = _events(tmp_path / "a")
        assert [e["event"] for e in events].count("budget_reached") == 1
        assert events[-1]["event"] == "end" and events[-1]["failed_sessions"] == []
        # the same budget again stops before any call; a larger one completes
        assert _run(srv.url, tmp_path / "a", *price, "--max-cost", str(budget)) == 2
        assert len(_rows(tmp_path / "a")) == len(half)
        assert _run(srv.url, tmp_path / "a", *price, "--max-cost", "1") == 0
        assert srv.count == 36  # nothing asked twice
    drop = ("timestamp", "latency_s", "attempts")
    a = {
        tuple(r[k] for k in KEY): {k: v for k, v in r.items() if k not in drop}
        for r in _rows(tmp_path / "a")
    }
    whole = {
        tuple(r[k] for k in KEY): {k: v for k, v in r.items() if k not in drop}
        for r in _rows(tmp_path / "whole")
    }
    assert len(a) == len(_rows(tmp_path / "a")) == 18
    assert a == whole
    assert _events(tmp_path / "a")[-1]["cost_usd"] == pytest.approx(18 * per_call)


def test_token_budget_stops_likewise_and_replayed_replies_cost_nothing(tmp_path, capsys):
    with FakeChatServer(lambda b, n: Answer("0.5", usage=USAGE)) as srv:
        assert (
            _run(srv.url, tmp_path / "a", "--max-total-tokens", "5000", cache=tmp_path / "c") == 2
        )
        n = len(_rows(tmp_path / "a"))
        assert 1 <= n <= 4 and n * 1020 <= 5000
        assert "budget of 5,000 tokens" in capsys.readouterr().err
        # a reply replayed from the cache costs nothing: cut the log, the same replies return
        log = tmp_path / "a" / "trials.jsonl"
        log.write_text("")
        assert (
            _run(srv.url, tmp_path / "a", "--max-total-tokens", "100000", cache=tmp_path / "c") == 0
        )
    rows = _rows(tmp_path / "a")
    assert sum(r["cached"] for r in rows) == n
    assert _events(tmp_path / "a")[-1]["replayed"] == n
    assert _events(tmp_path / "a")[-1]["tokens"] == (18 - n) * 1020


def test_dry_run_prints_money_low_and_high_by_the_closed_form(tmp_path, capsys):
    from bayesobs.run.runner import run_task

    report = run_task(
        "line_ratio",
        ["openai:gpt-4o"],
        tmp_path / "d",
        modalities=["text"],
        trials=6,
        dry_run=True,
        chat={"base_url": "http://127.0.0.1:9/v1"},
    )
    d = report.dry_run
    # gpt-4o: $2.50 in, $10 out per million; low: one output token a reply; high: the whole budget
    assert d["cost_low"] == pytest.approx((d["input_tokens"] * 2.5 + d["calls"] * 10) / 1e6)
    assert d["cost_high"] == pytest.approx(
        (d["input_tokens"] * 2.5 + d["output_tokens"] * 10) / 1e6
    )
    assert (
        main(
            [
                "run",
                "line_ratio",
                "--subject",
                "openai:gpt-4o",
                "--modality",
                "text",
                "--trials",
                "6",
                "--out",
                str(tmp_path / "d"),
                "--dry-run",
                "--batch",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert f"money: {money(d['cost_low'] / 2)} to {money(d['cost_high'] / 2)}" in out
    assert "batch prices" in out and "--max-cost" not in out
    argv = ["run", "line_ratio", "--subject", "openai:gpt-4o", "--modality", "text"]
    cheap = str(d["cost_high"] / 2)
    assert (
        main(
            [*argv, "--trials", "6", "--out", str(tmp_path / "d"), "--dry-run", "--max-cost", cheap]
        )
        == 0
    )
    assert (
        f"with --max-cost {money(d['cost_high'] / 2)} the run may stop" in capsys.readouterr().out
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--max-cost", "-1"], "--max-cost must be a positive number of dollars"),
        (["--max-cost", "nan"], "--max-cost must be a positive number of dollars"),
        (["--max-total-tokens", "0"], "--max-total-tokens must be a whole number >= 1"),
        (["--price", "gpt-4o=cheap"], "--price takes MODEL=IN,OUT"),
        (["--price", "m=1,-2"], "output must be >= 0"),
        (["--max-cost", "5"], "--max-cost needs a price for every model: no price for model 'm'"),
    ],
)
def test_bad_budget_options_are_one_line_and_exit_2(tmp_path, capsys, extra, message):
    assert _run("http://127.0.0.1:9/v1", tmp_path / "a", *extra) == 2
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert "Traceback" not in err and len(lines) == 1 and message in lines[0], err
    assert not (tmp_path / "a" / "trials.jsonl").exists()


@pytest.mark.slow
def test_batch_money_takes_the_discount_and_the_budget_stops_submitting(tmp_path, capsys):
    usage = {"prompt_tokens": 1000, "completion_tokens": 100}
    script = hashed()

    def costly(body, n):
        return Answer(script(body, n).text, usage=usage)

    extra = ["--batch", "--poll-max", "0.01", "--condition", "base", "--price", "m=1000,1000"]
    per = 1100 * 1000 / 1e6 / 2  # a call at batch prices: $0.55
    with FakeBatchServer(costly) as srv:
        assert _run(srv.url, tmp_path / "a", *extra, trials="3") == 0
        rows = _rows(tmp_path / "a")
        assert len(rows) == 9 and all(r["batch_id"] for r in rows)
        assert _hand(rows, 1000, 1000, 1000, batch=0.5) == pytest.approx(9 * per)
        assert _events(tmp_path / "a")[-1]["cost_usd"] == pytest.approx(9 * per)
        # rounds of 3 (one trial per rolling-context session): the budget holds 4 calls
        capsys.readouterr()
        assert _run(srv.url, tmp_path / "b", *extra, "--max-cost", str(4.5 * per), trials="3") == 2
        assert "budget reached" in capsys.readouterr().err
        part = _rows(tmp_path / "b")
        assert len(part) == 4 and _hand(part, 1000, 1000, 1000, batch=0.5) <= 4.5 * per
        assert _run(srv.url, tmp_path / "b", *extra, trials="3") == 0
    again = {tuple(r[k] for k in KEY): r["raw_response"] for r in _rows(tmp_path / "b")}
    assert again == {tuple(r[k] for k in KEY): r["raw_response"] for r in rows}


def test_may_spend_counts_calls_in_flight_at_the_running_mean():
    budget = Budget(load_prices(TABLE), max_cost=1.0, first_call=(0.3, 100))
    assert budget.may_spend(3) and not budget.may_spend(4)  # the first-call estimate
    budget.reserve()
    budget.reserve()
    assert budget.fits(5) == 1
    budget.settle(
        {"subject": "openai:gpt-4o", "usage": {"prompt_tokens": 40_000, "completion_tokens": 0}}
    )
    # one billed call of $0.10: the running mean now; one call still in flight
    assert budget.fits(20) == 8  # 0.1 + (1 + 8) * 0.1 <= 1


def test_sweep_takes_the_budget_and_shows_the_money_beside_its_progress(tmp_path, capsys):
    root = Path(__file__).resolve().parents[2]
    proto = tmp_path / "proto.toml"
    proto.write_text(
        f'[[experiment]]\nspec = "{root / "tasks" / "line_ratio.toml"}"\n'
        'modalities = ["text"]\nconditions = ["base", "context_none"]\n'
    )
    argv = ["sweep", str(proto), "--subject", "openai:m", "--trials", "2", "--no-cache"]
    argv += ["--api-key", "k", "--price", "m=1,10,0.5", "--progress"]
    per_call = (800 * 1 + 200 * 0.5 + 20 * 10) / 1e6
    with FakeChatServer(lambda b, n: Answer("0.5", usage=USAGE)) as srv:
        argv += ["--base-url", srv.url]
        out = tmp_path / "s"
        assert main([*argv, "--out", str(out), "--max-cost", str(6.5 * per_call)]) == 2
        assert 1 <= len(_rows(out)) <= 6
        err = capsys.readouterr().err
        assert "budget reached" in err and "spent" in err.split("budget reached")[0]
        assert main([*argv, "--out", str(out), "--max-cost", "1"]) == 0
        assert srv.count == 12 == len(_rows(out))
    assert _events(out)[-1]["cost_usd"] == pytest.approx(12 * per_call)


def test_anthropic_usage_is_priced_with_its_cache_reads(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-local-test-key")
    usage = {"input_tokens": 900, "output_tokens": 30, "cache_read_input_tokens": 100}
    with FakeChatServer(lambda b, n: Answer("0.5", usage=usage)) as srv:
        argv = ["run", "line_ratio", "--subject", "anthropic:claude-haiku-4-5", "--trials", "1"]
        argv += ["--modality", "text", "--out", str(tmp_path / "a"), "--base-url", srv.root]
        assert main([*argv, "--no-cache", "--no-progress"]) == 0
    rows = _rows(tmp_path / "a")
    assert len(rows) == 3 and all(r["usage"]["prompt_tokens"] == 1000 for r in rows)
    # claude-haiku-4-5: $1 in, $0.10 cache reads, $5 out per million
    want = 3 * (900 * 1 + 100 * 0.10 + 30 * 5) / 1e6
    assert _hand(rows, 1, 0.10, 5) == pytest.approx(want)
    assert _events(tmp_path / "a")[-1]["cost_usd"] == pytest.approx(want, abs=1e-6)
    assert f"spent {money(want)} on 3 billed call(s)" in capsys.readouterr().out
