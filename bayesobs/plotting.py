"""The one figure helper: axes to draw on, given or new, without pyplot's global state."""

from __future__ import annotations

import io

import numpy as np
from matplotlib import figure


class Figure(figure.Figure):
    """A matplotlib figure that a notebook shows as an image, without pyplot's inline backend."""

    def _repr_png_(self) -> bytes:
        """The figure as PNG, what IPython displays (it registers no formatter without pyplot)."""
        buf = io.BytesIO()
        self.savefig(buf, format="png", dpi=100)
        return buf.getvalue()


def figure_axes(ax=None, n: int = 1, size: tuple[float, float] = (4.2, 3.4)):
    """The figure and the axes a plotting function draws on."""
    if ax is not None:
        axes = list(np.atleast_1d(ax))
        return axes[0].figure, axes
    fig = Figure(figsize=(size[0] * n, size[1]), layout="constrained")
    return fig, list(np.atleast_1d(fig.subplots(1, n)))
