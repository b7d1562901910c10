"""Benchmark: `make demo`'s wall time (issue 32: <= 90 s on 2 idle cores after the install).

Usage::

    .venv/bin/python benchmarks/bench_demo.py [--out DIR] [--json FILE]

Runs the demo's four commands (the Makefile's ``demo`` target: the BayesBench
protocol on four simulated observers and the visual-search protocol on three
simulated searchers, side by side as the Makefile runs them, then ``score
--bootstrap 30`` of both and ``report``) into a temporary folder (or
``--out``), and prints each stage's wall and CPU seconds (the two sweeps: one
stage, their CPU summed), the total, and the total beside the target and the
peer (:func:`common.yardstick`, timed in the same run).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, children_cpu, compiled_package, load, result, yardstick


def demo_commands(d: Path) -> list[tuple[str, list[str]]]:
    """The Makefile's ``demo`` commands writing under ``d`` (keep in step with the Makefile)."""
    tasks = ROOT / "tasks"
    return [
        (
            "sweep bayesbench (4 sim observers)",
            ["sweep", str(tasks / "bayesbench.toml")]
            + [
                a
                for k in ("bayesian", "antibayes", "kalman", "linear")
                for a in ("--subject", f"sim:{k}")
            ]
            + ["--out", str(d / "run")],
        ),
        (
            "sweep visual search (3 sim searchers)",
            ["sweep", str(tasks / "visual_search.toml")]
            + [a for k in ("parallel", "serial", "random") for a in ("--subject", f"sim:{k}")]
            + ["--trials", "20", "--out", str(d / "search")],
        ),
        (
            "score --bootstrap 30",
            [
                "score",
                str(d / "run"),
                str(d / "search"),
                "--bootstrap",
                "30",
                "--out",
                str(d / "scores"),
            ],
        ),
        ("report", ["report", str(d / "scores"), "--out", str(d / "report")]),
    ]


def demo_stages(commands):
    """The commands as the Makefile runs them: the two sweeps side by side, then one by one."""
    sweeps = [(n, a) for n, a in commands if a[0] == "sweep"]
    rest = [(n, a) for n, a in commands if a[0] != "sweep"]
    return [(" + ".join(n for n, _ in sweeps), [a for _, a in sweeps])] + [
        (n, [a]) for n, a in rest
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="demo folder (default: a temporary folder, removed)")
    ap.add_argument("--json", type=Path, default=ROOT / "bench-output" / "bench_demo.json")
    args = ap.parse_args()
    exe = Path(sys.executable).with_name("bayesobs")
    compiled_package()  # as after the install and a first run (PYTHONDONTWRITEBYTECODE aside)
    with tempfile.TemporaryDirectory(prefix="bayesobs-demo-") as tmp:
        d = args.out or Path(tmp)
        stages = {}
        total = 0.0
        print(f"make demo's commands into {d} ({load()})")
        for name, argvs in demo_stages(demo_commands(d)):
            cpu0, t0 = children_cpu(), time.perf_counter()
            procs = [
                subprocess.Popen(
                    [str(exe), *argv, *(["--no-progress"] if argv[0] != "report" else [])],
                    stdout=subprocess.DEVNULL,
                )
                for argv in argvs
            ]
            for proc, argv in zip(procs, argvs, strict=True):
                if proc.wait():
                    raise subprocess.CalledProcessError(proc.returncode, argv)
            wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
            stages[name] = {"wall_seconds": wall, "cpu_seconds": cpu}
            total += wall
            print(f"  {name:60s} {wall:7.1f} s wall  {cpu:7.1f} s CPU")
    peer = yardstick()
    line = result(
        "make demo (4 commands)",
        total,
        90.0,
        peer,
        "yardstick: scipy per-cell loop, 1 cell x 10 variants (tests/naive.py)",
    )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"result": line, "stages": stages}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
