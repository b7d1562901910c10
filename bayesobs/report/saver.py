"""Writing the report's figures: the large ones in worker processes, the same bytes.

Drawing a figure of many panels (the psychometric grids: 60 panels, several
seconds each) is most of a report's time.  :class:`FigureWriter` hands such a
figure, pickled, to a pool of worker processes, which draw and write it while
the report goes on; a figure of few panels, or one that cannot be pickled, is
written here.  A pickled figure draws to the same PNG bytes as the original
(tests/test_report_saver.py), so the report is the same whichever way.  The
pool starts on the first large figure (spawned processes: no fork of a
process that may hold threads) and only where the machine has two cores or
more; :meth:`FigureWriter.close` waits for every figure and raises the first
error a worker met.
"""

from __future__ import annotations

import os
import pickle
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path

from matplotlib.figure import Figure

DPI = 110  # the report's figures
MIN_AXES = 16  # a figure with at least this many panels is drawn by a worker
MAX_WORKERS = 2


def default_workers() -> int:
    """Worker processes for the figures: up to :data:`MAX_WORKERS`, none on one core.

    Returns
    -------
    int
        ``min(MAX_WORKERS, cores)`` where this process may use two cores or
        more, else 0 (every figure written in this process).
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return min(MAX_WORKERS, cores) if cores >= 2 else 0


def render(blob: bytes, path: str, dpi: int = DPI) -> None:
    """Draw a pickled figure into a PNG (what a worker runs).

    Parameters
    ----------
    blob : bytes
        ``pickle.dumps`` of a :class:`matplotlib.figure.Figure` made by this
        report (never data read from a file).
    path : str
        The PNG to write.
    dpi : int
        Its resolution.
    """
    pickle.loads(blob).savefig(path, dpi=dpi)  # our own figure, pickled by our own process


class FigureWriter:
    """``writer(fig, path) -> src``: writes a report figure now or in a worker process.

    Parameters
    ----------
    workers : int, optional
        Worker processes (default :func:`default_workers`); 0 writes every
        figure in this process.
    min_axes : int
        The fewest panels a figure needs to go to a worker.
    dpi : int
        Resolution of every figure.
    """

    def __init__(self, workers: int | None = None, min_axes: int = MIN_AXES, dpi: int = DPI):
        workers = default_workers() if workers is None else int(workers)
        if workers < 0 or min_axes < 1:
            raise ValueError("workers must be >= 0 and min_axes >= 1")
        self.workers, self.min_axes, self.dpi = workers, min_axes, dpi
        self._pool: ProcessPoolExecutor | None = None
        self._pending: list[tuple[Path, Future]] = []
        self.sent = 0  # figures handed to a worker so far

    def __call__(self, fig: Figure, path: Path) -> str:
        """Write ``fig`` to ``path`` (now, or in a worker) and return its ``src`` in the page.

        Parameters
        ----------
        fig : matplotlib.figure.Figure
            The figure.
        path : Path
            The PNG, in the report's ``figures`` folder.

        Returns
        -------
        str
            ``figures/NAME.png``.
        """
        path = Path(path)
        blob = None
        if self.workers and len(fig.axes) >= self.min_axes:
            try:
                blob = pickle.dumps(fig)
            except (pickle.PicklingError, TypeError, AttributeError):
                blob = None  # e.g. a formatter that is a local function: drawn here
        if blob is None:
            fig.savefig(path, dpi=self.dpi)
        else:
            if self._pool is None:
                import multiprocessing

                self._pool = ProcessPoolExecutor(
                    self.workers, mp_context=multiprocessing.get_context("spawn")
                )
            self._pending.append((path, self._pool.submit(render, blob, str(path), self.dpi)))
            self.sent += 1
        return f"figures/{path.name}"

    def close(self) -> None:
        """Wait for every figure sent to a worker; raise the first error met.

        Raises
        ------
        Exception
            What a worker raised writing its figure (e.g. ``OSError`` on a
            full disk); the other figures are waited for first.
        """
        pending, self._pending = self._pending, []
        error = None
        for _path, fut in pending:
            exc = fut.exception()
            if exc is not None and error is None:
                error = exc
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        if error is not None:
            raise error

    def __enter__(self) -> FigureWriter:
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is None:
            self.close()
        else:  # already failing: stop the workers, keep the first error
            for _path, fut in self._pending:
                fut.cancel()
            self._pending = []
            if self._pool is not None:
                self._pool.shutdown(cancel_futures=True)
                self._pool = None
