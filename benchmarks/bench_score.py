"""Benchmark: `bayesobs score --bootstrap 30` on the BayesBench-scale data set.

Usage::

    .venv/bin/python benchmarks/bench_score.py [--out bench-output]

Writes the same synthetic data set as ``bench_fit.py`` (9 subjects, 783 cells,
93,960 trials) and times the ``score`` command in a subprocess (wall time and
peak resident memory of the child), then times the stages in-process.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from common import bayesbench_scale, result, time_cli, yardstick

from bayesobs.fits.fitting import fit_batch
from bayesobs.fits.observers import VARIANT_NAMES
from bayesobs.scores import accuracy_batch, cue_probe_table, with_baseline
from bayesobs.scores.cue import cue_batch
from bayesobs.trials import normalize_trials

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "bench-output")
    ap.add_argument("--bootstrap", type=int, default=30)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    trials, data = bayesbench_scale(args.out)
    wall, peak = time_cli(
        "score", str(data), "--out", str(args.out / "score"), "--bootstrap", str(args.bootstrap)
    )
    print(
        f"bayesobs score --bootstrap {args.bootstrap}: {wall:.2f} s wall, peak {peak:.0f} MiB ({len(trials)} trials)"
    )

    t = with_baseline(normalize_trials(trials))
    stages = {}
    for name, fn in (
        ("fits (10 variants x 31 datasets per cell)", lambda: fit_batch(t, args.bootstrap, 0)),
        ("accuracy", lambda: accuracy_batch(t, args.bootstrap, 0)),
        ("cue combination", lambda: cue_batch(t, args.bootstrap, 0)),
        ("random-forest probe (base condition)", lambda: cue_probe_table(t, 0)),
    ):
        s = time.perf_counter()
        fn()
        stages[name] = time.perf_counter() - s
        print(f"  {name}: {stages[name]:.2f} s")
    # peer: the per-cell scipy loop (tests/naive.py) timed on 2 cells x 10 variants here,
    # extrapolated to the fits score makes (pooled and stratified bootstrap, 1 + B each)
    n_cells = len(t.groupby(["subject", "task", "modality", "condition"]))
    per_fit = yardstick(cells=2) / (2 * len(VARIANT_NAMES))  # one start per fit
    n_fits = 2 * n_cells * (1 + args.bootstrap) * len(VARIANT_NAMES)
    line = result(
        f"bayesobs score --bootstrap {args.bootstrap} (BayesBench scale)",
        wall,
        5.0,
        per_fit * n_fits,
        f"scipy per-cell loop (tests/naive.py, 20 fits timed, extrapolated to {n_fits})",
    )
    (args.out / "bench_score.json").write_text(
        json.dumps(
            {
                "result": line,
                "wall_seconds": round(wall, 2),
                "peak_rss_mib": round(peak),
                "stages": stages,
            },
            indent=2,
        )
        + "\n"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
