"""Benchmark Percept-V end to end: the protocol's 6,000 images through the runner, then score.

Usage::

    .venv/bin/python benchmarks/bench_perceptv.py [--protocol tasks/percept_v.toml]
        [--subject sim:perceiver] [--trials N] [--out DIR]

Runs the whole protocol (30 domains x 200 images = 6,000 trials) the way
``bayesobs sweep tasks/percept_v.toml --subject sim:perceiver --out DIR`` does
(plan, then the runner: the subject, the log, the PNG files), then
``bayesobs score DIR --out DIR/scores``, and prints per stage the CPU seconds
(the main figure: the machine may be shared) and the wall seconds:

* stimuli: generating every trial and encoding its PNG image(s) (planning),
  in ``min(2, os.cpu_count())`` worker processes (``BAYESOBS_WORKERS=1``:
  one process), their CPU counted with this process's;
* subject: the simulated subject answering (it regenerates each trial and
  reads its pixels);
* runner: the rest of the run (prompts, the append-only log, the PNG files);
* score: parsing, scoring and the score tables.

``--trials N`` runs N trials per domain (a multiple of 20) for a quick check.
Target (issue 32): the 6,000 images end to end in 5 minutes on 2 idle cores.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from common import ROOT, result, yardstick


def cpu_seconds() -> float:
    """CPU seconds of this process and of its finished child processes (the planning workers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class Clock:
    """CPU (this process and its workers) and wall seconds of a stage."""

    def __enter__(self):
        self.c0, self.w0 = cpu_seconds(), time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.cpu = cpu_seconds() - self.c0
        self.wall = time.perf_counter() - self.w0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--protocol", type=Path, default=ROOT / "tasks" / "percept_v.toml")
    ap.add_argument("--subject", default="sim:perceiver")
    ap.add_argument("--trials", type=int, default=None, help="trials per domain (default 200)")
    ap.add_argument("--out", type=Path, default=None, help="keep the experiment folder here")
    args = ap.parse_args()

    from bayesobs.cli import main as cli
    from bayesobs.distributed import local_workers
    from bayesobs.perceptv import subject as perceptv_sim
    from bayesobs.run.parallel import MIN_TRIALS
    from bayesobs.run.plan import load_protocol, plan_all
    from bayesobs.run.runner import start

    answered = {"cpu": 0.0, "wall": 0.0}
    answer = perceptv_sim.PerceptVSubject.answer

    def timed_answer(self, request):  # the subject's share of the runner
        with Clock() as c:
            out = answer(self, request)
        answered["cpu"] += c.cpu
        answered["wall"] += c.wall
        return out

    perceptv_sim.PerceptVSubject.answer = timed_answer
    tmp = tempfile.TemporaryDirectory()
    out = args.out or Path(tmp.name) / "run"
    with Clock() as total:
        # what `bayesobs sweep` does (bayesobs.run.runner.sweep), in its stages
        exps = load_protocol(args.protocol)
        kw = dict(subjects=[args.subject], trials=args.trials, runs=None, ami=None, hvs=None)
        with Clock() as stimuli:
            sessions = plan_all([(e["spec"], kw) for e in exps])
        settings = {
            "command": "sweep",
            "protocol": str(args.protocol),
            "trials": args.trials,
            "runs": None,
        }
        with Clock() as run:
            rep = start([e["spec"] for e in exps], sessions, [args.subject], out, settings)
        with Clock() as scored:
            assert cli(["score", str(out), "--out", str(out / "scores"), "--no-progress"]) == 0
    n = rep.done
    workers = local_workers() if n >= MIN_TRIALS else 1
    print(f"\n{n:,} trials ({len(sessions)} sessions), subject {args.subject}, -> {out}")
    print(f"stimuli made by {workers} process(es) (BAYESOBS_WORKERS), {os.cpu_count()} CPUs")
    print(f"{'stage':44s} {'CPU s':>8s} {'wall s':>8s} {'CPU ms/trial':>13s}")
    rows = [
        ("stimuli: generate + PNG encode (planning)", stimuli.cpu, stimuli.wall),
        ("subject: the sim answers", answered["cpu"], answered["wall"]),
        ("runner: prompts, log, PNG files", run.cpu - answered["cpu"], run.wall - answered["wall"]),
        ("score: parse, score, tables", scored.cpu, scored.wall),
        ("total (sweep + score)", total.cpu, total.wall),
    ]
    for name, cpu, wall in rows:
        print(f"{name:44s} {cpu:8.1f} {wall:8.1f} {1000 * cpu / max(n, 1):13.1f}")
    peer = yardstick()
    scale = "" if args.trials is None else f", {args.trials} per domain"
    result(
        f"Percept-V end to end ({n:,} images{scale}), CPU",
        total.cpu,
        300.0,  # issue 32: 6,000 images in 5 minutes
        peer,
        "yardstick: scipy per-cell loop, 1 cell x 10 variants (tests/naive.py)",
    )
    result(
        f"Percept-V end to end ({n:,} images{scale}), wall",
        total.wall,
        300.0,
        peer,
        "yardstick: scipy per-cell loop, 1 cell x 10 variants (tests/naive.py)",
    )
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
