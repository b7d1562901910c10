"""Maze distance: a non-self-intersecting path on an integer grid."""

from __future__ import annotations

import math

import numpy as np
from PIL import Image, ImageDraw

from ..stimuli.base import Stimulus, Task, canvas, disc, hline, segment
from ..stimuli.distributions import draw_value

UNIT_PX = 20
DIRS = {"right": (1, 0), "up": (0, 1), "left": (-1, 0), "down": (0, -1)}


def random_path(
    rng: np.random.Generator, runs: int, max_len: int = 4
) -> list[tuple[str, int]] | None:
    """A self-avoiding path of ``runs`` straight runs, or ``None`` if it got stuck."""
    pos = (0, 0)
    seen = {pos}
    moves: list[tuple[str, int]] = []
    last = None
    for _ in range(runs):
        options = []
        for name, (dx, dy) in DIRS.items():
            if last is not None and (dx, dy) in (DIRS[last], (-DIRS[last][0], -DIRS[last][1])):
                continue  # turn at every run: no straight continuation, no reversal
            for length in range(1, max_len + 1):
                pts = [(pos[0] + dx * s, pos[1] + dy * s) for s in range(1, length + 1)]
                if any(p in seen for p in pts):
                    break
                options.append((name, length, pts))
        if not options:
            return None
        name, length, pts = options[int(rng.integers(len(options)))]
        seen.update(pts)
        pos = pts[-1]
        moves.append((name, length))
        last = name
    return moves


def endpoints(moves: list[tuple[str, int]]) -> list[tuple[int, int]]:
    """The integer grid points a path visits, starting at the origin."""
    pts = [(0, 0)]
    for name, length in moves:
        dx, dy = DIRS[name]
        x, y = pts[-1]
        pts.append((x + dx * length, y + dy * length))
    return pts


def describe(moves: list[tuple[str, int]]) -> str:
    """The moves as the text rendering shows them (e.g. ``right 3, up 2``)."""
    steps = ", ".join(f"{name} {length}" for name, length in moves)
    return f"Start at (0, 0). Move {steps}."


class MazeDistance(Task):
    """Straight-line distance between the start and end of a path, in grid units."""

    name = "maze_distance"
    role = "maze distance estimator"
    person_task = (
        "see a path drawn on a grid and estimate the straight-line distance between its start "
        "and its end, in grid units"
    )
    instruction = (
        "Estimate the straight-line distance between the start (green) and the end (red) "
        "of the path, in grid units, as a decimal number."
    )
    unit = "units"
    answer_range = (0.0, 100.0)
    # 3 to 8 runs of 1-4 units, turning at each: at most 16 units across and 16 up
    value_range = (0.0, math.hypot(16, 16))
    size = 520

    def generate(self, rng, low, high, n, options):
        """``n`` grid paths whose straight start-to-end distance lies in ``[low, high]``."""
        out = []
        max_extent = (self.size - 80) // UNIT_PX
        for _ in range(n):
            target = draw_value(rng, low, high, options)
            best = None
            for _attempt in range(150):
                runs = int(rng.integers(3, 9))
                moves = random_path(rng, runs)
                if moves is None:
                    continue
                pts = np.array(endpoints(moves))
                if np.ptp(pts[:, 0]) > max_extent or np.ptp(pts[:, 1]) > max_extent:
                    continue
                d = math.hypot(*pts[-1])
                if low <= d <= high and (best is None or abs(d - target) < abs(best[0] - target)):
                    best = (d, moves)
                    if abs(d - target) < 0.3:
                        break
            if best is None:
                raise RuntimeError(f"no path with distance in [{low}, {high}] fits the canvas")
            d, moves = best
            out.append(Stimulus(self.name, d, describe(moves), {"moves": [list(m) for m in moves]}))
        return out

    def draw(self, stim):
        """The path drawn centred, its start green and its end red, with a one-unit scale bar."""
        img = canvas(self.size, self.size)
        pts = np.array(endpoints([tuple(m) for m in stim.params["moves"]]), dtype=float)
        # centre the path; image y grows downwards
        cx = (pts[:, 0].min() + pts[:, 0].max()) / 2
        cy = (pts[:, 1].min() + pts[:, 1].max()) / 2
        px = self.size / 2 + (pts[:, 0] - cx) * UNIT_PX
        py = self.size / 2 - 10 - (pts[:, 1] - cy) * UNIT_PX
        for i in range(len(pts) - 1):
            segment(img, px[i], py[i], px[i + 1], py[i + 1], 3)
        disc(img, px[0], py[0], 6, (0, 170, 0))
        disc(img, px[-1], py[-1], 6, (220, 0, 0))
        # scale bar: one grid unit, labelled
        hline(img, 20, 20 + UNIT_PX, self.size - 20, 3, (0, 0, 255))
        im = Image.fromarray(img.astype(np.uint8))
        ImageDraw.Draw(im).text((20 + UNIT_PX + 6, self.size - 27), "= 1 unit", fill=(0, 0, 255))
        return np.asarray(im, dtype=float)
