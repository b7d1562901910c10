"""Measure adaptive sweeps (issue 53) against the fixed protocol on simulated observers.

Usage::

    .venv/bin/python benchmarks/bench_adaptive.py [--out bench-output/adaptive] [--trials 20] [--runs 6]

For each observer (the four shipped ``sim:`` kinds; noise variants through
``--trials``, fewer trials per run being noisier, and ``--sim-seed``), the BayesBench protocol is run
fixed (``--runs`` runs of every session type) and adaptively
(``sweep --adaptive``, the default rule) with the same seeds
(:func:`bayesobs.adaptive.compare_fixed`), both are scored the same way, and
the conclusions are compared: the factor winner per cell (P(f) > 0.5) and the
sign of Delta w_prior per ablation pair (the paper's s). One RESULT line per
observer gives calls, input tokens, their share of the fixed protocol's and
the agreement; the last lines give the totals against the targets (>= 95% of
the conclusions, <= 50% of the calls). Money: tokens times a model's price
(simulated observers pay nothing).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from bayesobs.adaptive import compare_fixed

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("bayesian", "antibayes", "kalman", "linear")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "bench-output" / "adaptive")
    ap.add_argument("--protocol", default=str(ROOT / "tasks" / "bayesbench.toml"))
    ap.add_argument("--trials", type=int, default=20, help="trials per run (default 20)")
    ap.add_argument(
        "--runs", type=int, default=6, help="runs per session type, the cap (default 6)"
    )
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--sim-seed", type=int, default=0, help="subject seed (noise variants)")
    args = ap.parse_args()
    observers = [(k, args.trials, args.sim_seed) for k in args.kinds.split(",")]
    totals = {"calls": 0, "fixed_calls": 0, "agree": 0, "conclusions": 0}
    rows = []
    for kind, trials, seed in observers:
        name = f"sim:{kind} trials={trials} sim_seed={seed}"
        folder = args.out / f"{kind}-{trials}-{seed}"
        shutil.rmtree(folder, ignore_errors=True)
        r = compare_fixed(
            args.protocol, [f"sim:{kind}"], folder, trials=trials, runs=args.runs, sim_seed=seed
        )
        agree = round(r["agreement"] * r["conclusions"])
        for k, v in (("calls", r["calls"]), ("fixed_calls", r["fixed_calls"]), ("agree", agree)):
            totals[k] += v
        totals["conclusions"] += r["conclusions"]
        print(
            f"RESULT {name}: calls {r['calls']} of {r['fixed_calls']} "
            f"({r['calls'] / r['fixed_calls']:.0%}), input tokens {r['input_tokens']:,} of "
            f"{r['fixed_input_tokens']:,}, rounds {r['rounds']}; agreement {r['agreement']:.1%} "
            f"of {r['conclusions']} (factor winners {r['factor_agreement']:.1%}, "
            f"BCS signs {r['sign_agreement']:.1%})",
            flush=True,
        )
        rows.append({"observer": name, **r})
    share = totals["calls"] / totals["fixed_calls"]
    agreement = totals["agree"] / totals["conclusions"]
    print(
        f"RESULT all: calls {share:.1%} of the fixed protocol's | target <= 50% "
        f"({'met' if share <= 0.5 else 'NOT met'})"
    )
    print(
        f"RESULT all: agreement {agreement:.1%} of {totals['conclusions']} conclusions | "
        f"target >= 95% ({'met' if agreement >= 0.95 else 'NOT met'})"
    )
    (args.out / "results.json").write_text(json.dumps(rows, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
