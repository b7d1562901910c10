"""Benchmark the Tunnel Vision library: generation and each simulated subject, per trial.

Usage::

    .venv/bin/python benchmarks/bench_tunnel.py [--trials 20] [--seed 0]

For every task variant it times ``make_trial`` (with the few-shot demos,
which are cached after the first call) and every simulated subject on
``--trials`` trials, prints ms per trial and accuracy, then extrapolates the
wall time of the paper's full protocol (reid 200 + 125 + 125; hunt 125 +
200 + 125 + 75 decomposed, three queries each; circuits 200 + 125 + 125)
for one simulated subject: generation plus its slowest subject per task.
Target: under 3 minutes.

With ``--runner SUBJECT`` (repeatable) it also runs the whole protocol,
``tasks/tunnel_vision.toml`` with the paper's trial counts, through the
package's one runner (``bayesobs.sweep``: generation, PNG encoding, demos,
the subject, parsing, the append-only log) into a temporary folder, then
scores it (``bayesobs.score``), and prints the wall times.  Target: one
simulated subject under 3 minutes.  ``--runner-trials N`` overrides the
trial counts (every session) for a quick check.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

import numpy as np
from common import result, yardstick

from bayesobs.tunnel import PROTOCOL, SIMS, make_trial
from bayesobs.tunnel.parse import parse


def _time(fn, items):
    t0 = time.perf_counter()
    out = [fn(x) for x in items]
    return (time.perf_counter() - t0) / max(len(items), 1), out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--runner",
        action="append",
        default=[],
        metavar="SUBJECT",
        help="also time the full protocol through the runner with this subject (repeatable: "
        "one sweep with all of them, as `bayesobs sweep` with three simulated subjects)",
    )
    ap.add_argument("--runner-trials", type=int, default=None)
    ap.add_argument("--skip-library", action="store_true", help="only the runner timing")
    args = ap.parse_args()
    if not args.skip_library:
        library(args)
    if args.runner:
        runner(args.runner, args.runner_trials)
    return 0


def runner(subjects: list[str], trials: int | None) -> None:
    """Time ``tasks/tunnel_vision.toml`` for the subjects through one ``bayesobs.sweep``, then score."""
    import pandas as pd

    from bayesobs import read_trials, score, sweep

    protocol = Path(__file__).resolve().parent.parent / "tasks" / "tunnel_vision.toml"
    with tempfile.TemporaryDirectory() as tmp:
        t0, c0 = time.perf_counter(), time.process_time()
        rep = sweep(protocol, subjects, Path(tmp) / "run", trials=trials)
        t_run = time.perf_counter() - t0
        t0 = time.perf_counter()
        res = score(read_trials([Path(tmp) / "run"]), bootstrap=0, probe=False)
        t_score = time.perf_counter() - t0
        cpu = time.process_time() - c0  # on a shared machine the wall time includes waiting
    acc = res.perception
    print(
        f"\nrunner: {', '.join(subjects)}, {rep.done} questions logged in {t_run:.1f} s "
        f"({1000 * t_run / max(rep.done, 1):.1f} ms each), scored in {t_score:.1f} s"
    )
    with pd.option_context("display.width", 160):
        print(
            acc[["task", "variant", "modality", "n", "accuracy", "lo", "hi", "chance"]].to_string(
                index=False
            )
        )
    total = t_run + t_score
    print(f"CPU time of this process (run + score): {cpu:.0f} s")
    result(
        f"full Tunnel Vision protocol through the runner + score, {len(subjects)} subject(s)",
        total,
        180.0 * len(subjects),  # issue 29's 3 minutes per simulated subject
        yardstick(),
        "yardstick: scipy per-cell loop, 1 cell x 10 variants (tests/naive.py)",
    )


def library(args) -> None:
    total = 0.0
    print(f"{'task':15s} {'variant':14s} {'gen ms':>7s}  subject: ms/trial (accuracy)")
    for task, variants in PROTOCOL.items():
        for variant, n_paper in variants.items():
            make_trial(task, variant, args.seed)  # build the cached demos outside the timing
            seeds = range(args.seed + 1, args.seed + 1 + args.trials)
            gen, trials = _time(
                lambda s, task=task, variant=variant: make_trial(task, variant, s), seeds
            )
            parts, slowest = [], 0.0
            for name, fn in SIMS[task].items():
                rng = np.random.default_rng(args.seed)
                if variant == "decomposed":  # three single-step queries along the gold path
                    steps = [
                        (dataclasses.replace(t, prompt=p), a, f)
                        for t in trials
                        for p, a, f in zip(
                            t.meta["step_prompts"],
                            t.meta["step_answers"],
                            t.meta["step_formats"],
                            strict=True,
                        )
                    ]
                    dt, replies = _time(lambda x, fn=fn, rng=rng: fn(x[0], rng), steps)
                    dt *= 3
                    acc = np.mean(
                        [parse(f, r)[0] == a for (_, a, f), r in zip(steps, replies, strict=True)]
                    )
                else:
                    dt, replies = _time(lambda t, fn=fn, rng=rng: fn(t, rng), trials)
                    acc = np.mean(
                        [
                            parse(t.answer_format, r)[0] == t.answer
                            for t, r in zip(trials, replies, strict=True)
                        ]
                    )
                slowest = max(slowest, dt)
                parts.append(f"{name} {1000 * dt:.0f} ({acc:.2f})")
            total += n_paper * (gen + slowest)
            print(f"{task:15s} {variant:14s} {1000 * gen:7.1f}  " + ", ".join(parts))
    print(f"\nfull protocol, one simulated subject (generation + slowest subject): {total:.0f} s")
    print("target: under 180 s " + ("(met)" if total < 180 else "(NOT met)"))


if __name__ == "__main__":
    raise SystemExit(main())
