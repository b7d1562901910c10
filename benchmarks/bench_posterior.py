"""Benchmark posterior fits (NumPyro NUTS on the CPU).

Usage::

    .venv/bin/python benchmarks/bench_posterior.py [--out bench-output]

1. One cell of 120 trials, all ten variants, 4 chains x (500 warm-up + 500 draws).
2. The hierarchical model over 9 subjects (120 trials each), 4 chains x (500 + 500):
   the static observer alone, then all ten variants.
Wall times include JIT compilation.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from bayesobs.observers import simulate

ROOT = Path(__file__).resolve().parents[1]


def cell(rng, w, subject="s"):
    rows = []
    for s, (lo, hi) in enumerate([(0.1, 0.5), (0.3, 0.7), (0.5, 0.9)]):
        x = rng.uniform(lo, hi, 40)
        rows.append(pd.DataFrame({"subject": subject, "session": f"s{s}", "stimulus": x,
                                  "response": simulate("static", {"w_prior": w, "sigma": 0.04}, x, rng=rng)}))  # fmt: skip
    return pd.concat(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "bench-output")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    warnings.simplefilter("ignore", FutureWarning)
    from bayesobs.posterior import fit_posterior

    rng = np.random.default_rng(0)
    res = {}
    t = time.perf_counter()
    _, loo, _, notes = fit_posterior(cell(rng, 0.4))
    res["single_cell_10_variants_s"] = round(time.perf_counter() - t, 1)
    print(f"one cell, 120 trials, 10 variants, 4 x (500 + 500): {res['single_cell_10_variants_s']} s "
          f"(best by LOO: {loo.sort_values('rank')['variant'].iat[0]}; {len(notes)} diagnostic warnings)")  # fmt: skip
    subjects = pd.concat([cell(rng, w, f"s{i}") for i, w in enumerate(np.linspace(0.2, 0.6, 9))])
    t = time.perf_counter()
    fit_posterior(subjects, variants=["static"], hierarchical=True)
    res["hierarchical_9_subjects_static_s"] = round(time.perf_counter() - t, 1)
    print(f"hierarchical, 9 subjects, static: {res['hierarchical_9_subjects_static_s']} s")
    t = time.perf_counter()
    _, _, _, notes = fit_posterior(subjects, hierarchical=True)
    res["hierarchical_9_subjects_10_variants_s"] = round(time.perf_counter() - t, 1)
    print(f"hierarchical, 9 subjects, all 10 variants: {res['hierarchical_9_subjects_10_variants_s']} s "
          f"({len(notes)} diagnostic warnings)")  # fmt: skip
    (args.out / "bench_posterior.json").write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
