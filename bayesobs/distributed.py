"""Running tasks elsewhere: local worker processes, or a Dask cluster (``bayesobs[distributed]``).

The one execution layer of the package.  :func:`submit` starts a task in a
local worker process (loky's ``ProcessPoolExecutor``, as joblib uses it, one
compute thread each; ``$BAYESOBS_WORKERS`` of them, default up to 2) while
the caller goes on: the cue probe's forests, a scale's Kalman fits, the
report's figures, a perception task's stimuli.  A worker that dies loses
nothing: its tasks run again in the caller's process.  A Dask scheduler
address (``--scheduler tcp://HOST:8786``, or the ``BAYESOBS_SCHEDULER``
environment variable) sends the same tasks to that cluster instead: a
``dask.distributed.LocalCluster`` on this machine, or a SLURM/PBS cluster
started with ``dask-jobqueue`` (docs/scale.md, "Scale").  Every task is a pure
function of its inputs (seeds included), so the results are the same
wherever it runs.

Each worker runs ``threads`` tasks at a time and must not start more
compute threads than that: :func:`thread_env` caps NumPy's BLAS/OpenMP
pools and JAX's XLA (``--xla_cpu_multi_thread_eigen``), and the worker
preload of this module (:func:`dask_setup`) pins each worker process to its
own ``threads`` cores, which is what sizes XLA's CPU thread pool (JAX sizes
it from the process's CPU affinity).  :func:`local_cluster` and
:func:`jobqueue_options` (SLURM/PBS through ``dask-jobqueue``) set both.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import fcntl
import os
import re
import shlex
import signal
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from contextvars import ContextVar

from .errors import BayesobsInputError

ENV = "BAYESOBS_SCHEDULER"
# the thread pools a worker caps at its own thread count
THREAD_VARS = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
PRELOAD = "bayesobs.distributed"  # the worker preload: pins each worker to its cores
_CURRENT: ContextVar = ContextVar("bayesobs_scheduler", default=None)


@contextmanager
def use_scheduler(scheduler) -> Iterator[None]:
    """Within the block, library calls send their tasks to ``scheduler`` (None: no change).

    Parameters
    ----------
    scheduler : str or distributed.Client or None
        A scheduler address or a connected ``Client``; None (or ``""``)
        keeps the scheduler already in effect.

    Yields
    ------
    None
        The block runs with the scheduler set (per context, so threads and
        async tasks do not see each other's); it is restored on exit.
    """
    if isinstance(scheduler, str) and scheduler:
        check_address(scheduler, "--scheduler")
    token = _CURRENT.set(scheduler or _CURRENT.get())
    try:
        yield
    finally:
        _CURRENT.reset(token)


def scheduler_address(scheduler=None):
    """``scheduler``, else the one of :func:`use_scheduler`, else ``$BAYESOBS_SCHEDULER``, else None.

    Parameters
    ----------
    scheduler : str or distributed.Client, optional
        An explicit scheduler; None or ``""`` falls through to the others.

    Returns
    -------
    str or distributed.Client or None
        Where tasks go; None means this process.
    """
    if scheduler is not None and scheduler != "":
        return scheduler
    if _CURRENT.get():
        return _CURRENT.get()
    return check_address(os.environ[ENV], f"${ENV}") if os.environ.get(ENV) else None


# [PROTOCOL://]HOST:PORT, or an in-process cluster's inproc://HOST/PID/N
_ADDRESS = r"(?:(?:tcp|tls|ucx|ws|wss)://)?(?:[\w.%-]+|\[[\w:.%]+\]):\d+|inproc://[\w./]+"


def check_address(address: str, what: str) -> str:
    """``address`` when it has the form of a Dask scheduler address, else one clear error."""
    if not re.fullmatch(_ADDRESS, address):
        raise BayesobsInputError(
            f"{what} {address!r} is not a Dask scheduler address (e.g. tcp://HOST:8786)"
        )
    return address


def map_tasks(fn: Callable, items: Iterable, scheduler=None) -> list:
    """``[fn(x) for x in items]``, here or on the Dask cluster at ``scheduler``.

    Parameters
    ----------
    fn : callable
        A module-level (picklable) function of one task.
    items : iterable
        The tasks.
    scheduler : str or distributed.Client, optional
        A scheduler address (``tcp://host:8786``) or a connected ``Client``;
        default :func:`scheduler_address`.  None runs in this process.

    Returns
    -------
    list
        The results, in the order of ``items``.
    """
    items = list(items)
    address = scheduler_address(scheduler)
    if address is None or not items:
        return [fn(x) for x in items]
    try:
        # optional dependency: dask.distributed (the distributed extra)
        from distributed import Client
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise ImportError(
            "a Dask scheduler was given but dask.distributed is not installed: "
            "pip install 'bayesobs[distributed]'"
        ) from exc
    if isinstance(address, Client):
        return address.gather(address.map(fn, items, pure=False))
    with Client(address, set_as_default=False) as client:
        return client.gather(client.map(fn, items, pure=False))


def iter_tasks(
    fn: Callable, items: Iterable, scheduler=None, workers: int = 1
) -> Iterator[tuple[int, object]]:
    """``(i, fn(items[i]))`` for every task, as each finishes: here, in local workers, or on Dask.

    Like :func:`map_tasks`, but each result is handed over as soon as it is
    done (in the order they finish on a cluster or in local workers) and then
    dropped there, so the caller can write it out and keep only what it needs.

    Parameters
    ----------
    fn : callable
        A module-level (picklable) function of one task.
    items : iterable
        The tasks.
    scheduler : str or distributed.Client, optional
        As in :func:`map_tasks`; None (after :func:`scheduler_address`)
        runs each task here, in order, or in local workers.
    workers : int
        Without a scheduler, local worker processes (:func:`submit`, at
        most two tasks each in flight; a killed worker's tasks run again
        here); 1 runs each task here, in order.

    Yields
    ------
    tuple of (int, object)
        The task's index in ``items`` and its result.
    """
    items = list(items)
    address = scheduler_address(scheduler)
    if address is None and workers > 1 and len(items) > 1:
        yield from _iter_local(fn, items, workers)
        return
    if address is None or not items:
        for i, x in enumerate(items):
            yield i, fn(x)
        return
    from distributed import Client, as_completed  # optional dependency: bayesobs[distributed]

    def run(client):
        futures = client.map(fn, items, pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        for fut in as_completed(futures, loop=client.loop):
            result = fut.result()
            fut.release()
            yield index[fut.key], result

    if isinstance(address, Client):
        yield from run(address)
    else:
        with Client(address, set_as_default=False) as client:
            yield from run(client)


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1  # pragma: no cover - not Linux


WORKERS = "BAYESOBS_WORKERS"  # local worker processes (1: everything in this process)
_POOLS: dict = {}  # this process's workers by their number: (loky pool, futures, core-claims file)
_IN_WORKER = False  # set in a worker: its tasks run there, never in workers of their own


def local_workers(workers: int | None = None) -> int:
    """Local worker processes: ``workers``, else ``$BAYESOBS_WORKERS``, else up to 2.

    Parameters
    ----------
    workers : int, optional
        The number asked for (1: every task in this process).

    Returns
    -------
    int
        ``workers``; without it the environment variable's value, else
        ``min(2, available_cores())``.

    Raises
    ------
    BayesobsInputError
        When the number (or the variable) is not a whole number >= 1.
    """
    where, shown = "workers", workers
    if workers is None:
        shown = os.environ.get(WORKERS, "").strip()
        if not shown:
            return min(2, available_cores())
        where, workers = WORKERS, int(shown) if shown.isdigit() else 0
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise BayesobsInputError(f"{where} must be a whole number >= 1, not {shown!r}")
    return workers


def _start_worker(claims: str) -> None:
    """A worker's first step: Ctrl-C left to the caller, no nested workers, a core of its own."""
    global _IN_WORKER
    _IN_WORKER = True
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller handles it and ends the workers
    # one core each (the next of the caller's, in start order): jaxlib sizes its thread pool
    # from the affinity, so an unpinned worker runs as many XLA threads as there are cores
    cores = sorted(os.sched_getaffinity(0))
    with open(claims, "r+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        i = int(f.read() or 0)
        f.seek(0)
        f.write(str(i + 1))
    if len(cores) > 1:
        os.sched_setaffinity(0, {cores[i % len(cores)]})


def _run(fn: Callable, args: tuple) -> tuple:
    """``fn(*args)`` in a worker, with the warnings it gave (issued again by the caller)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # each one to the caller, whose filters decide
        value = fn(*args)
    return value, [(str(w.message), w.category, w.filename, w.lineno) for w in caught]


class Task:
    """A task handed to :func:`submit`; :meth:`result` waits for it (or computes it here)."""

    def __init__(self, fn: Callable, args: tuple, future: Future | None = None) -> None:
        self._fn, self._args, self._future = fn, args, future

    @property
    def elsewhere(self) -> bool:
        """Whether a worker process runs the task."""
        return self._future is not None

    def result(self):
        """``fn(*args)``: from its worker; computed here if none ran it or its worker died.

        Returns
        -------
        object
            ``fn(*args)``; the task's exception is raised here, its warnings issued here.
        """
        if self._future is not None:
            try:
                value, caught = self._future.result()
            except BrokenProcessPool:  # killed (out of memory, a signal): nothing is lost
                self._future = None
                release()
                warnings.warn(
                    f"a worker process ended before {self._fn.__name__} was done; "
                    "it runs again in this process",
                    RuntimeWarning,
                    stacklevel=2,
                )
            else:
                for message, category, filename, lineno in caught:
                    warnings.warn_explicit(message, category, filename, lineno)
                return value
        return self._fn(*self._args)


def submit(fn: Callable, *args, worth: bool = True, workers: int | None = None) -> Task:
    """Start ``fn(*args)`` in a local worker process while this one goes on.

    The task runs in this process, when its result is asked for, where a
    worker is not worth it (``worth`` false, one core or ``$BAYESOBS_WORKERS``
    1), inside a worker, or with a Dask scheduler set (the task then sends its
    own work there).  Workers (loky: fork and exec) are capped at one
    compute thread (:func:`thread_env`), and kept for the next tasks until
    :func:`release`.  If a worker dies, its tasks run again in this process:
    every task is a pure function of its inputs, so the results are the same
    wherever they are computed.

    Parameters
    ----------
    fn : callable
        A module-level (picklable) function, pure in its inputs.
    *args
        Its (picklable) arguments.
    worth : bool
        Whether the task is worth a worker process (the caller's estimate:
        starting one costs about a second of another core).
    workers : int, optional
        Worker processes of the pool the task goes to (default
        :func:`local_workers`; a caller that keeps working itself, as ``fit``
        and ``score`` do, asks for 1).

    Returns
    -------
    Task
        ``result()`` returns ``fn(*args)`` (raises its exception).
    """
    n = local_workers()
    if worth and n > 1 and not _IN_WORKER and scheduler_address() is None:
        n = n if workers is None else local_workers(workers)
        if n not in _POOLS:
            # loky (joblib's process pool, installed with scikit-learn): fork + exec, the thread
            # caps in the environment before the worker starts, and, unlike the standard
            # library's spawn, it never runs the caller's script again in a worker
            from joblib.externals.loky import ProcessPoolExecutor

            claims = tempfile.NamedTemporaryFile("w", prefix="bayesobs-cores-", delete=False)
            claims.close()
            atexit.register(_forget, claims.name)  # also when the caller never calls release()
            pool = ProcessPoolExecutor(
                n, initializer=_start_worker, initargs=(claims.name,), env=thread_env(1)
            )
            _POOLS[n] = (pool, [], claims.name)
        pool, futures, _ = _POOLS[n]
        try:
            futures[:] = [f for f in futures if not f.done()] + [pool.submit(_run, fn, args)]
            return Task(fn, args, futures[-1])
        except (BrokenProcessPool, RuntimeError):  # a worker died or the pool is ending
            release()
    return Task(fn, args)


def _iter_local(fn: Callable, items: list, workers: int) -> Iterator[tuple[int, object]]:
    """``(i, fn(items[i]))`` from ``workers`` local workers as each finishes, two per worker in flight."""
    todo, running = iter(enumerate(items)), {}
    while True:
        while len(running) < 2 * workers and (job := next(todo, None)) is not None:
            running[submit(fn, job[1], workers=workers)] = job[0]
        if not running:
            return
        there = {t._future: t for t in running if t.elsewhere}
        task = next((t for t in running if not t.elsewhere), None)  # fell back: computed here
        if task is None:
            task = there[next(iter(wait(there, return_when=FIRST_COMPLETED)[0]))]
        yield running.pop(task), task.result()


def release(wait: bool = False) -> None:
    """End this process's worker processes (the next task starts new ones).

    Parameters
    ----------
    wait : bool
        Let the workers finish their tasks and wait until they have exited
        (their CPU time and memory then count in this process's
        ``RUSAGE_CHILDREN``); without it a task still running is abandoned.
    """
    while _POOLS:  # without wait, a task still running is abandoned: its result is not needed
        pool, _, claims = _POOLS.popitem()[1]
        pool.shutdown(wait=wait, kill_workers=not wait)
        _forget(claims)


def _forget(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def trim_memory() -> bool:
    """Hand the memory this process has freed back to the system (glibc's ``malloc_trim``)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.malloc_trim(0))
    except (OSError, AttributeError):  # not glibc
        return False


def _threads(threads) -> int:
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads per worker must be a positive integer, not {threads!r}")
    return threads


def thread_env(threads: int) -> dict[str, str]:
    """Environment variables that cap a worker's compute threads at ``threads``.

    ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS`` (and
    the Accelerate and numexpr equivalents) for NumPy/SciPy, and
    ``XLA_FLAGS`` for JAX: ``--xla_cpu_multi_thread_eigen=false`` with one
    thread (XLA's Eigen calls stay on the calling thread), and
    ``intra_op_parallelism_threads=N``, the setting JAX's issue tracker
    gives for older jaxlib versions.  Current jaxlib sizes its CPU thread
    pool from the CPU affinity instead, which :func:`dask_setup` sets.
    They must be in the environment before the worker process starts (NumPy
    and JAX read them when they load).

    Parameters
    ----------
    threads : int
        Threads per worker (Dask's ``nthreads``).

    Returns
    -------
    dict
        Variable name to value.
    """
    n = _threads(threads)
    env = dict.fromkeys(THREAD_VARS, str(n))
    eigen = "true" if n > 1 else "false"
    env["XLA_FLAGS"] = f"--xla_cpu_multi_thread_eigen={eigen} intra_op_parallelism_threads={n}"
    return env


def worker_cores(name, threads: int, available: list[int]) -> list[int] | None:
    """The cores worker ``name`` is pinned to: its own ``threads`` of ``available``, or None.

    Workers of one machine are numbered: a ``LocalCluster`` names them
    0, 1, ...; ``dask worker --nworkers K --name NAME`` (what dask-jobqueue
    starts) names them ``NAME-0`` ... ``NAME-(K-1)``.  Worker ``i`` gets
    cores ``available[i*threads:(i+1)*threads]``; None (no pinning) when the
    name carries no number or the cores do not go round.

    Parameters
    ----------
    name : str or int
        The Dask worker's name.
    threads : int
        Threads per worker.
    available : list of int
        The cores the process may run on (sorted here).

    Returns
    -------
    list of int or None
        The worker's ``threads`` cores; None when the name has no number,
        its slice would be short, or ``available`` holds no more than
        ``threads`` cores.

    Raises
    ------
    ValueError
        When ``threads`` is not a positive integer.
    """
    n = _threads(threads)
    tail = str(name).rsplit("-", 1)[-1]
    if not tail.isdigit():
        return None
    i = int(tail)
    cores = sorted(available)[i * n : (i + 1) * n]
    return cores if len(cores) == n and len(available) > n else None


def dask_setup(worker) -> None:
    """Worker preload (``--preload bayesobs.distributed``): pin the worker to its own cores.

    Runs in the worker process before any task, so JAX, which sizes its CPU
    thread pool from the process's CPU affinity when it first computes, and
    the BLAS pools start no more threads than the worker's ``nthreads``.

    Parameters
    ----------
    worker : distributed.Worker
        The worker Dask hands the preload (its ``name`` and
        ``state.nthreads`` choose the cores, :func:`worker_cores`); nothing
        is pinned off Linux or when the cores do not go round.
    """
    if not hasattr(os, "sched_setaffinity"):  # pragma: no cover - not Linux
        return
    cores = worker_cores(worker.name, worker.state.nthreads, sorted(os.sched_getaffinity(0)))
    if cores is not None:
        os.sched_setaffinity(0, cores)


def local_cluster(n_workers: int = 2, threads_per_worker: int = 1, pin: bool = True, **kwargs):
    """A ``dask.distributed.LocalCluster`` whose workers cap their threads (:func:`thread_env`).

    Parameters
    ----------
    n_workers, threads_per_worker : int
        Worker processes and threads (tasks at a time) in each.
    pin : bool
        Pin each worker to its own cores (:func:`dask_setup`), when the
        machine's cores go round.
    **kwargs
        Passed to ``LocalCluster`` (e.g. ``memory_limit``).

    Returns
    -------
    distributed.LocalCluster
        Use it as a context manager; ``cluster.scheduler_address`` is the
        ``--scheduler`` address.
    """
    from distributed import LocalCluster  # optional dependency: bayesobs[distributed]

    n = _threads(threads_per_worker)
    _threads(n_workers)
    kwargs.setdefault("dashboard_address", None)
    return LocalCluster(
        n_workers=n_workers,
        threads_per_worker=n,
        processes=True,
        env=thread_env(n),
        preload=[PRELOAD] if pin else [],
        **kwargs,
    )


def jobqueue_options(cores: int, processes: int = 1) -> dict:
    """Keyword arguments for a dask-jobqueue cluster (``SLURMCluster``, ``PBSCluster``, ...).

    Each job of ``cores`` cores runs ``processes`` workers of
    ``cores // processes`` threads; the job script exports
    :func:`thread_env` of that many threads and each worker loads the
    preload that pins it to its own cores.

    Parameters
    ----------
    cores : int
        Cores per job (the cluster's ``cores``).
    processes : int
        Worker processes per job (the cluster's ``processes``).

    Returns
    -------
    dict
        ``job_script_prologue`` and ``worker_extra_args``.
    """
    cores, processes = _threads(cores), _threads(processes)
    if cores % processes:
        raise ValueError(f"{cores} cores do not split evenly into {processes} worker processes")
    env = thread_env(cores // processes)
    return {
        "job_script_prologue": [f"export {k}={shlex.quote(v)}" for k, v in env.items()],
        "worker_extra_args": ["--preload", PRELOAD],
    }


__all__ = [
    "ENV",
    "THREAD_VARS",
    "WORKERS",
    "Task",
    "dask_setup",
    "iter_tasks",
    "jobqueue_options",
    "local_cluster",
    "local_workers",
    "map_tasks",
    "release",
    "scheduler_address",
    "submit",
    "thread_env",
    "use_scheduler",
    "worker_cores",
]
