"""Make the stimuli of independent session runs in worker processes (issue 32)."""

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
    """Whether generating ``task``'s stimuli renders their images (worth a worker process)."""
    return isinstance(task, PerceptionTask) and type(task).__module__.startswith("bayesobs.")


def make_run(
    cls: type[PerceptionTask], seed: int, low: float, high: float, n: int, options: dict
) -> tuple[list[Stimulus], dict[str, tuple]]:
    """One session run's stimuli, made by a fresh task (in a worker process)."""
    task = cls()
    stimuli = task.generate(np.random.default_rng(seed), low, high, n, options)
    return stimuli, task.made_trials(stimuli)


def make_runs(
    task: PerceptionTask, runs: list[tuple[int, float, float, int, dict]], workers: int
) -> Iterator[list[Stimulus]]:
    """The stimuli of each ``(seed, low, high, n, options)`` run, in order, made by ``workers`` processes."""
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
