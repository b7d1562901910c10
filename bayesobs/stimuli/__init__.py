"""The tasks: stimulus generation and rendering (magnitude estimation, visual search, perception)."""

from __future__ import annotations

from ..errors import BayesobsInputError
from ..paradigms import registered
from .base import Stimulus, Task, blur, from_png, to_png
from .duration import Duration
from .hvs import HvsTask
from .perception import PerceptionTask
from .search import SearchTask

# the tasks of the registered paradigms (bayesobs.paradigms): magnitude, visual search, hvs
# (HVSBench-style questions, needs hvs=DIR), perception (Tunnel Vision), Percept-V
TASKS: dict[str, type[Task]] = {
    name: p.task(name) for p in registered(default=True) for name in p.tasks
}


def task_classes() -> dict[str, type[Task]]:
    """Every task by name: :data:`TASKS`, then those of paradigms registered since.

    Returns
    -------
    dict of str to type
        Task name -> its :class:`~bayesobs.stimuli.base.Task` class.
    """
    return {
        **TASKS,
        **{n: p.task(n) for p in registered(default=True) for n in p.tasks if n not in TASKS},
    }


def get_task(name: str, **options) -> Task:
    """An instance of the task called ``name`` (``duration`` takes ``ami=DIR``, ``hvs`` ``hvs=DIR``).

    Parameters
    ----------
    name : str
        A key of :func:`task_classes`.
    **options
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
    if name == "duration":
        return Duration(ami=options.get("ami"))
    if name == "hvs":
        return HvsTask(hvs=options.get("hvs"))
    return tasks[name]()


__all__ = [
    "TASKS",
    "PerceptionTask",
    "SearchTask",
    "Stimulus",
    "Task",
    "blur",
    "from_png",
    "get_task",
    "task_classes",
    "to_png",
]
