"""The report's figures drawn by worker processes are the bytes drawn in-process (issue 32)."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from bayesobs.report.saver import DPI, FigureWriter, default_workers


def panels(n: int, seed: int) -> Figure:
    """A constrained-layout figure of ``n`` panels (as the psychometric grids)."""
    rng = np.random.default_rng(seed)
    fig = Figure(figsize=(8, 6), layout="constrained")
    for i, ax in enumerate(np.ravel(fig.subplots(-(-n // 4), 4, squeeze=False))[:n]):
        x = np.sort(rng.uniform(0, 10, 12))
        ax.errorbar(x, rng.uniform(size=12), yerr=0.1, fmt="o", ms=3)
        ax.plot(x, np.tanh(x / 3), gid="fit")
        ax.set_title(f"panel {i}\nthreshold {x[3]:.3g}", fontsize=7)
    return fig


def test_figures_from_workers_are_the_bytes_drawn_here(tmp_path):
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    for k, n in enumerate((8, 3, 16)):
        panels(n, k).savefig(here / f"f{k}.png", dpi=DPI)
    with FigureWriter(workers=2, min_axes=5) as save:  # the 3-panel figure has 4 axes
        srcs = [save(panels(n, k), there / f"f{k}.png") for k, n in enumerate((8, 3, 16))]
        assert save.sent == 2  # the 8- and 16-panel figures went to the workers
    assert srcs == ["figures/f0.png", "figures/f1.png", "figures/f2.png"]
    for k in range(3):
        assert (there / f"f{k}.png").read_bytes() == (here / f"f{k}.png").read_bytes()


def test_a_worker_error_is_raised_after_the_other_figures(tmp_path):
    save = FigureWriter(workers=1, min_axes=1)
    save(panels(2, 0), tmp_path / "missing-folder" / "a.png")
    save(panels(2, 1), tmp_path / "b.png")
    with pytest.raises(FileNotFoundError):
        save.close()
    assert (tmp_path / "b.png").exists()
    assert save.sent == 2


def test_an_unpicklable_figure_is_drawn_here(tmp_path):
    fig = panels(4, 2)
    fig.axes[0].xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"<{v:g}>"))
    with FigureWriter(workers=2, min_axes=1) as save:
        save(fig, tmp_path / "local.png")
        assert save.sent == 0  # a lambda does not pickle: drawn in this process
    assert (tmp_path / "local.png").stat().st_size > 0


def test_one_core_draws_everything_here(monkeypatch):
    import os

    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0}, raising=False)
    assert default_workers() == 0
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(16)), raising=False)
    assert default_workers() == 2
    with pytest.raises(ValueError, match="workers"):
        FigureWriter(workers=-1)
