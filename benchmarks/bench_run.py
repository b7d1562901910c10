"""Benchmark the task runner.

Usage::

    .venv/bin/python benchmarks/bench_run.py [--out bench-output]

1. The full BayesBench protocol (tasks/bayesbench.toml) for one simulated
   subject, through the CLI in a subprocess: wall time.
2. API throughput: ``openai:fake`` against a local OpenAI-compatible server
   that answers at once (bayesobs.testing.fakeserver), 16 concurrent sessions, the
   three visual tasks in multimodal form (images and 10-trial rolling context
   in every request): trials per second.
3. Reasoning-model overhead: ``openai:fake`` against the local server in its
   ``reasoning`` mode (refuses ``max_tokens`` and ``temperature``, reports
   reasoning and cached tokens), ``--reasoning-effort low``, line_ratio in
   text: the runner's CPU milliseconds per trial (the server runs in its own
   process), which issue 27 bounds at 5 ms.
4. Logprobs overhead: the same with ``--logprobs 5`` against the server's
   ``logprobs`` mode (each reply's tokens with 5 alternatives): the runner's
   CPU milliseconds per trial, answer distributions included (bound: 5 ms).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from common import result as line
from common import yardstick

from bayesobs.cli import main as cli

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "bench-output")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    result = {}

    sim = args.out / "run-sim"
    shutil.rmtree(sim, ignore_errors=True)
    exe = Path(sys.executable).with_name("bayesobs")
    t0 = time.perf_counter()
    subprocess.run(
        [
            str(exe),
            "sweep",
            str(ROOT / "tasks" / "bayesbench.toml"),
            "--subject",
            "sim:bayesian",
            "--out",
            str(sim),
            "--no-progress",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    result["sim_protocol_seconds"] = round(time.perf_counter() - t0, 2)
    n = sum(1 for _ in (sim / "trials.jsonl").open())
    print(f"full protocol, sim:bayesian: {n} trials in {result['sim_protocol_seconds']:.1f} s")
    result["sim_protocol_result"] = line(
        f"full BayesBench protocol, sim:bayesian ({n} trials)",
        result["sim_protocol_seconds"],
        None,
        yardstick(),
        "yardstick: scipy per-cell loop, 1 cell x 10 variants (tests/naive.py)",
    )

    api = args.out / "run-api"
    shutil.rmtree(api, ignore_errors=True)
    # the server runs in its own process, as a real API would
    server = subprocess.Popen(
        [sys.executable, "-m", "bayesobs.testing.fakeserver"], stdout=subprocess.PIPE, text=True
    )
    url = server.stdout.readline().strip()
    try:
        t0 = time.perf_counter()
        for task in ("line_ratio", "marker_location", "maze_distance"):
            cli(
                [
                    "run",
                    task,
                    "--subject",
                    "openai:fake",
                    "--modality",
                    "multimodal",
                    "--runs",
                    "2",
                    "--condition",
                    "base",
                    "--condition",
                    "steer_numeric",
                    "--condition",
                    "noise_gradual",
                    "--out",
                    str(api / task),
                    "--base-url",
                    url,
                    "--api-key",
                    "k",
                    "--no-cache",
                    "--concurrency",
                    "16",
                    "--no-progress",
                ]
            )
        wall = time.perf_counter() - t0
    finally:
        server.terminate()
        server.wait()
    calls = sum(
        sum(1 for _ in (api / t / "trials.jsonl").open())
        for t in ("line_ratio", "marker_location", "maze_distance")
    )
    result["api_trials"] = calls
    result["api_trials_per_s"] = round(calls / wall, 1)
    print(
        f"API runner, 16 concurrent sessions, multimodal with images: {calls} trials in {wall:.1f} s "
        f"= {calls / wall:.0f} trials/s"
    )
    result.update(reasoning_overhead(args.out / "run-reasoning"))
    result.update(reasoning_overhead(args.out / "run-logprobs", mode="logprobs"))
    (args.out / "bench_run.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


def reasoning_overhead(out: Path, mode: str = "reasoning") -> dict:
    """The runner's CPU time per trial against a reasoning-model server (its own process).

    ``mode="logprobs"``: against a server that returns each token's top 5
    alternatives, with ``--logprobs 5`` (answer distributions computed).
    """
    shutil.rmtree(out, ignore_errors=True)
    server = subprocess.Popen(
        [sys.executable, "-m", "bayesobs.testing.fakeserver", "--mode", mode, "--reply", "0.62"],
        stdout=subprocess.PIPE,
        text=True,
    )
    url = server.stdout.readline().strip()
    argv = ["run", "line_ratio", "--subject", "openai:fake", "--modality", "text", "--runs", "2"]
    for c in ("base", "steer_numeric", "noise_gradual"):
        argv += ["--condition", c]
    argv += ["--out", str(out), "--base-url", url, "--api-key", "k", "--no-cache"]
    if mode == "reasoning":
        argv += ["--reasoning-effort", "low"]
    else:
        argv += ["--logprobs", "5"]
    argv += ["--concurrency", "16", "--no-progress"]
    try:
        cpu0, t0 = time.process_time(), time.perf_counter()
        code = cli(argv)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    finally:
        server.terminate()
        server.wait()
    rows = [json.loads(x) for x in (out / "trials.jsonl").open()]
    check = "reasoning_tokens" if mode == "reasoning" else "response_expected"
    assert code == 0 and all(r["valid"] and r[check] for r in rows)
    ms = 1000 * cpu / len(rows)
    what = "reasoning-model server" if mode == "reasoning" else "logprobs server, --logprobs 5"
    print(
        f"{what}, 16 concurrent sessions, text: {len(rows)} trials in {wall:.1f} s; "
        f"runner CPU {ms:.2f} ms per trial (bound: 5 ms)"
    )
    return {
        f"{mode}_trials": len(rows),
        f"{mode}_trials_per_s": round(len(rows) / wall, 1),
        f"{mode}_runner_cpu_ms_per_trial": round(ms, 2),
    }


if __name__ == "__main__":
    raise SystemExit(main())
