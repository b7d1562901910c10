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
    """Posterior fits of every variant; returns ``(summary, loo, idatas, notes)``.

    Without ``hierarchical`` each cell is fitted on its own; with it, the
    cells of each ``(task, modality, condition)`` are fitted jointly, one
    subject per cell, with a population distribution on the core parameter.

    Single-cell fits are ``batched`` by default: each variant is compiled once
    per cell shape and all cells of that shape are sampled together
    (:func:`sample_batch`), each with its own adaptation and diagnostics, in
    ``workers`` local worker processes (default :func:`bayesobs.distributed.local_workers`
    for ``pools.MIN_FITS`` (cell, variant) fits or more, else this process alone;
    1 runs in this process); with ``scheduler`` (a Dask scheduler
    address, or ``BAYESOBS_SCHEDULER``) the batches run on that cluster.
    Where they run does not change the result.  ``batched=False`` (and
    hierarchical fits) use NumPyro's ``MCMC`` per (group, variant), in
    ``workers`` processes (default ``min(2, os.cpu_count())``; 1 runs in
    this process).  Failed sampler
    diagnostics (each with its threshold) and observations with Pareto
    ``k > 0.7`` are returned in ``notes`` and raised as ``RuntimeWarning``.

    ``sink(fits)``, if given, receives ``(key, idata)`` pairs of one variant
    as soon as they are done (``key`` is the cell key plus the variant) and
    returns what ``idatas`` keeps of each, in order: :class:`PosteriorFiles`
    (:func:`bayesobs.report.posterior.write_outputs`'s sink) writes them to one
    file and keeps only the posterior draws, so memory does not grow with
    the pointwise log-likelihoods of every cell.  A sink that declares
    ``runs_in_workers`` is called in the worker processes
    (:func:`sink_in_workers`), so that the log-likelihoods never travel.

    Parameters
    ----------
    trials : pandas.DataFrame
        Trial table (normalised here).
    variants : list of str, optional
        Variant names; default all ten.
    hierarchical : bool, default False
        Fit the cells of each ``(task, modality, condition)`` jointly.
    chains, warmup, draws : int, default 4, 500, 500
        NUTS chains, warm-up and kept draws per chain.
    seed : int, default 0
        Sampler seed (the same for every fit).
    progress : bool, default False
        NumPyro's progress bar (unbatched fits).
    workers : int, optional
        Local worker processes (each on a core of its own): default
        :func:`bayesobs.distributed.local_workers` (``BAYESOBS_WORKERS``) for
        batched fits of ``pools.MIN_FITS`` fits or more, else 1; for unbatched
        fits, default :func:`bayesobs.distributed.local_workers`.
    batched : bool, default True
        Sample single-cell fits in batches (:func:`sample_batch`).
    scheduler : str or distributed.Client, optional
        Dask scheduler for the batches (:mod:`bayesobs.distributed`).
    sink : callable, optional
        ``sink(fits)``, called on the fits of one variant as they are done.

    Returns
    -------
    summary : pandas.DataFrame
        One row per (fit, parameter, subject): the group keys,
        ``subject_cell``, ``variant``, ``param``, ArviZ's summary columns
        (``mean``, ``sd``, ``hdi_3%``, ``hdi_97%``, ``mcse_mean``, ``mcse_sd``,
        ``ess_bulk``, ``ess_tail``, ``r_hat``) and the fit's ``r_hat_max``,
        ``ess_bulk_min``, ``divergences``.
    loo : pandas.DataFrame
        One row per fit: the group keys, ``variant``, ``elpd_loo``, ``se``,
        ``p_loo``, ``pareto_k_over_0.7`` and ``rank`` (1: highest
        ``elpd_loo`` in its group).
    idatas : dict
        ``(*key, variant)`` to the InferenceData (or what ``sink`` returned).
    notes : list of str
        Skipped fits, failed diagnostics and high Pareto ``k``.
    """
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
