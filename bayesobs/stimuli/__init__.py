"""The tasks: stimulus generation and rendering, shared by every paradigm's tasks.

Each paradigm's tasks live in its own folder (``bayesobs.magnitude``,
``bayesobs.search``, ``bayesobs.tunnel``, ``bayesobs.perceptv``,
``bayesobs.hvs``) and are found through the paradigm registry
(:mod:`bayesobs.paradigms`); this package holds what they share (the
:class:`~bayesobs.stimuli.base.Task` interface, drawing, prior
distributions, the perception tasks' base class) and the task table.
"""

from __future__ import annotations

from inspect import signature

from ..errors import BayesobsInputError
from ..paradigms import registered
from .base import Stimulus, Task, blur, from_png, to_png
from .perception import PerceptionTask


def task_classes() -> dict[str, type[Task]]:
    """Every task by name, from the registered paradigms (:mod:`bayesobs.paradigms`).

    Returns
    -------
    dict of str to type
        Task name -> its :class:`~bayesobs.stimuli.base.Task` class, paradigm
        by paradigm in the order they were registered.
    """
    return {n: p.task(n) for p in registered(default=True) for n in p.tasks}


def __getattr__(name: str):
    """``TASKS``: :func:`task_classes` when asked for (PEP 562).

    Computed on use, not at import: the task modules live in the paradigms'
    folders, which import :mod:`bayesobs.stimuli.base`.
    """
    if name == "TASKS":
        return task_classes()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_task(name: str, **options) -> Task:
    """An instance of the task called ``name`` (``duration`` takes ``ami=DIR``, ``hvs`` ``hvs=DIR``).

    Parameters
    ----------
    name : str
        A key of :func:`task_classes`.
    **options
        Passed to the task's constructor where it takes them by name:
        ``ami`` (a folder of the AMI corpus, for ``duration``) or ``hvs``
        (a folder of HVSBench-style questions, for ``hvs``); ignored for
        other tasks.

    Returns
    -------
    Task
        The task.

    Raises
    ------
    BayesobsInputError
        When ``name`` is not a task (the message lists them).
    """
    tasks = task_classes()
    if name not in tasks:
        raise BayesobsInputError(f"unknown task {name!r}; choose from {', '.join(tasks)}")
    cls = tasks[name]
    takes = signature(cls).parameters
    return cls(**{k: v for k, v in options.items() if k in takes})


__all__ = [
    "TASKS",
    "PerceptionTask",
    "Stimulus",
    "Task",
    "blur",
    "from_png",
    "get_task",
    "task_classes",
    "to_png",
]
