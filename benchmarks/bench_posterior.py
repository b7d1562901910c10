"""Benchmark posterior fits (NumPyro NUTS on the CPU).

Usage::

    .venv/bin/python benchmarks/bench_posterior.py [--out bench-output]

    .venv/bin/python benchmarks/bench_posterior.py --scale [--cells 783] [--check-cells 3]
        [--warmup 500 --draws 500] [--variants static,kalman] [--processes N]
        [--scheduler ADDRESS | --workers 2]

1. One cell of 120 trials, all ten variants, 4 chains x (500 warm-up + 500 draws).
2. The hierarchical model over 9 subjects (120 trials each), 4 chains x (500 + 500):
   the static observer alone, then all ten variants.
3. ``--scale``: the BayesBench-scale data set (783 cells x 10 variants, or a
   seeded sample of ``--cells`` cells, extrapolated linearly to 783:
   an upper bound, as the compile time does not grow with the cells),
   batched, 4 chains x (500 + 500), keeping what ``fit --method posterior``
   keeps (the tables, its ``.nc`` files written to a temporary folder,
   the static observer's draws in memory); then per-cell fits (NumPyro
   ``MCMC``) of ``--check-cells`` sampled cells, all ten variants, and the
   share of posterior means within 2 Monte Carlo standard errors (combined,
   of the two fits).  ``--processes N`` is ``fit_posterior``'s ``workers``
   (default: the library's, two processes on two cores at this scale).
   ``--workers N`` runs the batched fit again in one process and on a Dask
   ``LocalCluster`` of N one-thread workers with their thread caps
   (:func:`bayesobs.distributed.local_cluster`), states both speed-ups over
   one process and checks that the tables are identical.
Wall times include JIT compilation; CPU times include the worker processes
the fit starts (not the Dask workers); the JAX device and the peak resident
memory are reported twice: the bound (this process's peak plus the largest
worker's peak times the workers, ``ru_maxrss``, each counting the shared
libraries) and the peak of what this process and its workers held together,
sampled (:class:`common.MemoryPeak`: PSS, a shared page counted once; the
sampler keeps to 2% of a core, and its time is printed).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import resource
import shutil
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from common import MemoryPeak, result, yardstick

from bayesobs.fits.observers import VARIANT_NAMES, simulate

ROOT = Path(__file__).resolve().parents[1]


def cell(rng, w, subject="s"):
    rows = []
    for s, (lo, hi) in enumerate([(0.1, 0.5), (0.3, 0.7), (0.5, 0.9)]):
        x = rng.uniform(lo, hi, 40)
        rows.append(
            pd.DataFrame(
                {
                    "subject": subject,
                    "session": f"s{s}",
                    "stimulus": x,
                    "response": simulate("static", {"w_prior": w, "sigma": 0.04}, x, rng=rng),
                }
            )
        )
    return pd.concat(rows)


def scale(args) -> dict:
    """The BayesBench-scale case (see the module docstring)."""
    import arviz as az
    import jax

    from bayesobs.fits.posterior import fit_posterior, kept_fit
    from bayesobs.fits.synthetic import simulated_trials
    from bayesobs.trials import CELL_KEYS, normalize_trials

    keys = list(CELL_KEYS)
    trials = normalize_trials(simulated_trials(n_subjects=9, trials_per_session=40, seed=0))
    cells = trials[keys].drop_duplicates().reset_index(drop=True)
    n_all = len(cells)
    rng = np.random.default_rng(0)
    pick = cells.iloc[np.sort(rng.choice(n_all, min(args.scale_cells, n_all), replace=False))]
    sub = trials.merge(pick, on=keys)
    dev = jax.devices()[0]
    kw = {"chains": 4, "warmup": args.warmup, "draws": args.draws, "variants": args.variants}
    nv = len(args.variants)
    res = {
        "device": f"{dev.platform}:{dev.device_kind}",
        "cells": len(pick),
        "cells_all": n_all,
        "variants": nv,
        **kw,
    }
    warnings.simplefilter("ignore", RuntimeWarning)  # counted below instead
    summ, loo, idatas, notes, t = timed(
        sub, kw, keep_files=True, workers=args.processes, scheduler=args.scheduler
    )
    wall = t["wall_s"]
    workers = 0 if t["cpu_children_s"] == 0 else (args.processes or 2)  # processes it started
    res["peak_rss_total_gib"] = round(t["peak_rss_gib"] + t["peak_rss_child_gib"] * workers, 2)
    res.update(
        processes=args.processes or "default",
        **t,
        load_avg_1min=os.getloadavg()[0],
        extrapolated_all_cells_s=round(wall * n_all / len(pick), 1),
        fits=len(loo),
        diagnostic_notes=len(notes),
    )
    print(
        f"BayesBench scale, {len(pick)} of {n_all} cells x {nv} variants, 4 x ({args.warmup} + {args.draws}) "
        f"on {res['device']}, processes {res['processes']}: {wall:.1f} s wall, "
        f"{t['cpu_s']:.1f} s CPU ({t['cpu_children_s']:.1f} s of it in worker processes), "
        f"peak RSS {t['peak_rss_gib']:.2f} GiB here + {t['peak_rss_child_gib']:.2f} GiB per worker, "
        f"load {res['load_avg_1min']:.1f} ({len(loo)} fits, {len(notes)} diagnostic notes); "
        f"x {n_all}/{len(pick)} -> {res['extrapolated_all_cells_s'] / 60:.1f} min for all cells "
        f"(target <= 8 min, <= 4 GiB)"
    )
    if args.workers:
        from bayesobs.distributed import local_cluster

        one = wall
        if args.processes != 1:  # the speed-up is stated against one process
            s1, l1, _, _, t1 = timed(sub, kw, workers=1)
            one = t1["wall_s"]
            res.update(
                one_process_wall_s=one,
                one_process_cpu_s=t1["cpu_s"],
                processes_speedup=round(one / wall, 2),
                one_process_identical_tables=bool(summ.equals(s1) and loo.equals(l1)),
            )
            print(
                f"one process: {one} s wall, {t1['cpu_s']} s CPU; the default's speed-up "
                f"x{res['processes_speedup']}; tables identical: {res['one_process_identical_tables']}"
            )
        with local_cluster(n_workers=args.workers, threads_per_worker=1) as cluster:
            s2, l2, _, _, t2 = timed(sub, kw, scheduler=cluster.scheduler_address)
        res["dask_wall_s"] = t2["wall_s"]
        same = summ.equals(s2) and loo.equals(l2)
        res.update(
            dask_workers=args.workers,
            dask_speedup=round(one / res["dask_wall_s"], 2),
            dask_identical_tables=bool(same),
        )
        print(
            f"Dask LocalCluster ({args.workers} one-thread workers, thread caps): "
            f"{res['dask_wall_s']} s against {one:.1f} s in one process, "
            f"speed-up x{res['dask_speedup']}; tables identical: {same}"
        )
    if args.check_cells:
        check = pick.iloc[rng.choice(len(pick), min(args.check_cells, len(pick)), replace=False)]
        t = time.perf_counter()
        _, _, ref, _ = fit_posterior(sub.merge(check, on=keys), batched=False, **kw)
        res["per_cell_check_s"] = round(time.perf_counter() - t, 1)
        zs = []
        for key, idata in ref.items():
            a = az.summary(kept_fit(idatas[key]), round_to="none")
            b = az.summary(idata, round_to="none")
            zs += list((a["mean"] - b["mean"]).abs() / np.hypot(a["mcse_mean"], b["mcse_mean"]))
        zs = np.array(zs)
        res.update(
            check_cells=len(check),
            check_fits=len(ref),
            check_params=len(zs),
            within_2_mcse=float(np.mean(zs < 2)),
            within_3_mcse=float(np.mean(zs < 3)),
            max_z=float(zs.max()),
        )
        print(
            f"per-cell MCMC fits of {len(check)} cells ({len(ref)} fits, {res['per_cell_check_s']} s): "
            f"posterior means within 2 MCSE: {res['within_2_mcse']:.1%} of {len(zs)} parameters, "
            f"within 3: {res['within_3_mcse']:.1%} (largest |diff|/MCSE {zs.max():.2f})"
        )
        # the peer: NumPyro's own MCMC cell by cell (the per-cell path), timed on the check
        # cells in this run and extrapolated to every cell (its compile time included)
        res["result"] = result(
            f"posterior, {n_all} cells x {nv} variants, 4 x ({args.warmup} + {args.draws})"
            + ("" if len(pick) == n_all else f" (extrapolated from {len(pick)} cells)"),
            res["extrapolated_all_cells_s"],
            480.0,
            res["per_cell_check_s"] * n_all / len(check),
            f"NumPyro MCMC cell by cell ({len(check)} cells timed, x {n_all}/{len(check)})",
        )
    gb = res["peak_rss_total_gib"] * 1024**3 / 1e9
    print(
        f"peak resident memory, bound: {res['peak_rss_total_gib']:.2f} GiB = {gb:.2f} GB (this "
        f"process's peak + its largest worker's peak x workers, shared libraries counted in each; "
        f"target <= 4 GB: {'met' if gb <= 4 else 'NOT met'})"
    )
    together = res["peak_pss_together_gib"] * 1024**3 / 1e9
    print(
        f"peak resident memory, together: {res['peak_pss_together_gib']:.2f} GiB = "
        f"{together:.2f} GB PSS ({res['peak_rss_together_gib']:.2f} GiB RSS) of this process and "
        f"its workers at one moment ({res['memory_samples']} samples, every "
        f"{res['memory_interval_s']} s or {1 / res['memory_max_share']:.0f} times a sample's own "
        f"time, {res['memory_sampling_s']} s of sampling in all; a page shared by n "
        f"processes counted 1/n in each; target <= 4 GB: {'met' if together <= 4 else 'NOT met'})"
    )
    return res


def timed(sub, kw, keep_files=False, **options):
    """``fit_posterior`` of ``sub`` as ``fit --method posterior`` runs it, with its wall, CPU and memory.

    CPU and peak memory count the worker processes it starts (the children
    this process has waited for; ``ru_maxrss`` of children is the largest one's).
    The ``.nc`` files go to a temporary folder, removed at once or, with
    ``keep_files`` (the check reads fits back), when the script exits.
    """
    from bayesobs.fits.posterior import KEPT_VARIANTS, PosteriorFiles, fit_posterior

    folder = Path(tempfile.mkdtemp(prefix="bench-posterior-"))
    t, cpu, kids = time.perf_counter(), time.process_time(), os.times()
    # what `fit --method posterior` keeps: the .nc files written, the static draws in memory
    sink = PosteriorFiles(folder, keep=KEPT_VARIANTS)
    with MemoryPeak() as peak:  # this process and its workers together, sampled
        summ, loo, idatas, notes = fit_posterior(sub, sink=sink, **kw, **options)
    wall, cpu, now = time.perf_counter() - t, time.process_time() - cpu, os.times()
    written = sum(f.stat().st_size for f in folder.iterdir())
    if keep_files:
        atexit.register(shutil.rmtree, folder, True)
    else:
        shutil.rmtree(folder, True)
    children = now.children_user + now.children_system - kids.children_user - kids.children_system
    gib = 1024**2  # ru_maxrss is in KiB
    return (
        summ,
        loo,
        idatas,
        notes,
        {
            "wall_s": round(wall, 1),
            "cpu_s": round(cpu + children, 1),
            "cpu_children_s": round(children, 1),
            "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / gib, 2),
            "peak_rss_child_gib": round(
                resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / gib, 2
            ),
            "netcdf_gib": round(written / 1024**3, 2),
            "peak_pss_together_gib": round(peak.pss / 1024**3, 2),
            "peak_rss_together_gib": round(peak.rss / 1024**3, 2),
            "memory_samples": peak.samples,
            "memory_interval_s": peak.interval,
            "memory_max_share": peak.max_share,
            "memory_sampling_s": round(peak.seconds, 1),
        },
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "bench-output")
    ap.add_argument("--scale", action="store_true", help="only the BayesBench-scale case")
    ap.add_argument("--cells", "--scale-cells", dest="scale_cells", type=int, default=783)
    ap.add_argument("--check-cells", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--draws", type=int, default=500)
    ap.add_argument(
        "--variants",
        type=lambda v: v.split(","),
        default=list(VARIANT_NAMES),
        help="comma-separated variants of --scale (default all ten; fewer for a quick check)",
    )
    ap.add_argument("--scheduler", default=None, help="a Dask scheduler address")
    ap.add_argument(
        "--workers",
        type=int,
        default=0,
        help="also run on a LocalCluster of this many workers (and in one process, to compare)",
    )
    ap.add_argument(
        "--processes",
        type=int,
        default=None,
        help="fit_posterior's workers for the batched fit (default: the library's default)",
    )
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    warnings.simplefilter("ignore", FutureWarning)
    if args.scale:
        res = scale(args)
        (args.out / "bench_posterior_scale.json").write_text(json.dumps(res, indent=2) + "\n")
        return 0
    from bayesobs.fits.posterior import fit_posterior

    rng = np.random.default_rng(0)
    res = {}
    t = time.perf_counter()
    _, loo, _, notes = fit_posterior(cell(rng, 0.4))
    res["single_cell_10_variants_s"] = round(time.perf_counter() - t, 1)
    print(
        f"one cell, 120 trials, 10 variants, 4 x (500 + 500): {res['single_cell_10_variants_s']} s "
        f"(best by LOO: {loo.sort_values('rank')['variant'].iat[0]}; {len(notes)} diagnostic warnings)"
    )
    res["single_cell_result"] = result(
        "posterior, one cell of 120 trials, 10 variants, 4 x (500 + 500)",
        res["single_cell_10_variants_s"],
        None,
        yardstick(cells=2),
        "yardstick: the scipy per-cell loop on 2 cells x 10 variants (tests/naive.py)",
    )
    subjects = pd.concat([cell(rng, w, f"s{i}") for i, w in enumerate(np.linspace(0.2, 0.6, 9))])
    t = time.perf_counter()
    fit_posterior(subjects, variants=["static"], hierarchical=True)
    res["hierarchical_9_subjects_static_s"] = round(time.perf_counter() - t, 1)
    print(f"hierarchical, 9 subjects, static: {res['hierarchical_9_subjects_static_s']} s")
    t = time.perf_counter()
    _, _, _, notes = fit_posterior(subjects, hierarchical=True)
    res["hierarchical_9_subjects_10_variants_s"] = round(time.perf_counter() - t, 1)
    print(
        f"hierarchical, 9 subjects, all 10 variants: {res['hierarchical_9_subjects_10_variants_s']} s "
        f"({len(notes)} diagnostic warnings)"
    )
    (args.out / "bench_posterior.json").write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
