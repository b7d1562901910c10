"""The tasks: stimulus generation and rendering, shared by every paradigm's tasks."""

from __future__ import annotations

from inspect import signature

from ..errors import BayesobsInputError
from ..paradigms import registered
from .base import Stimulus, Task, blur, from_png, to_png
from .perception import PerceptionTask


def task_classes() -> dict[str, type[Task]]:
    """Every task by name, from the registered paradigms (:mod:`bayesobs.paradigms`)."""
    return {n: p.task(n) for p in registered(default=True) for n in p.tasks}


def __getattr__(name: str):
    """``TASKS``: :func:`task_classes` when asked for (PEP 562)."""
    if name == "TASKS":
        return task_classes()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_task(name: str, **options) -> Task:
    """An instance of the task called ``name`` (``duration`` takes ``ami=DIR``, ``hvs`` ``hvs=DIR``)."""
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
