"""Numerosity: how many dots are there."""

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
        """``n`` dot sets, counts log-uniform in ``[low, high]``, one dot per distinct grid cell."""
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
        """The dots drawn at their positions."""
        img = canvas(SIZE, SIZE)
        for x, y in zip(stim.params["x"], stim.params["y"], strict=True):
            disc(img, x, y, RADIUS, (0, 0, 0))
        return img
