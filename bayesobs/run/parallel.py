"""Make the stimuli of independent session runs in worker processes (issue 32).

A perception task renders and encodes every image while it generates its
trials (Percept-V: 6,000 images, most of a sweep's time), and each (session,
run) is a pure function of its seed, so :func:`bayesobs.run.plan.plan` hands
those runs to a pool of worker processes.  Results are taken in the original
order, so the plan (stimuli, seeds, order, images) is the same byte for byte
as one process makes it.  Workers are started with ``spawn`` (never a fork of
a process that may hold threads); at most two runs per worker are in flight.

``BAYESOBS_PLAN_WORKERS`` sets the number of workers (1: none, all in this
process); the default is ``min(2, os.cpu_count())`` for a plan of at least
:data:`MIN_TRIALS` trials.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor

import numpy as np

from ..errors import BayesobsInputError
from ..stimuli import PerceptionTask, Stimulus, Task

ENV = "BAYESOBS_PLAN_WORKERS"
# below this many trials a plan is made in one process unless workers are asked for: starting a
# worker (importing numpy, scipy, Pillow) costs about what 30 Percept-V trials do
MIN_TRIALS = 100


def plan_workers(workers: int | None = None, trials: int | None = None) -> int:
    """How many processes make the stimuli: ``workers``, else ``$BAYESOBS_PLAN_WORKERS``, else up to 2.

    Parameters
    ----------
    workers : int, optional
        The number asked for (1: make every stimulus in this process).
    trials : int, optional
        The plan's trials: by default fewer than :data:`MIN_TRIALS` are
        made in one process (workers would cost more than they save).

    Returns
    -------
    int
        ``workers``; without it the environment variable's value, else
        ``min(2, os.cpu_count())`` (1 for a plan of fewer than
        :data:`MIN_TRIALS` trials).

    Raises
    ------
    BayesobsInputError
        When the number (or the variable) is not a whole number >= 1.
    """
    where = "workers"
    if workers is None:
        raw = os.environ.get(ENV, "").strip()
        if not raw:
            return 1 if trials is not None and trials < MIN_TRIALS else min(2, os.cpu_count() or 1)
        where = ENV
        try:
            workers = int(raw)
        except ValueError:
            raise BayesobsInputError(f"{ENV} must be a whole number >= 1, not {raw!r}") from None
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise BayesobsInputError(f"{where} must be a whole number >= 1, not {workers!r}")
    return workers


def renders_in_generate(task: Task) -> bool:
    """Whether generating ``task``'s stimuli renders their images (worth a worker process).

    Parameters
    ----------
    task : Task
        A task instance.

    Returns
    -------
    bool
        True for the perception tasks of this package (Percept-V, Tunnel
        Vision), whose :meth:`~bayesobs.stimuli.PerceptionTask.generate`
        draws and encodes every image; False for tasks that render later
        (visual search, magnitude tasks) or are defined outside the package
        (a worker could not import them).
    """
    return isinstance(task, PerceptionTask) and type(task).__module__.startswith("bayesobs.")


def make_run(
    cls: type[PerceptionTask], seed: int, low: float, high: float, n: int, options: dict
) -> tuple[list[Stimulus], dict[str, tuple]]:
    """One session run's stimuli, made by a fresh task (in a worker process).

    Parameters
    ----------
    cls : type
        The perception task's class.
    seed : int
        The session run's seed (its stimuli's random stream).
    low, high : float
        The session's range.
    n : int
        Trials to make.
    options : dict
        The session's options.

    Returns
    -------
    stimuli : list of Stimulus
        What ``cls().generate`` returns.
    trials : dict
        Their images and demonstrations
        (:meth:`~bayesobs.stimuli.PerceptionTask.made_trials`).
    """
    task = cls()
    stimuli = task.generate(np.random.default_rng(seed), low, high, n, options)
    return stimuli, task.made_trials(stimuli)


def make_runs(
    task: PerceptionTask, runs: list[tuple[int, float, float, int, dict]], workers: int
) -> Iterator[list[Stimulus]]:
    """The stimuli of each ``(seed, low, high, n, options)`` run, in order, made by ``workers`` processes.

    The images and demonstrations of each run are handed to ``task``
    (:meth:`~bayesobs.stimuli.PerceptionTask.keep_trials`) before its
    stimuli are yielded, so ``task`` renders them as if it had made them.

    Parameters
    ----------
    task : PerceptionTask
        The planning process's task.
    runs : list of tuple
        ``(seed, low, high, n, options)`` per session run.
    workers : int
        Worker processes (>= 1).

    Yields
    ------
    list of Stimulus
        Each run's stimuli, in the order of ``runs``.

    Raises
    ------
    BayesobsInputError
        A worker's (a bad option, a range without problem sizes), as one
        plain error; the runs not started are cancelled.
    """
    ctx = multiprocessing.get_context("spawn")
    todo = iter(runs)
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        pending: deque[Future] = deque()

        def submit() -> None:
            job = next(todo, None)
            if job is not None:
                pending.append(pool.submit(make_run, type(task), *job))

        for _ in range(2 * workers):  # bounded: at most two runs per worker in flight
            submit()
        while pending:
            future = pending.popleft()
            try:
                stimuli, trials = future.result()
            except BayesobsInputError as exc:
                for f in pending:
                    f.cancel()
                # the same one-line error as in one process, without the worker's traceback
                raise type(exc)(*exc.args) from None
            submit()
            task.keep_trials(trials)
            yield stimuli
