"""The report's figures written on two cores, the same files as on one."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from matplotlib.figure import Figure

from ..distributed import Task, submit

DPI = 110  # the report's figures
# A report hands its figures to worker processes once it has this many panels to draw: a
# small report is drawn here before a worker (Python, Matplotlib: about 1.5 s) would be ready.
WORKER_MIN_PANELS = 24


class FigureTask(NamedTuple):
    """A figure to be built and drawn where there is a free core: ``build(*args)``."""

    build: Callable[..., Figure]  # module-level, so that it pickles
    args: tuple
    panels: int  # its drawing cost: the panels it will have, and one for the figure


def save_png(fig: Figure | FigureTask | bytes, path: Path) -> None:
    """Write one figure (or its pickle) as PNG (the task of a worker, and of this process)."""
    if isinstance(fig, bytes):
        fig = pickle.loads(fig)  # pickled by FigureWriter.save, our own
    if isinstance(fig, FigureTask):
        fig = fig.build(*fig.args)
    fig.savefig(path, dpi=DPI)


def panels(fig: Figure | FigureTask) -> int:
    """A figure's drawing cost in panels: its visible axes, and one for the figure itself."""
    if isinstance(fig, FigureTask):
        return fig.panels
    return 1 + sum(ax.get_visible() for ax in fig.axes)


class FigureWriter:
    """``save(fig, path) -> src`` for the report builder, the drawing done by worker processes."""

    def __init__(self, workers: bool = True) -> None:
        self._workers = workers
        self._tasks: list[Task] = []
        self.here = self.there = 0  # panels drawn here, panels handed to the workers

    def save(self, fig: Figure | FigureTask, path: Path) -> str:
        """Write ``fig`` (or build it and write it) to ``path``, here or in a worker; return its ``src``."""
        cost = panels(fig)
        if self._workers and self.here + self.there + cost >= WORKER_MIN_PANELS:
            try:
                blob = pickle.dumps(fig, protocol=pickle.HIGHEST_PROTOCOL)
            except (pickle.PicklingError, TypeError, AttributeError):
                blob = None  # a figure that does not pickle (a lambda formatter) is drawn here
            if blob is not None:
                # absolute: a worker keeps the folder it started in, not the caller's
                task = submit(save_png, blob, Path(path).absolute())
                if task.elsewhere:
                    self._tasks.append(task)
                    self.there += cost
                    return f"figures/{path.name}"
        save_png(fig, path)
        self.here += cost
        return f"figures/{path.name}"

    def close(self) -> None:
        """Wait until every figure handed to a worker is written."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.result()
