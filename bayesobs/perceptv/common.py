"""Shared pieces of the Percept-V generators: the trial record, prompts, palette, shape drawing."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from PIL import Image, ImageDraw

from ..stimuli.drawing import rgb
from .prompts import BULLETS

FORMAT_LINES = (
    "-Please provide a short and precise answer according to the given format.",
    "-Follow the output format strictly.",
)
ANSWER_TYPES = ("single", "fixed", "list", "set")

# The 20-name palette of colours_present / layered_colours / list_colours (Appendix A.1.5),
# as Pillow/CSS colour values.
PALETTE20: dict[str, tuple[int, int, int]] = {
    name: rgb(name)
    for name in (
        "black",
        "gray",
        "brown",
        "maroon",
        "red",
        "coral",
        "tan",
        "orange",
        "ivory",
        "goldenrod",
        "yellow",
        "green",
        "olive",
        "turquoise",
        "skyblue",
        "blue",
        "lavender",
        "purple",
        "pink",
        "fuchsia",
    )
}
WHITE = (255, 255, 255)
BLACK = (0, 0, 0)


def prompt(domain: str) -> str:
    """The paper's prompt for ``domain``: its Appendix A.1 bullets and the two format lines."""
    return "\n".join(["- " + b for b in BULLETS[domain]] + list(FORMAT_LINES))


@dataclass(frozen=True)
class Trial:
    """One Percept-V problem instance."""

    domain: str
    size: int
    images: tuple[Image.Image, ...]
    prompt: str
    answer: str
    answer_type: str
    answer_format: str
    skills: tuple[str, ...]
    max_tokens: int
    meta: dict[str, Any] = field(default_factory=dict)
    accept: frozenset[str] = frozenset()

    @property
    def task(self) -> str:
        """The task name (``percept_v``)."""
        return "percept_v"

    def is_correct(self, value: str | None) -> bool:
        """Whether a parsed (normalised) reply value is a right answer."""
        if value is None:
            return False
        return value in (self.accept or {self.answer})


def regular_polygon(cx: float, cy: float, r: float, n: int, rot: float = -90.0):
    """Vertices of a regular ``n``-gon of circumradius ``r``; the first vertex at angle ``rot`` deg."""
    return [
        (
            cx + r * math.cos(math.radians(rot + 360.0 * k / n)),
            cy + r * math.sin(math.radians(rot + 360.0 * k / n)),
        )
        for k in range(n)
    ]


SIDES = {"triangle": 3, "diamond": 4, "pentagon": 5, "hexagon": 6, "octagon": 8}


def shape_points(kind: str, cx: float, cy: float, r: float, flip: bool = False):
    """Polygon vertices of ``kind`` centred on ``(cx, cy)`` with half-size ``r``."""
    if kind == "square":
        return [(cx - r, cy - r), (cx + r, cy - r), (cx + r, cy + r), (cx - r, cy + r)]
    rot = 90.0 if flip else -90.0
    if kind == "octagon":
        rot = 22.5
    return regular_polygon(cx, cy, r, SIDES[kind], rot)


def draw_shape(
    draw: ImageDraw.ImageDraw,
    kind: str,
    cx: float,
    cy: float,
    r: float,
    fill=None,
    outline=None,
    width: int = 1,
    flip: bool = False,
) -> None:
    """Draw a circle or polygon (see :func:`shape_points`), filled and/or outlined, aliased."""
    if kind == "circle":
        box = [cx - r, cy - r, cx + r, cy + r]
        draw.ellipse(box, fill=fill, outline=outline, width=width)
    else:
        pts = shape_points(kind, cx, cy, r, flip)
        if fill is not None:
            draw.polygon(pts, fill=fill)
        if outline is not None:
            draw.line([*pts, pts[0]], fill=outline, width=width, joint="curve")


def place_discs(
    rng: np.random.Generator,
    radii,
    box: tuple[float, float, float, float],
    gap: float = 4.0,
    avoid: list[tuple[float, float, float]] | None = None,
    tries: int = 4000,
) -> list[tuple[float, float, float]]:
    """Non-overlapping discs ``(x, y, r)`` inside ``box = (x0, y0, x1, y1)``, at least ``gap`` apart."""
    x0, y0, x1, y1 = box
    placed: list[tuple[float, float, float]] = list(avoid or [])
    n_avoid = len(placed)
    order = np.argsort(-np.asarray(radii, float), kind="stable")
    out: list[tuple[float, float, float] | None] = [None] * len(radii)
    for i in order:
        r = float(radii[i])
        for _ in range(tries):
            x = float(rng.uniform(x0 + r, x1 - r))
            y = float(rng.uniform(y0 + r, y1 - r))
            if all((x - a) ** 2 + (y - b) ** 2 >= (r + c + gap) ** 2 for a, b, c in placed):
                break
        else:
            raise RuntimeError("no room to place the discs")
        placed.append((x, y, r))
        out[i] = (x, y, r)
    del placed[:n_avoid]
    return [o for o in out if o is not None]


def canvas(w: int, h: int, colour=WHITE) -> tuple[Image.Image, ImageDraw.ImageDraw]:
    """A blank image and its drawing context."""
    img = Image.new("RGB", (w, h), colour)
    return img, ImageDraw.Draw(img)


class Drawn(NamedTuple):
    """A generator's output: images, gold answer, accept set and metadata."""

    images: tuple[Image.Image, ...]
    answer: str
    meta: dict[str, Any]
    accept: frozenset[str] = frozenset()


SIZES = range(1, 21)
N_SIZES = len(SIZES)

RED, BLUE, GREEN = rgb("red"), rgb("blue"), rgb("green")
YELLOW, PURPLE = rgb("yellow"), rgb("purple")
BROWN = rgb("brown")
GRAY = (128, 128, 128)
SHAPES3 = ("circle", "triangle", "square")
SHAPES4 = ("circle", "triangle", "square", "pentagon")


def rounded(x: float) -> float:
    """A coordinate as the generators record it."""
    return round(float(x), 2)


def place_shapes(rng, radii, kinds, box, gap):
    """Place shapes of half-size ``radii`` without overlap: a square needs a disc of radius r * sqrt(2)."""
    reach = [r * math.sqrt(2) if k == "square" else r for r, k in zip(radii, kinds, strict=True)]
    return [
        (x, y, r) for (x, y, _), r in zip(place_discs(rng, reach, box, gap), radii, strict=True)
    ]


__all__ = [
    "ANSWER_TYPES",
    "FORMAT_LINES",
    "PALETTE20",
    "Trial",
    "canvas",
    "draw_shape",
    "place_discs",
    "prompt",
    "regular_polygon",
    "shape_points",
]
