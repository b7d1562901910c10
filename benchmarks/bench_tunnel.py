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
``tasks/tunnel_vision.toml`` with the paper's trial counts, as a user does:
``bayesobs sweep ... --progress`` in a child process (generation, PNG
encoding, demos, the subject, parsing, the append-only log) into a temporary
folder, stamping each progress line as it arrives, then scores it
(``bayesobs.score``).  It prints when the first line and the first progress
line came (target: within 2 s), the total, and CPU and wall seconds.  Target:
3 minutes per simulated subject.  ``--runner-trials N`` overrides the trial
counts (every session) for a quick check.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

import numpy as np
from common import children_cpu, proc_stat, result, yardstick

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
    """Time ``bayesobs sweep tasks/tunnel_vision.toml`` for the subjects, as a user sees it, then score.

    The sweep runs as a child process with ``--progress`` (stderr is a pipe
    here: plain lines); each stderr line is stamped as it arrives, so the
    figures are what a user watching a log sees: the first line (the plan),
    the first progress line, and the total.  CPU seconds are the child's.
    """
    import contextlib
    import os
    import subprocess
    import sys

    import pandas as pd

    from bayesobs import read_trials, score

    protocol = Path(__file__).resolve().parent.parent / "tasks" / "tunnel_vision.toml"
    exe = [sys.executable, "-m", "bayesobs.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        cmd = [*exe, "sweep", str(protocol), "--out", str(out), "--progress"]
        cmd += [x for s in subjects for x in ("--subject", s)]
        if trials is not None:
            cmd += ["--trials", str(trials)]
        cpu0 = children_cpu()
        t0 = time.perf_counter()
        child = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        stamped, first_cpu = [], None
        for line in child.stderr:
            stamped.append((time.perf_counter() - t0, line.rstrip("\n")))
            print(f"  [{stamped[-1][0]:7.1f} s] {stamped[-1][1]}", flush=True)  # the user's view
            if first_cpu is None:  # the child's CPU seconds so far (Linux), load aside
                with contextlib.suppress(OSError, IndexError, ValueError):
                    fields = proc_stat(child.pid)
                    first_cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        assert child.wait() == 0, "\n".join(x for _, x in stamped[-5:])
        t_run = time.perf_counter() - t0
        cpu_run = children_cpu() - cpu0
        first = stamped[0][0]
        moving = next(t for t, x in stamped if x.startswith("making stimuli"))
        t1, c1 = time.perf_counter(), time.process_time()
        res = score(read_trials([out]), bootstrap=0, probe=False)
        t_score, cpu_score = time.perf_counter() - t1, time.process_time() - c1
    acc = res.perception
    print(
        f"\nrunner: {', '.join(subjects)}: first line after {first:.1f} s "
        f"({first_cpu if first_cpu is not None else float('nan'):.1f} s CPU), first progress line "
        f"after {moving:.1f} s; sweep {t_run:.1f} s wall, {cpu_run:.1f} s CPU; "
        f"scored in {t_score:.1f} s ({cpu_score:.1f} s CPU)"
    )
    with pd.option_context("display.width", 160):
        print(
            acc[["task", "variant", "modality", "n", "accuracy", "lo", "hi", "chance"]].to_string(
                index=False
            )
        )
    peer = yardstick()
    peer_name = "yardstick: scipy per-cell loop, 1 cell x 10 variants (tests/naive.py)"
    result("Tunnel Vision sweep: first progress line, wall", moving, 2.0, peer, peer_name)
    result(
        f"full Tunnel Vision protocol, sweep + score, {len(subjects)} subject(s), CPU",
        cpu_run + cpu_score,
        180.0 * len(subjects),  # issue 29's 3 minutes per simulated subject
        peer,
        peer_name,
    )
    result(
        f"full Tunnel Vision protocol, sweep + score, {len(subjects)} subject(s), wall",
        t_run + t_score,
        180.0 * len(subjects),
        peer,
        peer_name,
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
