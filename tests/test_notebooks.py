"""The notebooks run from a clean kernel, show their figures, and are committed without outputs."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, (
                f"{path.name} has stale outputs"
            )


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_executes_from_a_clean_kernel(path, monkeypatch):
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")
    nb = nbformat.read(path, as_version=4)
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"
    ]
    assert not errors
    # every cell that shows a figure shows it as an image, not as "<Figure size ...>" text (issue 47)
    for cell in nb.cells:
        outputs = [o for o in cell.get("outputs", []) if "data" in o]
        figures = [o for o in outputs if "<Figure size" in o["data"].get("text/plain", "")]
        assert all("image/png" in o["data"] for o in figures), f"{path.name}: {cell.source[:60]!r}"
    assert any("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", [])), (
        f"{path.name} shows no figure"
    )


def test_a_figure_shows_itself_as_png_without_pyplot():
    """IPython asks an object for ``_repr_png_``: the report's figures answer without pyplot."""
    from IPython.core.formatters import PNGFormatter

    from bayesobs.plotting import figure_axes

    fig, (ax,) = figure_axes()
    ax.plot([0, 1], [0, 1])
    png = PNGFormatter()(fig)
    assert png is not None and png[:8] == b"\x89PNG\r\n\x1a\n"
