"""Benchmark and check the visual-search tasks.

Usage::

    .venv/bin/python benchmarks/bench_search.py [--out bench-output] [--trials 100]

1. Stimulus generation and PNG rendering per image at the largest set size
   of each task.
2. The simulated searchers' perception (segmentation and features) per image.
3. The visual-search protocol (tasks/visual_search.toml: base, blur and context;
   cell and coordinate sessions) on sim:parallel, sim:serial and sim:random
   through the CLI in a subprocess: wall time and trials per second; then
   ``bayesobs score`` on it, and the recovered set-size effects (cell mode):
   the parallel searcher flat, the serial one falling, the random one at 25%.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd
from common import result, time_cli, yardstick

from bayesobs.search.subject import segment_items
from bayesobs.stimuli import from_png, get_task

ROOT = Path(__file__).resolve().parents[1]
LARGEST = {
    "circle_sizes": ("small", 49),
    "two_among_five": ("shape_colour_conjunctive", 99),
    "light_priors": ("bottom", 17),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("bench-output"))
    ap.add_argument("--trials", type=int, default=100)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    print("per image at the largest set size (ms): generate, render PNG, perceive")
    for task, (cond, k) in LARGEST.items():
        t = get_task(task)
        t0 = time.perf_counter()
        stims = t.generate(
            np.random.default_rng(0), k, k, 20, {"search": cond, "border_margin": 30}
        )
        t1 = time.perf_counter()
        pngs = [t.render_png(s) for s in stims]
        t2 = time.perf_counter()
        for p in pngs:
            segment_items(from_png(p), task == "light_priors")
        t3 = time.perf_counter()
        print(
            f"  {task:<15} k={k:<3} {1e3 * (t1 - t0) / 20:6.1f} {1e3 * (t2 - t1) / 20:6.1f} {1e3 * (t3 - t2) / 20:6.1f}"
        )

    run = args.out / "search_run"
    shutil.rmtree(run, ignore_errors=True)
    wall, _ = time_cli(
        "sweep",
        str(ROOT / "tasks" / "visual_search.toml"),
        "--subject",
        "sim:parallel",
        "--subject",
        "sim:serial",
        "--subject",
        "sim:random",
        "--trials",
        str(args.trials),
        "--out",
        str(run),
        "--no-progress",
    )
    n = sum(1 for _ in (run / "trials.jsonl").open())
    print(
        f"\nsweep tasks/visual_search.toml, 3 searchers, --trials {args.trials}: {n} trials in {wall:.1f} s "
        f"({n / wall:.0f} trials/s)"
    )
    sweep_wall = wall
    wall, _ = time_cli("score", str(run), "--out", str(run / "scores"), "--no-progress")
    print(f"score: {wall:.1f} s")
    result(
        f"sweep visual_search.toml, 3 searchers, --trials {args.trials}",
        sweep_wall,
        None,
        yardstick(),
        "yardstick: scipy per-cell loop, 1 cell x 10 variants (tests/naive.py)",
    )
    s = pd.read_csv(run / "scores" / "search.csv")
    s = s[(s["ablation"] == "base") & (s["answer"] == "cell")]
    pd.set_option("display.width", 200)
    print("\nset-size effect, base condition, cell answers (n trials per row):")
    print(
        s[
            ["subject", "task", "condition", "n", "accuracy", "r", "p_bonferroni", "logistic_slope"]
        ].to_string(index=False, float_format=lambda v: f"{v:.3g}")
    )
    bias = pd.read_csv(run / "scores" / "search_bias.csv", dtype={"cell": str})
    rnd = bias[(bias["subject"] == "sim:random") & (bias["answer"] == "cell")]
    print(
        f"\nsim:random selection rates: {rnd['selected'].min():.3f}-{rnd['selected'].max():.3f}, "
        f"invalid {rnd['invalid'].max():.3f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
