"""Benchmark adaptive concurrency (``--concurrency auto``) against a rate-limited server.

Usage::

    .venv/bin/python benchmarks/bench_concurrency.py [--out bench-output] [--rate 20]

A local OpenAI-compatible server (bayesobs.testing.fakeserver) behind a token
bucket of ``--rate`` requests a second (burst ``--burst``) answers each
request in ``--latency`` seconds and refuses those beyond the rate with 429
and a ``retry-after`` of the seconds until the next token.  The same
workload (``openai:fake``, line_ratio in text, ``--runs`` runs of its three
sessions, ``--trials`` trials each, no cache) runs at each fixed
``--concurrency`` and at ``auto``; each run's throughput (trials a second
of the run) and the 429s the server sent are printed, with the target of
issue 30: auto's throughput at least 80 % of the best fixed setting's,
with fewer 429s than that setting.  Results also go to
``OUT/bench_concurrency.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from common import result

from bayesobs.run.runner import run_task
from bayesobs.testing.fakeserver import FakeChatServer, constant, rate_limited

ROOT = Path(__file__).resolve().parents[1]
TARGET = 0.8  # auto's throughput as a share of the best fixed setting's


def measure(out: Path, concurrency, args) -> dict:
    """One run at ``concurrency`` against a fresh rate-limited server."""
    shutil.rmtree(out, ignore_errors=True)
    script = rate_limited(constant("0.5"), args.rate, args.burst, args.latency)
    with FakeChatServer(script, record=False) as srv:
        report = run_task(
            "line_ratio",
            ["openai:fake"],
            out,
            modalities=["text"],
            trials=args.trials,
            runs=args.runs,
            # attempts enough for every setting to finish: the herd of a high fixed setting,
            # all retrying when the same retry-after runs out, can exhaust the default 12
            chat={"base_url": srv.url, "max_attempts": 1000},
            api_key="k",
            use_cache=False,
            concurrency=concurrency,
            max_concurrency=args.max_concurrency,
            progress=False,
        )
    assert not report.failed_sessions, report.failed_sessions
    row = {
        "concurrency": concurrency,
        "trials": report.done,
        "seconds": round(report.seconds, 2),
        "trials_per_s": round(report.done / report.seconds, 2),
        "http_429": script.counts["throttled"],
    }
    if report.concurrency:
        row["auto"] = report.concurrency
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "bench-output")
    ap.add_argument("--rate", type=float, default=20.0, help="requests a second (default 20)")
    ap.add_argument("--burst", type=float, default=2.0, help="token bucket size (default 2)")
    ap.add_argument("--latency", type=float, default=0.2, help="seconds an answer takes (0.2)")
    ap.add_argument("--runs", type=int, default=8, help="runs of line_ratio's 3 sessions (8)")
    ap.add_argument("--trials", type=int, default=6, help="trials a session (default 6)")
    ap.add_argument("--fixed", default="2,4,8,16,32", help="fixed settings to compare")
    ap.add_argument("--max-concurrency", type=int, default=64)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    print(
        f"server: {args.rate:g} requests/s (burst {args.burst:g}), {args.latency:g} s an answer; "
        f"workload: {3 * args.runs} sessions x {args.trials} trials"
    )
    for c in [int(x) for x in args.fixed.split(",")] + ["auto"]:
        row = measure(args.out / f"run-concurrency-{c}", c, args)
        rows.append(row)
        extra = ""
        if "auto" in row:
            a = row["auto"]
            extra = f" (level: peak {a['peak']}, final {a['final']}, halved {a['cuts']} times)"
        print(
            f"  --concurrency {c!s:>4}: {row['trials_per_s']:6.2f} trials/s, "
            f"{row['http_429']:4d} 429s{extra}"
        )
    fixed = [r for r in rows if r["concurrency"] != "auto"]
    best = max(fixed, key=lambda r: r["trials_per_s"])
    auto = rows[-1]
    share = auto["trials_per_s"] / best["trials_per_s"]
    ok = share >= TARGET and auto["http_429"] < best["http_429"]
    print(
        f"auto: {share:.0%} of the best fixed setting's throughput (--concurrency "
        f"{best['concurrency']}: {best['trials_per_s']:.2f} trials/s; target >= {TARGET:.0%}), "
        f"{auto['http_429']} 429s against its {best['http_429']} (target: fewer) -> "
        f"{'met' if ok else 'NOT met'}"
    )
    line = result(
        "--concurrency auto throughput",
        auto["trials_per_s"],
        TARGET * best["trials_per_s"],
        best["trials_per_s"],
        f"best fixed --concurrency {best['concurrency']}",
        "trials/s",
        higher_is_better=True,
    )
    out = {
        "result": line,
        "server": {"rate": args.rate, "burst": args.burst, "latency_s": args.latency},
        "runs": rows,
        "best_fixed": best["concurrency"],
        "auto_share_of_best": round(share, 3),
        "target_share": TARGET,
        "met": ok,
    }
    (args.out / "bench_concurrency.json").write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
