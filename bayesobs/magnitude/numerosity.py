"""Numerosity: how many dots are there.

Dots (radius 5 px) are placed without overlap (centres at least 14 px apart)
on a 400 x 400 image; the text rendering is a 24 x 24 character grid with an
``o`` per dot, at the dot's grid cell (dots are placed on distinct cells, so
both renderings show the same count).  Counts are drawn log-uniformly in the
session range (numerosity is perceived on a log scale), rounded to integers.
"""

from __future__ import annotations

import numpy as np

from ..stimuli.base import Stimulus, Task, canvas, disc
from ..stimuli.distributions import draw_value

SIZE = 400
GRID = 24
RADIUS = 5.0


class Numerosity(Task):
    """The number of dots."""

    name = "numerosity"
    role = "dot counter"
    person_task = "see pictures of dots and estimate how many dots each shows"
    instruction = "Estimate how many dots there are, as a whole number."
    unit = "dots"
    answer_range = (0.0, 1000.0)
    value_range = (1.0, float(GRID * GRID))  # one dot per cell of the 24 x 24 grid

    def generate(self, rng, low, high, n, options):
        """``n`` dot sets, counts log-uniform in ``[low, high]``, one dot per distinct grid cell.

        Parameters
        ----------
        rng : numpy.random.Generator
            The session's random stream.
        low, high : float
            The session's range of counts, within [1, 576].
        n : int
            Stimuli to make.
        options : dict
            The session entry's ``distribution``: ``uniform`` (the default)
            draws counts log-uniformly; another distribution draws them
            from itself.

        Returns
        -------
        list of Stimulus
            Value: the count; text: the 24 x 24 grid of ``.`` with ``o``
            per dot; params: ``x`` and ``y``, the dots' centres in pixels.
        """
        out = []
        cell = SIZE / GRID
        for _ in range(n):
            if options.get("distribution", "uniform") == "uniform":  # log-uniform, as ever
                value = np.exp(rng.uniform(np.log(low), np.log(high)))
            else:
                value = draw_value(rng, low, high, options)
            count = int(np.clip(round(value), max(1, low), high))
            cells = rng.choice(GRID * GRID, size=count, replace=False)
            gy, gx = np.divmod(cells, GRID)
            # jitter within the cell, keeping dots inside it: centres >= 2 * RADIUS + 4 px apart
            jx = rng.uniform(RADIUS + 2, cell - RADIUS - 2, count)
            jy = rng.uniform(RADIUS + 2, cell - RADIUS - 2, count)
            xs, ys = gx * cell + jx, gy * cell + jy
            grid = np.full((GRID, GRID), ".")
            grid[gy, gx] = "o"
            text = "\n".join("".join(row) for row in grid)
            out.append(
                Stimulus(
                    self.name,
                    float(count),
                    text,
                    {"x": np.round(xs, 2).tolist(), "y": np.round(ys, 2).tolist()},
                )
            )
        return out

    def draw(self, stim):
        """The dots drawn at their positions.

        Parameters
        ----------
        stim : Stimulus
            A stimulus made by :meth:`generate`.

        Returns
        -------
        ndarray of float, shape (400, 400, 3)
            RGB values in [0, 255].
        """
        img = canvas(SIZE, SIZE)
        for x, y in zip(stim.params["x"], stim.params["y"], strict=True):
            disc(img, x, y, RADIUS, (0, 0, 0))
        return img
