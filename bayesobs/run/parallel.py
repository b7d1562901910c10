"""Make the stimuli of independent session runs in worker processes (issue 32).

A perception task renders and encodes every image while it generates its
trials (Percept-V: 6,000 images, most of a sweep's time), and each (session,
run) is a pure function of its seed, so :func:`bayesobs.run.plan.plan` hands
those runs to worker processes (:func:`bayesobs.distributed.submit`).
Results are taken in the original order, so the plan (stimuli, seeds, order,
images) is the same byte for byte as one process makes it; at most two runs
per worker are in flight.  ``BAYESOBS_WORKERS`` sets the number of workers
(1: none, all in this process); by default a plan of fewer than
:data:`MIN_TRIALS` trials is made in this process.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

import numpy as np

from ..distributed import release, submit
from ..errors import BayesobsInputError
from ..stimuli import PerceptionTask, Stimulus, Task

# below this many trials a plan is made in one process unless workers are asked for: starting a
# worker (importing numpy, scipy, Pillow) costs about what 30 Percept-V trials do
MIN_TRIALS = 100


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
    todo = iter(runs)
    pending: deque = deque()

    def send() -> None:
        job = next(todo, None)
        if job is not None:
            pending.append(submit(make_run, type(task), *job, workers=workers))

    try:
        for _ in range(2 * workers):  # bounded: at most two runs per worker in flight
            send()
        while pending:
            try:
                stimuli, trials = pending.popleft().result()
            except BayesobsInputError as exc:
                # the same one-line error as in one process, without the worker's traceback
                raise type(exc)(*exc.args) from None
            send()
            task.keep_trials(trials)
            yield stimuli
    finally:
        release()  # the workers end with the plan (the runs not started are cancelled)
