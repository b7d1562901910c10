"""Where a posterior fit's tasks run: here, in spawned worker processes, or on a Dask cluster."""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import tempfile
import warnings
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

from ...compile_cache import ENV, enable
from ...distributed import (
    available_cores,
    iter_tasks,
    scheduler_address,
    thread_env,
    worker_cores,
)
from .files import _sunk, sink_in_workers
from .jobs import _dispatch_job, _finish_job, _fit_batch_job, _fit_one


def _run_batch_jobs(jobs, scheduler=None, sink=None, processes: int = 1) -> list:
    """Every batched task, on the Dask cluster at ``scheduler``, in ``processes`` processes, or here."""
    if scheduler_address(scheduler) is not None:
        # each slice goes through the sink as it arrives: the draws of all never pile up here
        return [
            r for _, part in iter_tasks(_fit_batch_job, jobs, scheduler) for r in _sunk(part, sink)
        ]
    if processes > 1 and len(jobs) > 1:
        if sink_in_workers(sink):  # the workers write: the log-likelihoods stay there
            return [r for part in _process_tasks(jobs, processes, sink) for r in part]
        return [r for part in _process_tasks(jobs, processes) for r in _sunk(part, sink)]
    out, pending = [], None
    for job in [*jobs, None]:
        nxt = None if job is None else (job, _dispatch_job(job))
        if pending is not None:
            out += _finish_job(*pending, sink)
        pending = nxt
    return out


# Batched fits of at least this many (cell, variant)s run in worker processes by default
# (fit_posterior's ``workers``): below it, starting the processes and compiling the
# samplers in each costs more than the second core gives back.
PROCESS_MIN_FITS = 200


def _default_processes(fits: int) -> int:
    """Processes for ``fits`` batched fits: two on two or more cores from :data:`PROCESS_MIN_FITS` on."""
    # a daemonic process (a pool's worker) may not start processes of its own
    spawn = fits >= PROCESS_MIN_FITS and not mp.current_process().daemon
    return min(2, available_cores()) if spawn else 1


def interleaved(jobs: list, parts: int) -> list:
    """``jobs`` cut into ``parts`` runs of consecutive tasks and dealt out in turn."""
    size = -(-len(jobs) // parts)
    runs = [jobs[i : i + size] for i in range(0, len(jobs), size)]
    return [r[i] for i in range(size) for r in runs if i < len(r)]


def _process_init(counter, cache: str | None) -> None:
    """Start of a worker process: one compute thread, its own core, the parent's compile cache."""
    os.environ.update(thread_env(1))  # before JAX loads: XLA keeps to the calling thread
    with counter.get_lock():
        index, counter.value = counter.value, counter.value + 1
    if hasattr(os, "sched_setaffinity"):
        cores = worker_cores(index, 1, sorted(os.sched_getaffinity(0)))
        if cores is not None:
            os.sched_setaffinity(0, cores)
    _worker_init()
    if cache:
        enable({ENV: cache})


def _process_tasks(jobs: list, processes: int, sink=None):
    """Each batched task's results, in ``processes`` spawned processes, as each finishes."""
    cache = None
    if "jax" in sys.modules:
        cache = sys.modules["jax"].config.jax_compilation_cache_dir or None
    ctx = mp.get_context("spawn")
    counter = ctx.Value("i", 0)
    order = interleaved(list(jobs), processes)
    with tempfile.TemporaryDirectory(prefix="bayesobs-jax-") as scratch:
        with ProcessPoolExecutor(
            processes,
            mp_context=ctx,
            initializer=_process_init,
            initargs=(counter, cache or scratch),
        ) as pool:
            pending = {pool.submit(_fit_batch_job, job, sink) for job in order}
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    yield fut.result()  # handed over and dropped: the draws never pile up


def _worker_init() -> None:
    warnings.simplefilter("ignore", FutureWarning)  # arviz's import-time announcement


def _run_fit_jobs(jobs: list, workers: int) -> list:
    """Every unbatched (group, variant) fit, in ``workers`` spawned processes or here."""
    if workers <= 1:
        return [_fit_one(j) for j in jobs]
    with ProcessPoolExecutor(
        workers, mp_context=mp.get_context("spawn"), initializer=_worker_init
    ) as pool:
        return list(pool.map(_fit_one, jobs))
