"""Benchmark: `bayesobs fit --bootstrap 30` at BayesBench scale vs the straightforward way.

Usage::

    .venv/bin/python benchmarks/bench_fit.py [--sample-cells 4] [--out bench-output]

1. Writes the BayesBench-scale synthetic data set (9 subjects, 783 cells,
   3 sessions x 40 trials: 93,960 trials) to ``OUT/bayesbench_scale.parquet``.
2. Times ``bayesobs fit OUT/bayesbench_scale.parquet --bootstrap 30`` in a
   subprocess (wall time, peak resident memory of the child).
3. Times the straightforward way on a sample of cells: per cell and variant,
   ``scipy.optimize.minimize`` (L-BFGS-B) over all parameters including sigma,
   5 random starts, a Python-loop Kalman filter (``tests/naive.py``), and
   extrapolates to the 243,000 variant fits of the full job.
4. Compares the two fits' log-likelihoods on the sample.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from common import bayesbench_scale, result, time_cli  # noqa: E402
from naive import naive_fit  # noqa: E402

from bayesobs.fits.observers import VARIANT_NAMES  # noqa: E402
from bayesobs.trials import CELL_KEYS, normalize_trials  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "bench-output")
    ap.add_argument("--sample-cells", type=int, default=4)
    ap.add_argument("--bootstrap", type=int, default=30)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    trials, data = bayesbench_scale(args.out)
    n_cells = trials.groupby(list(CELL_KEYS)).ngroups
    print(f"data: {len(trials)} trials, {n_cells} cells -> {data}")
    wall, peak_mib = time_cli(
        "fit", str(data), "--out", str(args.out / "fit"), "--bootstrap", str(args.bootstrap)
    )
    n_fits = n_cells * (1 + args.bootstrap) * len(VARIANT_NAMES)
    print(
        f"bayesobs fit --bootstrap {args.bootstrap}: {wall:.2f} s wall, peak {peak_mib:.0f} MiB, {n_fits} variant fits"
    )

    fits = pd.read_csv(args.out / "fit" / "fits.csv")
    norm = normalize_trials(trials)
    rng = np.random.default_rng(0)
    keys = norm[list(CELL_KEYS)].drop_duplicates().reset_index(drop=True)
    sample = keys.iloc[rng.choice(len(keys), args.sample_cells, replace=False)]
    naive_seconds, rel_diffs, ours_higher = [], [], 0
    for _, key in sample.iterrows():
        cell = norm.loc[(norm[list(CELL_KEYS)] == key.to_numpy()).all(axis=1)]
        x = cell["stimulus"].to_numpy()
        y = cell["response"].to_numpy()
        run = (cell["session"] + "/" + cell["run"].astype(str)).to_numpy()
        eps = 1e-3 * x.max()
        ours = fits.loc[(fits[list(CELL_KEYS)] == key.to_numpy()).all(axis=1)].set_index("variant")[
            "loglik"
        ]
        for name in VARIANT_NAMES:
            t = time.perf_counter()
            ll, _ = naive_fit(name, x, y, run, eps, starts=5, rng=1)
            naive_seconds.append(time.perf_counter() - t)
            if np.isfinite(ours[name]):
                rel_diffs.append(abs(ours[name] - ll) / abs(ll))
                ours_higher += ours[name] > ll + 1e-6 * abs(ll)
    per_fit = float(np.mean(naive_seconds))
    naive_total = per_fit * n_fits
    speedup = naive_total / wall
    agree = int(np.sum(np.array(rel_diffs) <= 1e-6))
    print(
        f"straightforward way: {per_fit * 1e3:.0f} ms per variant fit on {len(naive_seconds)} sampled fits "
        f"-> {naive_total / 3600:.1f} h extrapolated for {n_fits} fits; speed-up {speedup:.0f}x"
    )
    print(
        f"log-likelihood agreement on the sample: {agree}/{len(rel_diffs)} within 1e-6 relative "
        f"(max rel diff {max(rel_diffs):.2e}); bayesobs higher in {ours_higher}, lower in "
        f"{sum(d > 1e-6 for d in rel_diffs) - ours_higher}"
    )
    line = result(
        f"bayesobs fit --bootstrap {args.bootstrap} (BayesBench scale)",
        wall,
        2.5,
        naive_total,
        f"scipy per-cell loop (tests/naive.py, {len(naive_seconds)} sampled fits extrapolated "
        f"to {n_fits})",
    )
    out = {
        "result": line,
        "trials": len(trials),
        "cells": n_cells,
        "bootstrap": args.bootstrap,
        "variant_fits": n_fits,
        "wall_seconds": round(wall, 2),
        "peak_rss_mib": round(peak_mib),
        "naive_seconds_per_fit": per_fit,
        "naive_extrapolated_hours": naive_total / 3600,
        "speedup": speedup,
        "sample_fits": len(rel_diffs),
        "agree_within_1e-6": agree,
        "max_rel_diff": max(rel_diffs),
        "bayesobs_higher": int(ours_higher),
    }
    (args.out / "bench_fit.json").write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
