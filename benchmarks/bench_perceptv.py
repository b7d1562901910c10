"""Benchmark the Percept-V library: generate and score the full protocol for one simulated subject.

Usage::

    .venv/bin/python benchmarks/bench_perceptv.py [--per-size 10] [--subject perceiver] [--seed 0]

Generates every implemented domain at sizes 1..20 with ``--per-size`` images
per size (10 = the paper's 200 per domain; 6,000 images for all 30), has the
simulated subject answer each, parses and scores the replies, and builds the
score tables.  Prints, per domain, the time spent generating, answering and
scoring (ms per image) and the subject's accuracy, then the totals, where the
time goes, and the extrapolation to 30 domains (the mean per-domain time of
the implemented ones times 30).  Target: the full 6,000 images under 10 minutes.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from common import result, yardstick

from bayesobs import perceptv as pv
from bayesobs.perceptv import score, sims


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-size", type=int, default=pv.IMAGES_PER_SIZE)
    ap.add_argument("--subject", default="perceiver", choices=sorted(sims.SIMS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--domains", nargs="*", default=None)
    args = ap.parse_args()

    fn = sims.SIMS[args.subject]
    rows, totals = [], {"generate": 0.0, "answer": 0.0, "score": 0.0}
    print(f"{'domain':24s} {'n':>4s} {'gen ms':>7s} {'ans ms':>7s} {'score ms':>8s}  accuracy")
    t_all = time.perf_counter()
    for domain in args.domains or sorted(pv.DOMAINS):
        rng = np.random.default_rng([args.seed, pv.ALL_DOMAINS.index(domain)])
        t = {"generate": 0.0, "answer": 0.0, "score": 0.0}
        dom_rows = []
        for d, size, seed in pv.protocol([domain], per_size=args.per_size, seed=args.seed):
            t0 = time.perf_counter()
            trial = pv.make_trial(d, size, seed)
            t1 = time.perf_counter()
            reply = fn(trial, rng)
            t2 = time.perf_counter()
            dom_rows.append(score.trial_row(trial, f"sim:{args.subject}", reply))
            t3 = time.perf_counter()
            t["generate"] += t1 - t0
            t["answer"] += t2 - t1
            t["score"] += t3 - t2
        n = len(dom_rows)
        acc = np.mean([r["correct"] for r in dom_rows])
        print(
            f"{domain:24s} {n:4d} {1000 * t['generate'] / n:7.1f} {1000 * t['answer'] / n:7.1f} "
            f"{1000 * t['score'] / n:8.2f}  {100 * acc:5.1f}%"
        )
        rows += dom_rows
        for k in totals:
            totals[k] += t[k]
    t0 = time.perf_counter()
    df = pd.DataFrame(rows)
    dom = score.domain_table(df)
    score.skill_table(dom)
    score.format_table(df)
    score.size_table(df)
    score.counting_table(dom)
    tables = time.perf_counter() - t0
    wall = time.perf_counter() - t_all
    n_dom = df.domain.nunique()
    print(f"\n{len(df)} images, {n_dom} domains, subject sim:{args.subject}: {wall:.1f} s wall")
    for k, v in totals.items():
        print(f"  {k:9s} {v:7.1f} s ({100 * v / wall:4.1f}%)")
    print(f"  tables    {tables:7.2f} s")
    full = wall / n_dom * 30 * (10 / args.per_size)
    print(f"extrapolated to 30 domains x 200 images: {full:.0f} s")
    result(
        "Percept-V, 30 domains x 200 images (library, extrapolated)",
        full,
        300.0,  # issue 32: 6,000 images under 5 minutes
        yardstick(),
        "yardstick: scipy per-cell loop, 1 cell x 10 variants (tests/naive.py)",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
