"""Measure adaptive sweeps (issue 53) against the fixed protocol on simulated observers.

Usage::

    .venv/bin/python benchmarks/bench_adaptive.py [--out bench-output/adaptive] [--trials 20] [--runs 6]

For each observer (the four shipped ``sim:`` kinds; noise variants through
``--trials``, fewer trials per run being noisier, and ``--sim-seed``), the BayesBench protocol is run
fixed (``--runs`` runs of every session type) and adaptively
(``sweep --adaptive``, the default rule) with the same seeds
(:func:`bayesobs.adaptive.compare_fixed`), both are scored the same way, and
the conclusions are compared: the factor winner per cell (P(f) > 0.5) and the
sign of Delta w_prior per ablation pair (the paper's s), on the conclusions the
fixed protocol decides (the factor's 68% interval excludes 0.5; |s_p| >= 0.9)
and on all of them; and whether the fixed protocol's NRMSE of each cell lies in
the adaptive sweep's interval. For reference, the fixed protocol's own first
``n`` runs (``n`` from 2 to one fewer than the cap: ``n`` of ``--runs`` of the
calls) are compared with all its runs the same way (how often its undecided
conclusions flip with more runs): the peer that adapts nothing. One RESULT
line per observer gives calls, input tokens, dollars at a model's price, their
share of the fixed protocol's and the agreement; the last lines give the
totals against the targets (>= 95% of the conclusions, <= 50% of the calls).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from bayesobs.adaptive import AdaptiveOptions, compare_fixed
from bayesobs.run.prices import load_prices
from bayesobs.scores import score
from bayesobs.stopping import conclusions, same_conclusions
from bayesobs.trials import read_trials

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
    ap.add_argument("--risk", type=float, default=AdaptiveOptions.risk)
    ap.add_argument("--price-of", default="gpt-4o", help="dollars at this model's price")
    args = ap.parse_args()
    price = load_prices().price(args.price_of)
    rule = AdaptiveOptions(risk=args.risk)
    observers = [(k, args.trials, args.sim_seed) for k in args.kinds.split(",")]
    totals = dict.fromkeys(("calls", "fixed_calls", "tokens", "fixed_tokens"), 0)
    hits = dict.fromkeys(("decided", "agree", "all", "agree_all", "cells", "covered"), 0)
    rows = []
    for kind, trials, seed in observers:
        name = f"sim:{kind} trials={trials} sim_seed={seed}"
        folder = args.out / f"{kind}-{trials}-{seed}"
        shutil.rmtree(folder, ignore_errors=True)
        r = compare_fixed(
            args.protocol, [f"sim:{kind}"], folder, rule, trials, args.runs, sim_seed=seed
        )
        for k, v in (
            ("calls", r["calls"]),
            ("fixed_calls", r["fixed_calls"]),
            ("tokens", r["input_tokens"]),
            ("fixed_tokens", r["fixed_input_tokens"]),
        ):
            totals[k] += v
        hits["decided"] += r["decided"]
        hits["agree"] += round(r["agreement"] * r["decided"])
        hits["all"] += r["conclusions"]
        hits["agree_all"] += round(r["agreement_all"] * r["conclusions"])
        hits["cells"] += r["accuracy_cells"]
        hits["covered"] += round(r["accuracy_covered"] * r["accuracy_cells"])
        fewer = _fewer_runs(folder / "fixed", args.runs, rule)
        self_all = fewer[args.runs - 1][0]
        usd = price.cost(r["input_tokens"], 0, 0), price.cost(r["fixed_input_tokens"], 0, 0)
        print(
            f"RESULT {name}: calls {r['calls']} of {r['fixed_calls']} "
            f"({r['calls'] / r['fixed_calls']:.0%}), input tokens {r['input_tokens']:,} of "
            f"{r['fixed_input_tokens']:,} (${usd[0]:,.2f} of ${usd[1]:,.2f} at {args.price_of}'s "
            f"input price), rounds {r['rounds']}; decided conclusions reached "
            f"{r['agreement']:.1%} of {r['decided']} (factor winners {r['factor_agreement']:.1%}, "
            f"BCS signs {r['sign_agreement']:.1%}); all conclusions {r['agreement_all']:.1%} of "
            f"{r['conclusions']} (the fixed protocol with one run fewer: {self_all:.1%}); fixed "
            f"NRMSE in the adaptive 68% interval {r['accuracy_covered']:.1%}; the fixed "
            f"protocol's first n of {args.runs} runs, all and decided "
            "conclusions: " + ", ".join(f"n={n} {a:.1%} {d:.1%}" for n, (a, d) in fewer.items()),
            flush=True,
        )
        rows.append({"observer": name, "fixed_first_runs": fewer, **r})
    share = totals["calls"] / totals["fixed_calls"]
    agreement = hits["agree"] / hits["decided"]
    print(
        f"RESULT all: calls {share:.1%} of the fixed protocol's, input tokens "
        f"{totals['tokens'] / totals['fixed_tokens']:.1%} | target <= 50% "
        f"({'met' if share <= 0.5 else 'NOT met'})"
    )
    print(
        f"RESULT all: the fixed protocol's decided conclusions reached {agreement:.1%} of "
        f"{hits['decided']} | target >= 95% ({'met' if agreement >= 0.95 else 'NOT met'})"
    )
    print(
        f"RESULT all: all conclusions {hits['agree_all'] / hits['all']:.1%} of {hits['all']}; "
        f"fixed NRMSE in the adaptive interval {hits['covered'] / hits['cells']:.1%} of "
        f"{hits['cells']} cells"
    )
    (args.out / "results.json").write_text(json.dumps(rows, indent=2, default=str))
    return 0


def _fewer_runs(folder: Path, runs: int, rule: AdaptiveOptions) -> dict[int, tuple[float, float]]:
    """Per ``n < runs``: the shares of the fixed protocol's conclusions, all and decided, its first ``n`` runs reach."""
    rows = read_trials(folder / "trials.jsonl")
    found = {}
    for n in range(runs, 1, -1):
        part = rows[rows["run"].astype(int) < n]
        s = score(part, bootstrap=rule.bootstrap, seed=rule.seed, probe=False)
        found[n] = conclusions(s.evidence, s.bcs, rule.sign_level)
    full = found.pop(runs)
    decided = [k for k, v in full.items() if v[1]]
    out = {}
    for n, c in sorted(found.items()):
        same = same_conclusions(full, c)
        out[n] = (sum(same.values()) / len(same), sum(same[k] for k in decided) / len(decided))
    return out


if __name__ == "__main__":
    raise SystemExit(main())
