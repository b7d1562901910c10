"""Issue 32: the report's figures drawn by worker processes are the same files as drawn here."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from matplotlib.figure import Figure

from bayesobs.report.render import WORKER_MIN_PANELS, FigureTask, FigureWriter, panels, save_png


def grid(n: int, seed: int) -> Figure:
    """A figure of ``n`` panels (module-level: it is built where it is drawn)."""
    rng = np.random.default_rng(seed)
    fig = Figure(figsize=(8, 2 * (n // 4 + 1)), layout="constrained")
    for ax in np.atleast_1d(fig.subplots(n // 4 + 1, 4)).ravel()[:n]:
        ax.plot(rng.normal(size=20), "o-", ms=2)
        ax.set_title(f"panel {rng.integers(100)}", fontsize=7)
    return fig


def test_panels_count_the_visible_axes_and_the_figure():
    fig = grid(5, 0)  # a 2 x 4 grid: 5 drawn, 3 left empty but visible
    assert panels(fig) == 1 + 8
    fig.axes[-1].set_visible(False)
    assert panels(fig) == 1 + 7
    assert panels(FigureTask(grid, (30, 0), 31)) == 31


@pytest.mark.slow
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="worker processes need two cores")
def test_figures_drawn_by_workers_are_byte_for_byte_the_ones_drawn_here(tmp_path):
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    figures = [("small", lambda: grid(3, 1)), ("task", lambda: FigureTask(grid, (30, 2), 31))]
    figures += [(f"more{i}", lambda i=i: grid(9, 10 + i)) for i in range(3)]
    for name, make in figures:
        save_png(make(), here / f"{name}.png")
    writer = FigureWriter()
    srcs = [writer.save(make(), there / f"{name}.png") for name, make in figures]
    assert srcs == [f"figures/{name}.png" for name, _ in figures]
    # the small first one is drawn here; the 31-panel task starts the workers
    assert writer.here == panels(grid(3, 1)) < WORKER_MIN_PANELS
    assert writer.there == 31 + 3 * panels(grid(9, 0))
    writer.close()
    for name, _ in figures:
        assert (there / f"{name}.png").read_bytes() == (here / f"{name}.png").read_bytes(), name


def test_a_small_report_starts_no_process(tmp_path):
    writer = FigureWriter()
    writer.save(grid(3, 0), tmp_path / "a.png")
    writer.save(grid(2, 1), tmp_path / "b.png")
    assert writer.there == 0 and not writer._tasks
    writer.close()
    assert (tmp_path / "a.png").stat().st_size > 1000


def unpicklable_grid() -> Figure:
    fig = grid(30, 3)
    fig.axes[0].xaxis.set_major_formatter(lambda x, pos: f"{x:.0f}")  # a lambda: no pickle
    return fig


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="worker processes need two cores")
def test_a_figure_that_does_not_pickle_is_drawn_here(tmp_path):
    writer = FigureWriter()
    writer.save(unpicklable_grid(), tmp_path / "lambda.png")
    assert writer.there == 0 and writer.here == panels(unpicklable_grid())
    writer.close()
    save_png(unpicklable_grid(), tmp_path / "again.png")
    assert (tmp_path / "lambda.png").read_bytes() == (tmp_path / "again.png").read_bytes()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="worker processes need two cores")
def test_a_relative_path_is_written_where_the_caller_is_after_a_change_of_folder(
    tmp_path, monkeypatch
):
    """Workers started in one folder write a caller's relative path in the caller's folder."""
    first, second = tmp_path / "first", tmp_path / "second"
    for folder in (first, second):
        (folder / "figures").mkdir(parents=True)
    monkeypatch.chdir(first)
    writer = FigureWriter()
    writer.save(FigureTask(grid, (30, 3), 31), first / "figures" / "a.png")  # workers start here
    writer.close()
    monkeypatch.chdir(second)  # as a notebook or a script that moves on
    writer = FigureWriter()
    writer.save(FigureTask(grid, (30, 4), 31), Path("figures") / "b.png")
    writer.close()
    assert (second / "figures" / "b.png").exists()
    assert not (first / "figures" / "b.png").exists()
