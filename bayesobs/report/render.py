"""The report's figures written on two cores, the same files as on one.

Drawing dominates a report's time (a psychometric grid of 50 panels takes
seconds) and Matplotlib draws on one core.  :class:`FigureWriter` hands the
figures of a large report to drawing processes
(:class:`bayesobs.distributed.AsideWorker`): a figure is pickled as it is
handed over and drawn there by the same ``savefig`` call, so each PNG is
byte for byte the one this process would write (tests/report/test_render.py).
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from matplotlib.figure import Figure

from ..distributed import AsideWorker

DPI = 110  # the report's figures
# A report starts its drawing processes once it has this many panels to draw: a small
# report is drawn here before a process (Python, Matplotlib: about 1.5 s) would be ready.
ASIDE_MIN_PANELS = 24
ASIDE_WORKERS = 2  # drawing processes (at most the cores): this one builds the figures meanwhile


class FigureTask(NamedTuple):
    """A figure to be built and drawn where there is a free core: ``build(*args)``.

    For a figure of many panels, whose building (its axes) costs about as
    much as drawing it: handed over as its data, not as a built figure.
    """

    build: Callable[..., Figure]  # module-level, so that it pickles
    args: tuple
    panels: int  # its drawing cost: the panels it will have, and one for the figure


def save_png(item: tuple[Figure | FigureTask, Path]) -> None:
    """Write one figure as PNG (the task of a drawing process, and of this one)."""
    fig, path = item
    if isinstance(fig, FigureTask):
        fig = fig.build(*fig.args)
    fig.savefig(path, dpi=DPI)


def panels(fig: Figure | FigureTask) -> int:
    """A figure's drawing cost in panels: its visible axes, and one for the figure itself."""
    if isinstance(fig, FigureTask):
        return fig.panels
    return 1 + sum(ax.get_visible() for ax in fig.axes)


class FigureWriter:
    """``save(fig, path) -> src`` for the report builder, the drawing done on the other cores.

    ``fig`` is a built figure or a :class:`FigureTask` (built where it is drawn).
    Figures are drawn here until :data:`ASIDE_MIN_PANELS` panels are to be
    drawn (a small report never starts a process); then :data:`ASIDE_WORKERS`
    drawing processes start and every later figure is drawn by the first of
    them that is free, while this process goes on building the next
    figures.  :meth:`close` waits until every file is written (and raises a
    drawing error).

    Parameters
    ----------
    aside : bool
        Whether drawing processes may start (they start only where there
        are two cores; :class:`bayesobs.distributed.AsideWorker`).
    """

    def __init__(self, aside: bool = True) -> None:
        self._aside = aside
        self._worker: AsideWorker | None = None
        self.here = self.there = 0  # panels drawn here, panels handed to the processes

    def save(self, fig: Figure | FigureTask, path: Path) -> str:
        """Write ``fig`` (or build it and write it) to ``path``, here or aside; return its ``src``."""
        cost = panels(fig)
        if self._worker is None and self._aside and self.here + cost >= ASIDE_MIN_PANELS:
            self._worker = AsideWorker(processes=ASIDE_WORKERS)
        if self._worker is not None and self._worker.aside:
            try:
                self._worker.submit(save_png, (fig, path))
                self.there += cost
                return f"figures/{path.name}"
            except (pickle.PicklingError, TypeError, AttributeError):
                pass  # a figure that does not pickle (a lambda formatter) is drawn here
        save_png((fig, path))
        self.here += cost
        return f"figures/{path.name}"

    def close(self) -> None:
        """Wait until every figure handed aside is written."""
        if self._worker is not None:
            worker, self._worker = self._worker, None
            worker.results()
