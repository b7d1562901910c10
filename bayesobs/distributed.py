"""Running independent tasks here or on a Dask cluster (``bayesobs[distributed]``).

The default is this process (:func:`run_aside` starts one more for a long
task of plain Python that would leave a core idle).  A Dask scheduler
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

import ctypes
import importlib
import os
import pickle
import queue
import re
import shlex
import signal
import subprocess
import sys
import threading
import warnings
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator
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
    """``address`` when it has the form of a Dask scheduler address, else one clear error.

    Parameters
    ----------
    address : str
        ``[PROTOCOL://]HOST:PORT`` (tcp, tls, ucx, ws, wss) or ``inproc://...``.
    what : str
        Where it came from, for the message (``--scheduler``, ``$BAYESOBS_SCHEDULER``).

    Returns
    -------
    str
        ``address`` unchanged.

    Raises
    ------
    BayesobsInputError
        When it has no such form (checked before any connection is tried).
    """
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


def iter_tasks(fn: Callable, items: Iterable, scheduler=None) -> Iterator[tuple[int, object]]:
    """``(i, fn(items[i]))`` for every task, as each finishes, here or on the Dask cluster.

    Like :func:`map_tasks`, but each result is handed over as soon as it is
    done (in the order they finish on a cluster) and then dropped by the
    cluster, so the caller can write it out and keep only what it needs.

    Parameters
    ----------
    fn : callable
        A module-level (picklable) function of one task.
    items : iterable
        The tasks.
    scheduler : str or distributed.Client, optional
        As in :func:`map_tasks`; None (after :func:`scheduler_address`)
        runs each task here, in order.

    Yields
    ------
    tuple of (int, object)
        The task's index in ``items`` and its result.
    """
    items = list(items)
    address = scheduler_address(scheduler)
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
    """The cores this process may run on (its CPU affinity where the system has one).

    Returns
    -------
    int
        At least 1.
    """
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1  # pragma: no cover - not Linux


# the helper's command: the caller's sys.path first (sent as the first message), so that
# bayesobs and the tasks' modules come from where the caller's came from (`python -c` would
# put the working folder first: another checkout of bayesobs there would be imported)
_ASIDE_BOOT = (
    "import pickle, sys; sys.path[:] = pickle.load(sys.stdin.buffer); "
    "from bayesobs.distributed import aside_main; aside_main()"
)


class _Process:
    """One process of an :class:`AsideWorker`: its pipes' threads and the task it runs."""

    def __init__(self, worker: AsideWorker) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", _ASIDE_BOOT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, **thread_env(1)},
        )
        self.running: int | None = None  # the index of the task it runs
        self.alive = True
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.queue.put(pickle.dumps(list(sys.path)))  # so that the caller's modules import there
        self.threads = [
            threading.Thread(target=self._send, daemon=True),
            # the worker by weak reference: one dropped unread is collected, which ends this
            threading.Thread(target=_receive, args=(weakref.ref(worker), self), daemon=True),
        ]
        for t in self.threads:
            t.start()

    def _send(self) -> None:
        stdin = self.process.stdin
        try:
            with stdin:
                while (blob := self.queue.get()) is not None:
                    stdin.write(blob)
                    stdin.flush()
        except OSError:  # the process died: AsideWorker.results runs what is left here
            pass


class AsideWorker:
    """Processes of their own that run the tasks handed to them, each task where one is free.

    For work of plain Python that would otherwise leave the other cores idle
    (the cue probe's forests, the report's figures): :meth:`submit` hands a
    task over and returns at once, :meth:`results` waits for all of them.
    Each process is a fresh interpreter (``python -c``, one compute thread)
    that imports only what its tasks need: unlike ``multiprocessing``'s
    spawn it does not run the caller's script again, so a script without an
    ``if __name__ == "__main__":`` guard is safe.  A task goes to a process
    when that process is free (so a long task never holds up the ones
    behind it while another process idles); tasks travel pickled through
    the process's standard input (written by a thread of this process, so
    :meth:`submit` never waits), results through its standard output, and
    whatever a task prints goes to standard error.

    With ``start`` false, on one core, or with a Dask scheduler set
    (:func:`scheduler_address`: a task then sends its own work there), no
    process starts and :meth:`results` runs the tasks here.  If a process
    dies (out of memory, a signal), :meth:`results` warns and runs the tasks
    that no process finished here: every task is a pure function of its
    inputs, so nothing is lost.

    Parameters
    ----------
    start : bool
        Whether the tasks are worth a process (the caller's estimate:
        starting one costs about a second of another core).
    processes : int
        How many processes (at most the cores this process may use).
    """

    def __init__(self, start: bool = True, processes: int = 1) -> None:
        self._tasks: list = []
        self._done: dict[int, tuple] = {}
        self._waiting: deque = deque()  # (index, pickled task) not yet handed to a process
        self._changed = threading.Condition()
        self._processes: list[_Process] = []
        self._delivered: set[int] = set()
        if start and available_cores() >= 2 and not scheduler_address():
            self._processes = [
                _Process(self) for _ in range(max(1, min(processes, available_cores())))
            ]
        self._all = list(self._processes)  # kept after close, for the warning of a dead one
        if self._processes:
            # a worker dropped unread (an error upstream) ends its processes
            self._finalizer = weakref.finalize(self, _end_processes, list(self._processes))

    @property
    def aside(self) -> bool:
        """Whether the tasks run in processes of their own."""
        return bool(self._processes)

    def _hand_out(self) -> None:
        """Give the waiting tasks to the free processes (with ``_changed`` held)."""
        for proc in self._processes:
            if proc.alive and proc.running is None and self._waiting:
                proc.running, blob = self._waiting.popleft()
                proc.queue.put(blob)

    def _finished(self, proc: _Process, out: tuple | None) -> None:
        """``proc`` returned ``out`` for its task (None: it ended); hand it the next one."""
        with self._changed:
            if out is None:
                proc.alive = False
            else:
                self._done[proc.running] = out
                proc.running = None
                self._hand_out()
            self._changed.notify_all()

    def submit(self, fn: Callable, item) -> int:
        """Hand ``fn(item)`` over (``fn`` module-level and both picklable); returns at once.

        Parameters
        ----------
        fn : callable
            A module-level function of one task, pure in its inputs.
        item : object
            Its task.

        Returns
        -------
        int
            The task's index, for :meth:`result`.

        Raises
        ------
        pickle.PicklingError, TypeError, AttributeError
            ``(fn, item)`` does not pickle (nothing was handed over).
        """
        blob = None
        if self._processes:
            blob = pickle.dumps((fn, item), protocol=pickle.HIGHEST_PROTOCOL)
        with self._changed:
            self._tasks.append((fn, item))
            index = len(self._tasks) - 1
            if blob is not None:
                self._waiting.append((index, blob))
                self._hand_out()
        return index

    def _pending(self, index: int) -> bool:
        """Whether a live process has task ``index`` or will take it (with ``_changed`` held)."""
        alive = [p for p in self._processes if p.alive]
        return index not in self._done and (
            any(p.running == index for p in alive)
            or (bool(alive) and any(i == index for i, _ in self._waiting))
        )

    def result(self, index: int):
        """Task ``index``'s result once it is done; the processes go on with the others.

        Parameters
        ----------
        index : int
            What :meth:`submit` returned.

        Returns
        -------
        object
            ``fn(item)`` of that task (computed here if no process could:
            none started, or the one running it died, with a RuntimeWarning);
            its exception, and the warnings it gave, are raised here.
        """
        with self._changed:
            while self._pending(index):
                self._changed.wait()
            if index in self._done:
                return self._deliver(index)
            for i, blob in list(self._waiting):  # no live process will take it
                if i == index:
                    self._waiting.remove((i, blob))
        self._run_here([index])
        return self._deliver(index)

    def _run_here(self, indices: list[int]) -> None:
        """Compute tasks ``indices`` here (no process ran them; a RuntimeWarning if one died)."""
        if self._all and indices:  # processes were started, and did not finish these
            names = {getattr(self._tasks[i][0], "__qualname__", "a task") for i in indices}
            status = sorted({c for p in self._all if (c := _exit_status(p))})
            warnings.warn(
                f"the process computing {', '.join(sorted(names))} ended with status "
                f"{', '.join(map(str, status)) or 0} before its results; computing "
                f"{len(indices)} task(s) here instead",
                RuntimeWarning,
                stacklevel=3,
            )
        for i in indices:
            fn, item = self._tasks[i]
            try:
                self._done[i] = (True, fn(item), [])
            except Exception as exc:
                self._done[i] = (False, exc, [])

    def _deliver(self, index: int):
        """Task ``index``'s value, its warnings issued here the first time (raised if it failed)."""
        ok, value, caught = self._done[index]
        if index not in self._delivered:
            self._delivered.add(index)
            for message, category, filename, lineno in caught:
                warnings.warn_explicit(message, category, filename, lineno)
        if not ok:
            raise value
        return value

    def close(self) -> None:
        """End the processes (a task still running is abandoned: its result is not needed)."""
        with self._changed:
            procs, self._processes = self._processes, []
            self._waiting.clear()
        for proc in procs:
            proc.queue.put(None)  # no more tasks: the process ends
            if proc.running is not None and proc.process.poll() is None:
                proc.process.kill()
        for proc in procs:
            for t in proc.threads:
                t.join()
            proc.process.wait()

    def __enter__(self) -> AsideWorker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def results(self) -> list:
        """Every task's result, in the order submitted; a task's exception is raised here.

        Returns
        -------
        list
            ``fn(item)`` of each :meth:`submit`, in that order (the processes
            end here; a task no process finished is computed in this one).
        """
        procs = self._processes
        with self._changed:
            while len(self._done) < len(self._tasks) and any(
                p.alive and (p.running is not None or self._waiting) for p in procs
            ):
                self._changed.wait()
            self._waiting.clear()
            self._processes = []
        for proc in procs:
            proc.queue.put(None)  # no more tasks: the process ends
        for proc in procs:
            for t in proc.threads:
                t.join()
            proc.process.wait()
        self._run_here([i for i in range(len(self._tasks)) if i not in self._done])
        return [self._deliver(i) for i in range(len(self._tasks))]


def _exit_status(proc: _Process) -> int | None:
    """The exit status of a process whose output has ended (None: still running)."""
    if proc.alive:
        return proc.process.poll()
    try:  # its output ended: it is exiting, but may not have been reaped yet
        return proc.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        return None


def _receive(worker_ref, proc: _Process) -> None:
    """The results of ``proc`` as each arrives (a thread: the process never waits for pipe room)."""
    stdout = proc.process.stdout
    with stdout:
        while True:
            try:
                out = pickle.load(stdout)  # written by aside_main, our own child
            except (EOFError, pickle.UnpicklingError, OSError):
                break
            worker = worker_ref()
            if worker is None:
                return
            worker._finished(proc, out)
            del worker  # no reference held while waiting for the next result
    worker = worker_ref()
    if worker is not None:
        worker._finished(proc, None)


def _end_processes(processes: list[_Process]) -> None:
    for proc in processes:
        proc.queue.put(None)  # its sender thread ends
        if proc.process.poll() is None:
            proc.process.kill()
        proc.process.wait()


def aside_main() -> None:
    """The process of :class:`AsideWorker`: run the pickled tasks of standard input in order.

    The command that starts it has read the caller's ``sys.path`` from
    standard input already; then comes ``(fn, item)`` per task until the
    input ends; for each, ``(True, fn(item), warnings)`` or
    ``(False, exception, warnings)`` goes pickled to standard output, and
    whatever the task prints goes to standard error.  ``warnings`` are those
    the task gave, as ``(message, category, filename, lineno)``: the caller
    issues them (its filters decide what is shown, as for a task run there).
    """
    # Ctrl-C in a terminal reaches the whole process group: the caller handles it (and ends
    # this process); here it would only print a second traceback
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    source = sys.stdin.buffer
    sink = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # a task's own prints cannot mix with the results
    with sink:
        while True:
            try:
                fn, item = pickle.load(source)
            except EOFError:
                break
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")  # each one to the caller, whose filters decide
                try:
                    out = (True, fn(item))
                except Exception as exc:  # handed to the caller, which raises it
                    out = (False, exc)
            given = [(str(w.message), w.category, w.filename, w.lineno) for w in caught]
            try:
                blob = pickle.dumps((*out, given), protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as exc:  # an exception, result or warning that does not pickle
                blob = pickle.dumps((False, RuntimeError(f"{type(exc).__name__}: {exc}"), []))
            sink.write(blob)
            sink.flush()
    # every result is written and flushed: end now, without the interpreter's teardown of
    # its modules (pandas, scikit-learn: ~0.6 s the caller would wait for)
    sys.stdout.flush()  # a task's prints (to standard error since the dup2 above)
    sys.stderr.flush()
    os._exit(0)


class Aside:
    """A task started by :func:`run_aside`: ``result()`` waits for it (or runs it here).

    Parameters
    ----------
    worker : AsideWorker
        Where the task was submitted.
    index : int
        Its index there (:meth:`AsideWorker.submit`).
    own : bool
        Whether the worker ran this task alone: :meth:`result` then ends it.
    """

    def __init__(self, worker: AsideWorker, index: int = 0, own: bool = True) -> None:
        self._worker, self._index, self._own = worker, index, own

    @property
    def aside(self) -> bool:
        """Whether the task runs in a process of its own."""
        return self._worker.aside

    def result(self):
        """``fn(item)``: from the other process, else (or if that process died) computed here.

        Returns
        -------
        object
            ``fn(item)``; an exception of ``fn`` in the other process is raised here.
        """
        try:
            return self._worker.result(self._index)
        finally:
            if self._own:  # the worker was started for this task alone (run_aside)
                self._worker.close()


def trim_memory() -> bool:
    """Hand the memory this process has freed back to the system (glibc's ``malloc_trim``).

    A posterior worker frees a slice's draws and log-likelihoods when the
    slice is done, but glibc keeps most of the freed pages for itself
    (measured on a BayesBench slice: 1.04 GiB resident between slices, 0.63
    GiB after trimming), so the worker's footprint grows with what it once
    held.  Elsewhere (macOS, musl) there is no such call and nothing is done.

    Returns
    -------
    bool
        Whether memory was handed back (the C library has ``malloc_trim``
        and returned non-zero).
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.malloc_trim(0))
    except (OSError, AttributeError):  # not glibc
        return False


def preload(modules: tuple[str, ...]) -> None:
    """Import ``modules`` (a process's first task, so its imports overlap the caller's work).

    The ``score`` command starts its process before it reads the trials.

    Parameters
    ----------
    modules : tuple of str
        Module names (the caller's constants, never read from data).
    """
    for name in modules:
        importlib.import_module(name)


def run_aside(fn: Callable, item, aside: bool = True) -> Aside:
    """Start ``fn(item)`` in a process of its own (:class:`AsideWorker`) while this one goes on.

    For a long task of plain Python (the cue probe's forests) that would
    otherwise leave the second core idle: started before the rest of the
    work, it is done by the time its result is needed.

    Parameters
    ----------
    fn : callable
        A module-level (picklable) function of one task, pure in its inputs.
    item : object
        Its (picklable) task.
    aside : bool
        Whether the task is worth a process (:class:`AsideWorker`'s ``start``).

    Returns
    -------
    Aside
        The handle; :meth:`Aside.result` returns ``fn(item)``.
    """
    worker = AsideWorker(aside)
    worker.submit(fn, item)
    return Aside(worker)


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
    "dask_setup",
    "iter_tasks",
    "jobqueue_options",
    "local_cluster",
    "map_tasks",
    "scheduler_address",
    "thread_env",
    "use_scheduler",
    "worker_cores",
]
