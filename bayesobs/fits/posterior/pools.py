"""Where a posterior fit's tasks run: here, in local worker processes, or on a Dask cluster."""

from __future__ import annotations

import os
import sys
import tempfile
import warnings
from contextlib import nullcontext

from ...compile_cache import ENV, enable
from ...distributed import iter_tasks, local_workers, release, scheduler_address
from .files import _sunk, sink_in_workers
from .jobs import _dispatch_job, _finish_job, _fit_batch_job, _fit_one

# Batched fits of at least this many (cell, variant)s go to worker processes unless
# ``workers`` says otherwise: below it, starting them and compiling the samplers in each
# costs more than the second core gives back.
MIN_FITS = 200


def processes(fits: int, workers: int | None) -> int:
    """Worker processes for ``fits`` batched fits: ``workers``, else the local workers from MIN_FITS on."""
    return workers or (local_workers() if fits >= MIN_FITS else 1)


def _run_batch_jobs(jobs, scheduler=None, sink=None, workers: int = 1) -> list:
    """Every batched task, on the Dask cluster at ``scheduler``, in ``workers`` processes, or here."""
    if scheduler_address(scheduler) is None and (workers <= 1 or len(jobs) <= 1):
        out, pending = [], None
        for job in [*jobs, None]:  # the next slice dispatched before this one is summarised
            nxt = None if job is None else (job, _dispatch_job(job))
            if pending is not None:
                out += _finish_job(*pending, sink)
            pending = nxt
        return out
    if scheduler_address(scheduler) is not None:
        # each slice goes through the sink as it arrives: the draws of all never pile up here
        return [
            r for _, part in iter_tasks(_fit_batch_job, jobs, scheduler) for r in _sunk(part, sink)
        ]
    here = not sink_in_workers(sink)  # else the workers write: the log-likelihoods stay there
    with _compile_cache() as cache:
        tasks = [(job, None if here else sink, cache, os.getpid()) for job in jobs]
        try:
            parts = iter_tasks(_batch_task, interleaved(tasks, workers), workers=workers)
            out = [r for _, part in parts for r in (_sunk(part, sink) if here else part)]
        except BaseException:
            release()
            raise
        release(wait=True)  # the workers end with the fit (and their compile cache folder)
        return out


def interleaved(jobs: list, parts: int) -> list:
    """``jobs`` cut into ``parts`` runs of consecutive tasks and dealt out in turn."""
    size = -(-len(jobs) // parts)
    runs = [jobs[i : i + size] for i in range(0, len(jobs), size)]
    return [r[i] for i in range(size) for r in runs if i < len(r)]


def _compile_cache():
    """The caller's JAX compile cache folder, else a scratch one the workers share (a context)."""
    jax = sys.modules.get("jax")
    folder = jax.config.jax_compilation_cache_dir if jax is not None else None
    return nullcontext(folder) if folder else tempfile.TemporaryDirectory(prefix="bayesobs-jax-")


_CACHE = {"folder": None}  # the compile cache folder this worker uses


def _batch_task(task: tuple):
    """One slice in a worker: the compile cache the workers share, arviz's announcement ignored."""
    job, sink, cache, caller = task
    if os.getpid() != caller and _CACHE["folder"] != cache:  # the caller keeps its own cache
        _CACHE["folder"] = enable({ENV: cache}) and cache
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # arviz's import-time announcement
        return _fit_batch_job(job, sink)


def _fit_one_task(job):
    """One unbatched fit in a worker, arviz's import-time announcement ignored."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return _fit_one(job)


def _run_fit_jobs(jobs: list, workers: int) -> list:
    """Every unbatched (group, variant) fit, in ``workers`` processes or here, in order."""
    try:
        done = dict(iter_tasks(_fit_one_task, jobs, workers=workers))
    except BaseException:
        release()
        raise
    release(wait=True)
    return [done[i] for i in range(len(jobs))]
