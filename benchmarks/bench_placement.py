"""Measure QUEST+ level placement (issue 53) against the fixed protocol's uniform levels on simulated observers.

Usage::

    nice .venv/bin/python benchmarks/bench_placement.py [--out bench-output/placement] [--trials 5] [--runs 20]

For each right/wrong observer (visual search ``sim:serial``, ``sim:parallel``,
``sim:graded`` and ``sim:steep``, whose psychometric functions are known: normal ones of
threshold 24 and SD 6 (broad) and 2 (steep),
Tunnel Vision circuits ``sim:colourcue`` and ``sim:tracer``, Percept-V
``sim:sloppy``; several subject seeds), one session is run fixed (``--runs`` runs of ``--trials``
trials at the protocol's uniform levels: N = 100 trials) and adaptively
(:func:`bayesobs.adaptive.adaptive_sweep` with the same seeds: two uniform
runs, then one run of placed levels per round; a session that stops after
round 1 asked no placed level: its line says so) with ``place_width`` set to the
fixed protocol's threshold interval width, so that the adaptive sweep stops
when it has the fixed protocol's precision (or at N).  Both are fitted with
:func:`bayesobs.scores.psychometric_bayes.fit_bayes` (what ``bayesobs
psychometric`` reports).  One RESULT line per observer gives the trials and the
95% threshold intervals of both; the last lines give the total against the
target (the same threshold precision with at most 50% of the trials) and how
many estimates agree (each inside the other's interval).  Beside them, the
peer that costs no placement: the fixed protocol's first half of the runs
(N/2 trials at its uniform levels), fitted alike.  ``--of`` and
``--batch`` measure the other choices of :func:`bayesobs.placement.choose_levels`.
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import statistics
from pathlib import Path

from bayesobs import placed, placement
from bayesobs.adaptive import AdaptiveOptions, adaptive_sweep
from bayesobs.run.runner import sweep
from bayesobs.scores.psychometric import psychometric_levels
from bayesobs.scores.psychometric_bayes import fit_bayes
from bayesobs.search.subject import GRADED_THRESHOLD
from bayesobs.trials import read_trials

ROOT = Path(__file__).resolve().parents[1]
TRUTH = {"sim:graded": GRADED_THRESHOLD, "sim:steep": GRADED_THRESHOLD}  # known thresholds
EDGE = " (the fixed fit's threshold lies outside the levels' range: its prior binds, not the data)"
SPEC = """description = "placement benchmark: {task} {session}"
task = "{task}"
seed = {seed}
trials = 10
modalities = ["image"]
conditions = ["base"]
[ablations]
context = 0
[[sessions]]
name = "{session}"
range = [{low}, {high}]
{option}
"""
# (name, task, session options, range, subject)
OBSERVERS = (
    ("search medium serial", "circle_sizes", 'search = "medium"\nanswer = "cell"', (0, 49), "sim:serial"),
    ("search two_among_five serial", "two_among_five", 'answer = "cell"', (0, 49), "sim:serial"),
    ("search medium graded", "circle_sizes", 'search = "medium"\nanswer = "cell"', (0, 49), "sim:graded"),
    ("search two_among_five graded", "two_among_five", 'answer = "cell"', (0, 49), "sim:graded"),
    ("search medium steep", "circle_sizes", 'search = "medium"\nanswer = "cell"', (0, 49), "sim:steep"),
    ("search two_among_five steep", "two_among_five", 'answer = "cell"', (0, 49), "sim:steep"),
    ("search medium parallel", "circle_sizes", 'search = "medium"\nanswer = "cell"', (0, 49), "sim:parallel"),
    ("tunnel circuits colourcue", "circuits", 'variant = "standard"', (4, 10), "sim:colourcue"),
    ("tunnel circuits tracer", "circuits", 'variant = "standard"', (4, 10), "sim:tracer"),
    ("perceptv counting_circles sloppy", "percept_v", 'variant = "counting_circles"', (1, 20), "sim:sloppy"),
)  # fmt: skip


def inside(r: dict, rng) -> bool:
    """Whether the fixed fit's threshold lies inside the session's level range."""
    return rng[0] <= r["fixed"]["threshold"] <= rng[1]


def fitted(folder: Path, runs: int | None = None) -> dict:
    """Trials, those at placed levels and the Bayesian threshold fit of an experiment folder's group (its first ``runs``)."""
    rows = read_trials(folder / "trials.jsonl")
    rows = rows if runs is None else rows[rows["run"] < runs]
    t = psychometric_levels(rows)
    fit = fit_bayes(t["x"], t["k"], t["n"], t["guess"])
    placed = int((rows["distribution"] == "placed").sum())
    width = fit["threshold_hi"] - fit["threshold_lo"]
    return {"trials": int(t["n"].sum()), "placed": placed, **fit, "width95": width}


def one(args, name, task, option, rng, subject, seed) -> dict:
    """The fixed protocol and the adaptive sweep of one observer: their fits and the adaptive stops."""
    folder = args.out / f"{name.replace(' ', '-')}-{seed}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    spec = folder / "spec.toml"
    spec.write_text(
        SPEC.format(task=task, session="s", seed=700 + seed, low=rng[0], high=rng[1], option=option)
    )
    kw = dict(trials=args.trials, runs=args.runs)
    sweep(spec, [subject], folder / "fixed", sim_seed=seed, **kw)
    fixed = fitted(folder / "fixed")
    options = AdaptiveOptions(place_width=min(1.0, fixed["width95"] / (rng[1] - rng[0])))
    res = adaptive_sweep(spec, [subject], folder / "adaptive", options, sim_seed=seed, **kw)
    half = fitted(folder / "fixed", args.runs // 2)
    return {"fixed": fixed, "placed": fitted(folder / "adaptive"), "half": half, "stops": res.stops}


def _truth(subject: str, r: dict) -> str:
    """Whether an observer's known threshold lies in each design's interval."""
    if subject not in TRUTH:
        return ""
    t = TRUTH[subject]
    says = [
        f"{d} {'covers' if r[d]['threshold_lo'] <= t <= r[d]['threshold_hi'] else 'MISSES'}"
        for d in ("fixed", "placed")
    ]
    return f"; the true threshold {t:g}: {', '.join(says)}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "bench-output" / "placement")
    ap.add_argument("--trials", type=int, default=5, help="trials per run (default 5)")
    ap.add_argument("--runs", type=int, default=20, help="runs of the fixed protocol (default 20)")
    ap.add_argument("--seeds", default="0,1,2", help="subject seeds (default 0,1,2)")
    ap.add_argument("--of", default="threshold_width", choices=placement.OF)
    ap.add_argument("--batch", default="sample", choices=placement.BATCH)
    ap.add_argument("--observers", default="", help="names containing one of these (commas) only")
    args = ap.parse_args()
    placed.choose_levels = functools.partial(placement.choose_levels, of=args.of, batch=args.batch)
    rows, agree = [], 0
    for name, task, option, rng, subject in OBSERVERS:
        if not any(o in name for o in args.observers.split(",")):
            continue
        for seed in map(int, args.seeds.split(",")):
            r = one(args, name, task, option, rng, subject, seed)
            f, p, h = r["fixed"], r["placed"], r["half"]
            ok = p["width95"] <= f["width95"] + 1e-9
            same = (
                f["threshold_lo"] <= p["threshold"] <= f["threshold_hi"]
                and p["threshold_lo"] <= f["threshold"] <= p["threshold_hi"]
            )
            agree += same
            print(
                f"RESULT {name} seed {seed}: fixed {f['trials']} trials, threshold "
                f"{f['threshold']:.3g} [{f['threshold_lo']:.3g}, {f['threshold_hi']:.3g}] "
                f"(width {f['width95']:.3g}); adaptive {p['trials']} trials "
                f"({p['trials'] / f['trials']:.0%}, {p['placed']} at placed levels), "
                f"threshold {p['threshold']:.3g} "
                f"[{p['threshold_lo']:.3g}, {p['threshold_hi']:.3g}] (width {p['width95']:.3g}); "
                f"precision {'reached' if ok else 'NOT reached'}; the fixed protocol's first "
                f"{h['trials']} trials: width {h['width95']:.3g}; estimates "
                f"{'agree' if same else 'DIFFER'}{'' if inside(r, rng) else EDGE}{_truth(subject, r)}",
                flush=True,
            )
            rows.append(
                {"observer": name, "seed": seed, "ok": ok, "inside": inside(r, rng), **r}
                | {"half_ok": h["width95"] <= f["width95"] + 1e-9}
                | {"known": subject in TRUTH}
            )
    inside_rows = [r for r in rows if r["inside"]]
    known = [r for r in rows if r["known"]]
    parts = (("all", rows), ("threshold inside the range", inside_rows), ("known truth", known))
    parts += tuple(
        (f"sim:{kind} alone", [r for r in rows if r["observer"].endswith(kind)])
        for kind in ("graded", "steep")
    )
    for label, part in parts:
        spent = sum(r["placed"]["trials"] for r in part)
        full = sum(r["fixed"]["trials"] for r in part)
        reached = sum(r["ok"] for r in part)
        met = spent <= 0.5 * full and reached == len(part)
        if not part:
            continue
        median, half = (
            statistics.median(r[d]["width95"] / r["fixed"]["width95"] for r in part)
            for d in ("placed", "half")
        )
        print(
            f"RESULT {label} ({args.of}, {args.batch}): {spent} of {full} trials "
            f"({spent / max(full, 1):.1%}), the fixed precision reached by {reached} of "
            f"{len(part)} | target: the same precision with <= 50% of the trials "
            f"({'met' if met else 'NOT met'}); median width / the fixed width: adaptive "
            f"{median:.2f}, the fixed protocol's first half {half:.2f} (reached by "
            f"{sum(r['half_ok'] for r in part)})"
        )
    print(
        f"RESULT all: estimates agree (each inside the other's interval) in {agree} of {len(rows)}"
    )
    early = sum(r["placed"]["placed"] == 0 for r in rows)
    print(f"RESULT all: {early} of {len(rows)} stopped after round 1, before any placed level")
    (args.out / "results.json").write_text(json.dumps(rows, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
