"""fit_posterior: every variant of every cell (or group), summarised and checked."""

from __future__ import annotations

import warnings

import pandas as pd

from ...distributed import local_workers
from ...trials import CELL_KEYS, normalize_trials
from ..observers.variants import VARIANTS
from .batching import (
    batch_jobs,
)
from .files import _sunk
from .pools import _run_batch_jobs, _run_fit_jobs, processes


def fit_posterior(
    trials: pd.DataFrame,
    variants=None,
    hierarchical=False,
    chains=4,
    warmup=500,
    draws=500,
    seed=0,
    progress=False,
    workers: int | None = None,
    batched: bool = True,
    scheduler: str | None = None,
    sink=None,
):
    """Posterior fits of every variant; returns ``(summary, loo, idatas, notes)``."""
    if workers is not None and (
        isinstance(workers, bool) or not isinstance(workers, int) or workers < 1
    ):
        raise ValueError(f"workers must be a positive integer, not {workers!r}")
    trials = normalize_trials(trials)
    names = list(variants or [v.name for v in VARIANTS])
    group_keys = ["task", "modality", "condition"] if hierarchical else list(CELL_KEYS)
    if batched and not hierarchical:
        jobs, skipped, order = batch_jobs(trials, names, chains, warmup, draws, seed)
        results = [(k, n, None, [], None, note) for k, n, note in skipped]
        fits = sum(len(job[1]) for job in jobs)
        results += _run_batch_jobs(jobs, scheduler, sink, processes(fits, workers))
        rank = {n: i for i, n in enumerate(names)}
        results.sort(key=lambda r: (order[r[0]], rank[r[1]]))  # as the per-cell path orders them
    else:
        jobs = []
        for key, g in trials.groupby(group_keys, sort=True):
            key = key if isinstance(key, tuple) else (key,)
            jobs += [
                (g, group_keys, key, n, hierarchical, chains, warmup, draws, seed, progress)
                for n in names
            ]
        workers = min(len(jobs), workers or local_workers())
        results = _sunk(_run_fit_jobs(jobs, workers), sink)
    rows, loo_rows, idatas, notes = [], [], {}, []
    for key, name, idata, r, loo_row, note in results:
        if note:
            notes.append(note)
            if idata is not None:
                warnings.warn(note, RuntimeWarning, stacklevel=2)
        if idata is None:
            continue
        idatas[(*key, name)] = idata
        rows += r
        loo_rows.append(loo_row)
    loo = pd.DataFrame(loo_rows)
    if len(loo):
        loo["rank"] = (
            loo.groupby(group_keys)["elpd_loo"].rank(ascending=False, method="first").astype(int)
        )
    return pd.DataFrame(rows), loo, idatas, notes
