"""The tasks: stimulus generation and rendering (magnitude estimation, visual search, perception)."""

from __future__ import annotations

from ..errors import BayesobsInputError
from .base import Stimulus, Task, blur, from_png, to_png
from .duration import Duration
from .hvs import HvsTask
from .lines import LineRatio, MarkerLocation
from .maze import MazeDistance
from .numerosity import Numerosity
from .perception import PerceptionTask
from .perceptv import PerceptV
from .search import CircleSizes, LightPriors, SearchTask, TwoAmongFive
from .tunnel import Circuits, ObjectReid, ScavengerHunt

TASKS: dict[str, type[Task]] = {
    "line_ratio": LineRatio,
    "marker_location": MarkerLocation,
    "maze_distance": MazeDistance,
    "duration": Duration,
    "numerosity": Numerosity,
    "circle_sizes": CircleSizes,
    "two_among_five": TwoAmongFive,
    "light_priors": LightPriors,
    "hvs": HvsTask,  # HVSBench-style questions (needs hvs=DIR)
    "object_reid": ObjectReid,
    "scavenger_hunt": ScavengerHunt,
    "circuits": Circuits,
    "percept_v": PerceptV,
}


def get_task(name: str, **options) -> Task:
    """An instance of the task called ``name`` (``duration`` takes ``ami=DIR``, ``hvs`` ``hvs=DIR``).

    Parameters
    ----------
    name : str
        A key of :data:`TASKS`.
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
    if name not in TASKS:
        raise BayesobsInputError(f"unknown task {name!r}; choose from {', '.join(TASKS)}")
    if name == "duration":
        return Duration(ami=options.get("ami"))
    if name == "hvs":
        return HvsTask(hvs=options.get("hvs"))
    return TASKS[name]()


__all__ = [
    "TASKS",
    "PerceptionTask",
    "SearchTask",
    "Stimulus",
    "Task",
    "blur",
    "from_png",
    "get_task",
    "to_png",
]
