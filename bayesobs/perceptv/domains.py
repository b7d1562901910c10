"""The Percept-V domain generators: pure functions ``(size, rng, **options) -> Drawn``.

Each generator draws the domain's image(s) with Pillow and computes the gold
answer from the objects it drew (normalised as :mod:`.parse` normalises
replies).  Sizes, colours and layouts follow the spec
(``shared/specs/perception_benchmarks.md`` section 3); where the spec is
silent the choice is ours and listed in ``docs/perceptv.md``.
"""

from __future__ import annotations

import itertools
import math
from math import comb, factorial, perm
from typing import Any, NamedTuple

import numpy as np
from PIL import Image, ImageDraw

from ..stimuli.drawing import draw_centred_text, draw_left_text, rgb
from .common import (
    BLACK,
    PALETTE20,
    SIDES,
    WHITE,
    canvas,
    draw_shape,
    place_discs,
)


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


def _r(x: float) -> float:
    return round(float(x), 2)


def _place_shapes(rng, radii, kinds, box, gap):
    """Place shapes of half-size ``radii``: squares need a disc of radius r * sqrt(2)."""
    reach = [r * math.sqrt(2) if k == "square" else r for r, k in zip(radii, kinds, strict=True)]
    return [
        (x, y, r) for (x, y, _), r in zip(place_discs(rng, reach, box, gap), radii, strict=True)
    ]


# ----------------------------------------------------------------------------- single counts


def counting_circles(size: int, rng: np.random.Generator) -> Drawn:
    """500 x 300, ``size`` black circles of radius U{10..30}, apart. Gold: the count.

    Parameters
    ----------
    size : int
        Number of circles, 1..20.
    rng : numpy.random.Generator
        The random stream.

    Returns
    -------
    Drawn
        ``images``: as described above. ``answer``: ``str(size)``. ``meta``:
        ``circles`` (``[x, y, r]`` each).
    """
    radii = rng.integers(10, 31, size)
    discs = place_discs(rng, radii, (2, 2, 498, 298))
    img, d = canvas(500, 300)
    for x, y, r in discs:
        draw_shape(d, "circle", x, y, r, fill=BLACK)
    return Drawn((img,), str(size), {"circles": [[_r(x), _r(y), int(r)] for x, y, r in discs]})


def count_coloured_circles(size: int, rng: np.random.Generator) -> Drawn:
    """500 x 300, ``2 size`` circles r U{10..20}: ``size`` red, the rest blue/green/yellow.

    Parameters
    ----------
    size : int
        Number of red circles, 1..20 (as many others are drawn).
    rng : numpy.random.Generator
        The random stream.

    Returns
    -------
    Drawn
        ``images``: as described above. ``answer``: ``str(size)``, the red
        count. ``meta``: ``circles`` (``[x, y, r, colour]`` each).
    """
    radii = rng.integers(10, 21, 2 * size)
    discs = place_discs(rng, radii, (2, 2, 498, 298))
    others = ("blue", "green", "yellow")
    colours = ["red"] * size + [others[int(k)] for k in rng.integers(0, 3, size)]
    img, d = canvas(500, 300)
    for (x, y, r), c in zip(discs, colours, strict=True):
        draw_shape(d, "circle", x, y, r, fill=rgb(c))
    meta = {
        "circles": [[_r(x), _r(y), int(r), c] for (x, y, r), c in zip(discs, colours, strict=True)]
    }
    return Drawn((img,), str(size), meta)


def change_colour(size: int, rng: np.random.Generator) -> Drawn:
    """Two 1500 x 1000 images of ``2 size`` red/blue/green circles; ``size`` recoloured in image 2.

    Parameters
    ----------
    size : int
        Number of circles that change colour, 1..20 (``2 size`` are drawn).
    rng : numpy.random.Generator
        The random stream.

    Returns
    -------
    Drawn
        ``images``: as described above. ``answer``: ``str(size)``. ``meta``:
        ``circles`` (``[x, y, r]``), ``colours_1`` and ``colours_2`` (each
        circle's colour in each image).
    """
    names = ("red", "blue", "green")
    radii = rng.integers(10, 31, 2 * size)
    discs = place_discs(rng, radii, (4, 4, 1496, 996), gap=6)
    c1 = [int(k) for k in rng.integers(0, 3, 2 * size)]
    changed = set(int(k) for k in rng.choice(2 * size, size, replace=False))
    c2 = [(c + int(rng.integers(1, 3))) % 3 if i in changed else c for i, c in enumerate(c1)]
    images = []
    for cols in (c1, c2):
        img, d = canvas(1500, 1000)
        for (x, y, r), c in zip(discs, cols, strict=True):
            draw_shape(d, "circle", x, y, r, fill=rgb(names[c]))
        images.append(img)
    meta = {
        "circles": [[_r(x), _r(y), int(r)] for x, y, r in discs],
        "colours_1": [names[c] for c in c1],
        "colours_2": [names[c] for c in c2],
    }
    return Drawn(tuple(images), str(size), meta)


def vanishing_objects(size: int, rng: np.random.Generator) -> Drawn:
    """Two 1500 x 1000 images of ``2 size`` black shapes (r 15..30); ``size`` gone in image 2.

    Parameters
    ----------
    size : int
        Number of shapes removed from image 2, 1..20 (``2 size`` in image 1).
    rng : numpy.random.Generator
        The random stream.

    Returns
    -------
    Drawn
        ``images``: as described above. ``answer``: ``str(size)``. ``meta``:
        ``shapes`` (``[kind, x, y, r]``) and ``removed`` (indices of the removed
        shapes).
    """
    radii = rng.integers(15, 31, 2 * size)
    kinds = [SHAPES3[int(k)] for k in rng.integers(0, 3, 2 * size)]
    discs = _place_shapes(rng, radii, kinds, (4, 4, 1496, 996), gap=8)
    gone = set(int(k) for k in rng.choice(2 * size, size, replace=False))
    images = []
    for keep in (lambda i: True, lambda i: i not in gone):
        img, d = canvas(1500, 1000)
        for i, ((x, y, r), k) in enumerate(zip(discs, kinds, strict=True)):
            if keep(i):
                draw_shape(d, k, x, y, r, fill=BLACK)
        images.append(img)
    meta = {
        "shapes": [[k, _r(x), _r(y), int(r)] for (x, y, r), k in zip(discs, kinds, strict=True)],
        "removed": sorted(gone),
    }
    return Drawn(tuple(images), str(size), meta)


MIRROR_COLOURS = ("red", "green", "orange", "purple", "magenta", "brown", "black", "gold")


def _mirror(size: int, rng: np.random.Generator, axis: str) -> Drawn:
    """Shapes in one half, a blue centre line; ``size`` of ``2 size`` reflected into the other half."""
    w, h = (600, 400) if axis == "vertical" else (400, 600)
    half = (4, 4, w / 2 - 6, h - 4) if axis == "vertical" else (4, 4, w - 4, h / 2 - 6)
    radii = rng.integers(8, 15, 2 * size)
    kinds = [SHAPES4[int(k)] for k in rng.integers(0, 4, 2 * size)]
    discs = _place_shapes(rng, radii, kinds, half, gap=5)
    cols = [MIRROR_COLOURS[int(k)] for k in rng.integers(0, len(MIRROR_COLOURS), 2 * size)]
    moved = set(int(k) for k in rng.choice(2 * size, size, replace=False))
    images = []
    for img_no in (1, 2):
        img, d = canvas(w, h)
        if axis == "vertical":
            d.line([(w / 2, 0), (w / 2, h)], fill=BLUE, width=3)
        else:
            d.line([(0, h / 2), (w, h / 2)], fill=BLUE, width=3)
        for i, ((x, y, r), k, c) in enumerate(zip(discs, kinds, cols, strict=True)):
            flip = False
            if img_no == 2 and i in moved:
                if axis == "vertical":
                    x = w - x
                else:
                    y, flip = h - y, True
            draw_shape(d, k, x, y, r, fill=rgb(c), flip=flip)
        images.append(img)
    meta = {
        "shapes": [
            [k, c, _r(x), _r(y), int(r)] for (x, y, r), k, c in zip(discs, kinds, cols, strict=True)
        ],
        "mirrored": sorted(moved),
    }
    return Drawn(tuple(images), str(size), meta)


def mirror_image(size: int, rng: np.random.Generator) -> Drawn:
    """Two 600 x 400 images: shapes left of a vertical blue line, ``size`` reflected to the right.

    Parameters
    ----------
    size : int
        Number of shapes reflected in image 2, 1..20 (``2 size`` are drawn).
    rng : numpy.random.Generator
        The random stream.

    Returns
    -------
    Drawn
        ``images``: as described above. ``answer``: ``str(size)``. ``meta``:
        ``shapes`` (``[kind, colour, x, y, r]`` as in image 1) and ``mirrored``
        (indices of the reflected shapes).
    """
    return _mirror(size, rng, "vertical")


def water_image(size: int, rng: np.random.Generator) -> Drawn:
    """Two 400 x 600 images: shapes above a horizontal blue line, ``size`` reflected below.

    Parameters
    ----------
    size : int
        Number of shapes reflected in image 2, 1..20 (``2 size`` are drawn).
    rng : numpy.random.Generator
        The random stream.

    Returns
    -------
    Drawn
        ``images``: as described above. ``answer``: ``str(size)``. ``meta``:
        ``shapes`` (``[kind, colour, x, y, r]`` as in image 1) and ``mirrored``
        (indices of the reflected shapes, drawn upside down).
    """
    return _mirror(size, rng, "horizontal")


ROW_H, ROW_W = 100, 300


def _match(size: int, rng: np.random.Generator, shadow: bool) -> Drawn:
    """``size`` rows of one shape each; image 2's row shapes drawn independently (outline or shadow)."""
    k1 = [SHAPES4[int(k)] for k in rng.integers(0, 4, size)]
    k2 = [SHAPES4[int(k)] for k in rng.integers(0, 4, size)]
    images, geo = [], []
    for img_no, kinds in ((1, k1), (2, k2)):
        img, d = canvas(ROW_W, ROW_H * size)
        rows = []
        for i, k in enumerate(kinds):
            r = int(rng.integers(22, 36))
            x = float(rng.uniform(r + 10, ROW_W - r - 10))
            y = i * ROW_H + ROW_H / 2
            rows.append([k, _r(x), y, r])
            if img_no == 1:
                draw_shape(d, k, x, y, r, fill=rgb("red") if shadow else BLACK)
            elif shadow:  # a dark shadow, flipped vertically
                draw_shape(d, k, x, y, r, fill=GRAY, flip=True)
            else:
                draw_shape(d, k, x, y, r, outline=BLACK, width=3)
            if i < size - 1:
                d.line([(0, (i + 1) * ROW_H), (ROW_W, (i + 1) * ROW_H)], fill=BLACK, width=2)
        images.append(img)
        geo.append(rows)
    n = sum(a == b for a, b in zip(k1, k2, strict=True))
    return Drawn(tuple(images), str(n), {"rows_1": geo[0], "rows_2": geo[1]})


def match_outline(size: int, rng: np.random.Generator) -> Drawn:
    """Two images of ``size`` rows: filled black shapes vs outlines. Gold: matching rows.

    Parameters
    ----------
    size : int
        Number of rows, 1..20 (100 px each, 300 px wide).
    rng : numpy.random.Generator
        The random stream.

    Returns
    -------
    Drawn
        ``images``: as described above. ``answer``: the number of rows whose two
        shapes are of the same kind, 0..``size``. ``meta``: ``rows_1`` and
        ``rows_2`` (``[kind, x, y, r]`` per row).
    """
    return _match(size, rng, shadow=False)


def match_shadow(size: int, rng: np.random.Generator) -> Drawn:
    """Two images of ``size`` rows: red shapes vs grey shadows flipped vertically. Gold: matches.

    Parameters
    ----------
    size : int
        Number of rows, 1..20 (100 px each, 300 px wide).
    rng : numpy.random.Generator
        The random stream.

    Returns
    -------
    Drawn
        ``images``: as described above. ``answer``: the number of rows whose two
        shapes are of the same kind, 0..``size``. ``meta``: ``rows_1`` and
        ``rows_2`` (``[kind, x, y, r]`` per row).
    """
    return _match(size, rng, shadow=True)


# ----------------------------------------------------------------------------- single yes/no


GRID_N = 6


def circle_right_triangle(size: int, rng: np.random.Generator) -> Drawn:
    """6 x 6 grid (800 px): ``size`` blue circles, ``min(size, 36 - size)`` red triangles.

    Parameters
    ----------
    size : int
        Number of circles, 1..20.
    rng : numpy.random.Generator
        The random stream.

    Returns
    -------
    Drawn
        ``images``: as described above. ``answer``: ``"yes"`` if some triangle
        has a circle in the cell to its right, else ``"no"``. ``meta``:
        ``circles`` and ``triangles`` (``[row, col]`` each).
    """
    n_tri = min(size, 36 - size)
    cells = rng.choice(36, size + n_tri, replace=False)
    circ = {(int(c) // 6, int(c) % 6) for c in cells[:size]}
    tri = {(int(c) // 6, int(c) % 6) for c in cells[size:]}
    cell, m = 130, 10
    img, d = canvas(800, 800)
    for k in range(GRID_N + 1):
        d.line([(m + k * cell, m), (m + k * cell, m + 6 * cell)], fill=BLACK, width=2)
        d.line([(m, m + k * cell), (m + 6 * cell, m + k * cell)], fill=BLACK, width=2)
    for (i, j), kind, col in [(c, "circle", BLUE) for c in sorted(circ)] + [
        (c, "triangle", RED) for c in sorted(tri)
    ]:
        draw_shape(d, kind, m + (j + 0.5) * cell, m + (i + 0.5) * cell, 45, fill=col)
    yes = any((i, j + 1) in circ for i, j in tri)
    meta = {"circles": sorted(map(list, circ)), "triangles": sorted(map(list, tri))}
    return Drawn((img,), "yes" if yes else "no", meta)


INSIDE_PX, INSIDE_PAD, DOT_CLEAR = 400, 0.45, 0.065


def inside_circles(size: int, rng: np.random.Generator) -> Drawn:
    """``size`` black rings, centres U(.1,.9)^2, radii U(.1,.5), and a red dot of radius .05.

    The unit square is drawn at 400 px per unit inside a margin of .45 units, so
    every ring is whole.  The dot keeps clear of every ring (its centre at least
    .065 from each circumference: radius .05 + the ring's half width + .008),
    so inside or outside is never ambiguous; circles are redrawn if no such
    place exists.

    Parameters
    ----------
    size : int
        Number of rings, 1..20.
    rng : numpy.random.Generator
        The random stream.

    Returns
    -------
    Drawn
        ``images``: as described above. ``answer``: ``"yes"`` if the dot lies
        inside some ring, else ``"no"``. ``meta``: ``circles`` (``[x, y, r]`` in
        pixels) and ``dot`` (``[x, y]``).
    """
    while True:
        cx = rng.uniform(0.1, 0.9, (size, 2))
        rr = rng.uniform(0.1, 0.5, size)
        for _ in range(2_000):
            dot = rng.uniform(0.1, 0.9, 2)
            dist = np.hypot(*(cx - dot).T)
            if np.all(np.abs(dist - rr) >= DOT_CLEAR):
                break
        else:
            continue
        break
    inside = bool(np.any(dist < rr))
    side = round((1 + 2 * INSIDE_PAD) * INSIDE_PX)

    def px(v):
        return (v + INSIDE_PAD) * INSIDE_PX

    img, d = canvas(side, side)
    for (x, y), r in zip(cx, rr, strict=True):
        d.ellipse(
            [
                px(x) - r * INSIDE_PX,
                px(y) - r * INSIDE_PX,
                px(x) + r * INSIDE_PX,
                px(y) + r * INSIDE_PX,
            ],
            outline=BLACK,
            width=3,
        )
    rd = 0.05 * INSIDE_PX
    d.ellipse([px(dot[0]) - rd, px(dot[1]) - rd, px(dot[0]) + rd, px(dot[1]) + rd], fill=RED)
    meta = {
        "circles": [
            [_r(px(x)), _r(px(y)), _r(r * INSIDE_PX)] for (x, y), r in zip(cx, rr, strict=True)
        ],
        "dot": [_r(px(dot[0])), _r(px(dot[1]))],
    }
    return Drawn((img,), "yes" if inside else "no", meta)


# ----------------------------------------------------------------------------- fixed length


def counting_shapes(size: int, rng: np.random.Generator) -> Drawn:
    """500 x 300, ``size`` black circles/triangles/squares, half-size U{10..20}.

    Parameters
    ----------
    size : int
        Number of shapes, 1..20.
    rng : numpy.random.Generator
        The random stream.

    Returns
    -------
    Drawn
        ``images``: as described above. ``answer``: ``"circles triangles
        squares"``, the three counts. ``meta``: ``shapes`` (``[kind, x, y, r]``
        each).
    """
    radii = rng.integers(10, 21, size)
    kinds = [SHAPES3[int(k)] for k in rng.integers(0, 3, size)]
    discs = _place_shapes(rng, radii, kinds, (2, 2, 498, 298), gap=5)
    img, d = canvas(500, 300)
    for (x, y, r), k in zip(discs, kinds, strict=True):
        draw_shape(d, k, x, y, r, fill=BLACK)
    counts = [kinds.count(k) for k in ("circle", "triangle", "square")]
    meta = {
        "shapes": [[k, _r(x), _r(y), int(r)] for (x, y, r), k in zip(discs, kinds, strict=True)]
    }
    return Drawn((img,), " ".join(map(str, counts)), meta)


TABLE_Y = (140, 160)


def counting_locations(size: int, rng: np.random.Generator, equal_counts: bool = False) -> Drawn:
    """500 x 300, a brown table at y 140..160 and black circles (r U{6..10}) above and below.

    Default: ``2 size`` circles, the number above uniform on 0..2 size (the
    authors' code always drew ``size`` above and ``size`` below, so ABOVE ==
    BELOW in every item; ``equal_counts=True`` reproduces that).

    Parameters
    ----------
    size : int
        Half the number of circles, 1..20.
    rng : numpy.random.Generator
        The random stream.
    equal_counts : bool, default False
        Put ``size`` circles above and ``size`` below, as the authors' code.

    Returns
    -------
    Drawn
        ``images``: as described above. ``answer``: ``"above below"``, the two
        counts. ``meta``: ``above`` and ``below`` (``[x, y, r]`` each) and
        ``equal_counts``.
    """
    above = size if equal_counts else int(rng.integers(0, 2 * size + 1))
    below = 2 * size - above
    up = place_discs(rng, rng.integers(6, 11, above), (2, 2, 498, TABLE_Y[0] - 4), gap=4)
    down = place_discs(rng, rng.integers(6, 11, below), (2, TABLE_Y[1] + 4, 498, 298), gap=4)
    img, d = canvas(500, 300)
    d.rectangle([40, TABLE_Y[0], 460, TABLE_Y[1]], fill=BROWN)
    for x, y, r in up + down:
        draw_shape(d, "circle", x, y, r, fill=BLACK)
    meta = {
        "above": [[_r(x), _r(y), int(r)] for x, y, r in up],
        "below": [[_r(x), _r(y), int(r)] for x, y, r in down],
        "equal_counts": equal_counts,
    }
    return Drawn((img,), f"{above} {below}", meta)


LOC_W, LOC_H, LOC_SCALE = 1500, 1000, 0.3  # data units; pixels per unit


def circle_location(size: int, rng: np.random.Generator) -> Drawn:
    """Crossed grey axes over x in [-1500, 1500], y in [-1000, 1000]; ``size`` black circles r 75.

    Drawn at 0.3 px per unit (900 x 600 px).  Circles keep clear of the axes.
    Gold: ``"q c"``, the quadrant with the most circles (ties to the lower
    number) and its count.

    Parameters
    ----------
    size : int
        Number of circles, 1..20.
    rng : numpy.random.Generator
        The random stream.

    Returns
    -------
    Drawn
        ``images``: as described above. ``answer``: ``"q c"`` (see above).
        ``meta``: ``circles`` (``[x, y, quadrant]``, data units) and ``counts``
        (circles per quadrant 1..4).
    """
    r = 75.0
    discs = []
    quads = rng.integers(1, 5, size)  # quadrant of each circle, then a place inside it
    for q in (1, 2, 3, 4):
        n = int(np.sum(quads == q))
        sx = 1 if q in (1, 4) else -1
        sy = 1 if q in (1, 2) else -1
        for x, y, _ in place_discs(rng, [r] * n, (10, 10, LOC_W, LOC_H), gap=30):
            discs.append((sx * x, sy * y, q))
    w, h = int(2 * LOC_W * LOC_SCALE), int(2 * LOC_H * LOC_SCALE)
    img, d = canvas(w, h)
    d.line([(w / 2, 0), (w / 2, h)], fill=GRAY, width=2)
    d.line([(0, h / 2), (w, h / 2)], fill=GRAY, width=2)
    for x, y, _ in discs:
        px, py = w / 2 + x * LOC_SCALE, h / 2 - y * LOC_SCALE
        draw_shape(d, "circle", px, py, r * LOC_SCALE, fill=BLACK)
    counts = [sum(1 for *_, q in discs if q == k) for k in (1, 2, 3, 4)]
    best = int(np.argmax(counts))  # first maximum = lower quadrant number
    meta = {"circles": [[_r(x), _r(y), q] for x, y, q in discs], "counts": counts}
    return Drawn((img,), f"{best + 1} {counts[best]}", meta)


# ----------------------------------------------------------------------------- lists


CMP_ROW_H, CMP_W, CMP_SCALE = 120, 500, 250.0


def comparing_size(size: int, rng: np.random.Generator) -> Drawn:
    """``size`` rows (120 px each, a black line under each): a blue and a green circle.

    Radii are fractions U(.05, .2) of 250 px that differ by at least .05; the
    blue circle is left or right at random.  Gold: the bigger colour per row.

    Parameters
    ----------
    size : int
        Number of rows, 1..20.
    rng : numpy.random.Generator
        The random stream.

    Returns
    -------
    Drawn
        ``images``: as described above. ``answer``: ``"blue green ..."``, the
        bigger circle's colour per row, top to bottom. ``meta``: ``rows``
        (``[blue radius, green radius, blue_left]`` per row, radii in pixels).
    """
    img, d = canvas(CMP_W, CMP_ROW_H * size)
    rows, out = [], []
    for i in range(size):
        while True:
            a, b = rng.uniform(0.05, 0.2, 2)
            if abs(a - b) >= 0.05:
                break
        blue_left = bool(rng.integers(0, 2))
        y = i * CMP_ROW_H + (CMP_ROW_H - 8) / 2
        xs = (CMP_W * 0.28, CMP_W * 0.72) if blue_left else (CMP_W * 0.72, CMP_W * 0.28)
        draw_shape(d, "circle", xs[0], y, a * CMP_SCALE, fill=BLUE)
        draw_shape(d, "circle", xs[1], y, b * CMP_SCALE, fill=GREEN)
        d.line(
            [(0, (i + 1) * CMP_ROW_H - 4), (CMP_W, (i + 1) * CMP_ROW_H - 4)], fill=BLACK, width=2
        )
        rows.append([_r(a * CMP_SCALE), _r(b * CMP_SCALE), blue_left])
        out.append("blue" if a > b else "green")
    return Drawn((img,), " ".join(out), {"rows": rows})


def sort_lines(size: int, rng: np.random.Generator) -> Drawn:
    """1000 x 1000: ``size`` vertical lines from y 990 up, lengths U{250..960} at least 20 apart.

    Lines are labelled 1..size left to right just above their top ends.
    Gold: the labels from shortest to longest.

    Parameters
    ----------
    size : int
        Number of lines, 1..20.
    rng : numpy.random.Generator
        The random stream.

    Returns
    -------
    Drawn
        ``images``: as described above. ``answer``: ``"3 1 2 ..."``, the labels
        from shortest to longest. ``meta``: ``lengths`` (pixels, left to right).
    """
    room = 960 - 250 - 20 * (size - 1)
    z = np.sort(rng.integers(0, room + 1, size))
    lengths = (250 + z + 20 * np.arange(size))[rng.permutation(size)]
    img, d = canvas(1000, 1000)
    for i, ln in enumerate(lengths):
        x = 1000 * (i + 0.5) / size
        d.line([(x, 990), (x, 990 - int(ln))], fill=BLACK, width=5)
        draw_centred_text(d, (round(x), 990 - int(ln) - 16), str(i + 1), 22)
    order = np.argsort(lengths, kind="stable") + 1
    return Drawn((img,), " ".join(map(str, order)), {"lengths": [int(v) for v in lengths]})


# ----------------------------------------------------------------------------- sets

GRID_CELL, GRID_MARGIN = 100, 40
DISTRACTOR_COLOURS = ("red", "blue", "purple", "yellow")


def grid_canvas():
    """The labelled 6 x 6 grid of the locate domains: 100 px cells, 40 px margin.

    Rows and columns are numbered 0..5 in the left and top margins.

    Returns
    -------
    img : PIL.Image.Image
        The 680 x 680 RGB image.
    draw : PIL.ImageDraw.ImageDraw
        A drawing context on it.
    """
    side = 2 * GRID_MARGIN + GRID_N * GRID_CELL
    img, d = canvas(side, side)
    m, c = GRID_MARGIN, GRID_CELL
    for k in range(GRID_N + 1):
        d.line([(m + k * c, m), (m + k * c, m + GRID_N * c)], fill=BLACK, width=2)
        d.line([(m, m + k * c), (m + GRID_N * c, m + k * c)], fill=BLACK, width=2)
    for k in range(GRID_N):
        draw_centred_text(d, (m / 2, m + (k + 0.5) * c), str(k), 20)
        draw_centred_text(d, (m + (k + 0.5) * c, m / 2), str(k), 20)
    return img, d


def cell_centre(i: int, j: int) -> tuple[float, float]:
    """Pixel centre of cell ``(i, j)`` of the :func:`grid_canvas` grid.

    Parameters
    ----------
    i, j : int
        Row and column, 0..5.

    Returns
    -------
    tuple of float
        ``(x, y)`` in pixels.
    """
    return GRID_MARGIN + (j + 0.5) * GRID_CELL, GRID_MARGIN + (i + 0.5) * GRID_CELL


def coords(cells) -> str:
    """Cells as the ``coords`` answer format: ``"(i,j) (k,l)"``, sorted.

    Parameters
    ----------
    cells : iterable of tuple of int
        ``(row, col)`` cells.

    Returns
    -------
    str
        The cells sorted by row then column, ``"(row,col)"`` each,
        space-separated.
    """
    return " ".join(f"({i},{j})" for i, j in sorted(cells))


def locate_circles_colour(size: int, rng: np.random.Generator) -> Drawn:
    """Draw a ``locate_circles_colour`` trial.

    Labelled 6 x 6 grid (0-based, 100 px cells, 40 px margin): ``size`` green circles and
    ``min(size, 36 - size)`` red/blue/purple/yellow circles elsewhere. Gold: the green cells.

    Parameters
    ----------
    size : int
        Number of green circles, 1..20.
    rng : numpy.random.Generator
        The random stream.

    Returns
    -------
    Drawn
        ``images``: as described above. ``answer``: the green cells,
        ``"(row,col) ..."`` sorted (:func:`coords`). ``meta``: ``cells``
        (``[row, col, colour]`` of every circle).
    """
    n_other = min(size, 36 - size)
    cells = [(int(c) // 6, int(c) % 6) for c in rng.choice(36, size + n_other, replace=False)]
    cols = ["green"] * size + [DISTRACTOR_COLOURS[int(k)] for k in rng.integers(0, 4, n_other)]
    img, d = grid_canvas()
    for (i, j), c in zip(cells, cols, strict=True):
        draw_shape(d, "circle", *cell_centre(i, j), 35, fill=rgb(c))
    meta = {"cells": [[i, j, c] for (i, j), c in zip(cells, cols, strict=True)]}
    return Drawn((img,), coords(cells[:size]), meta)


def locate_circles_shape(size: int, rng: np.random.Generator) -> Drawn:
    """As :func:`locate_circles_colour`, but the others are green squares and triangles.

    Parameters
    ----------
    size : int
        Number of circles, 1..20.
    rng : numpy.random.Generator
        The random stream.

    Returns
    -------
    Drawn
        ``images``: as described above. ``answer``: the circles' cells,
        ``"(row,col) ..."`` sorted (:func:`coords`). ``meta``: ``cells``
        (``[row, col, kind]`` of every shape).
    """
    n_other = min(size, 36 - size)
    cells = [(int(c) // 6, int(c) % 6) for c in rng.choice(36, size + n_other, replace=False)]
    kinds = ["circle"] * size + [
        ("square", "triangle")[int(k)] for k in rng.integers(0, 2, n_other)
    ]
    img, d = grid_canvas()
    for (i, j), k in zip(cells, kinds, strict=True):
        draw_shape(d, k, *cell_centre(i, j), 35, fill=GREEN)
    meta = {"cells": [[i, j, k] for (i, j), k in zip(cells, kinds, strict=True)]}
    return Drawn((img,), coords(cells[:size]), meta)


# ----------------------------------------------------------------------------- further domains


def circle_boxes(size: int, rng: np.random.Generator) -> Drawn:
    """Draw a ``circle_boxes`` trial.

    1600 x 800, a vertical blue line at x 800; ``2 size`` red circles r 30, ``L`` U{0..2 size}
    on the left.  Gold: circles to move so both sides are equal, ``|L - R| / 2 = |L - size|``.

    Parameters
    ----------
    size : int
        Half the number of circles, 1..20.
    rng : numpy.random.Generator
        The random stream.

    Returns
    -------
    Drawn
        ``images``: as described above. ``answer``: ``str(abs(L - size))``.
        ``meta``: ``left`` and ``right`` (``[x, y]`` of each circle on that
        side).
    """
    left = int(rng.integers(0, 2 * size + 1))
    lo = place_discs(rng, [30] * left, (4, 4, 792, 796), gap=6)
    hi = place_discs(rng, [30] * (2 * size - left), (808, 4, 1596, 796), gap=6)
    img, d = canvas(1600, 800)
    d.line([(800, 0), (800, 800)], fill=BLUE, width=4)
    for x, y, r in lo + hi:
        draw_shape(d, "circle", x, y, r, fill=RED)
    meta = {"left": [[_r(x), _r(y)] for x, y, _ in lo], "right": [[_r(x), _r(y)] for x, y, _ in hi]}
    return Drawn((img,), str(abs(left - size)), meta)


IDENTIFY = {
    "circle": "blue",
    "triangle": "red",
    "diamond": "green",
    "pentagon": "cyan",
    "hexagon": "magenta",
}


def identifying_shapes(size: int, rng: np.random.Generator) -> Drawn:
    """Draw an ``identifying_shapes`` trial.

    ``size`` rows (100 px, a black line under each) of one shape: Circle blue, Triangle red,
    Diamond green, Pentagon cyan, Hexagon magenta.  Gold: the names, top to bottom.

    Parameters
    ----------
    size : int
        Number of rows, 1..20.
    rng : numpy.random.Generator
        The random stream.

    Returns
    -------
    Drawn
        ``images``: as described above. ``answer``: ``"circle diamond ..."``,
        the shape names top to bottom. ``meta``: ``rows`` (the same names, as a
        list).
    """
    names = list(IDENTIFY)
    kinds = [names[int(k)] for k in rng.integers(0, 5, size)]
    img, d = canvas(ROW_W, ROW_H * size)
    for i, k in enumerate(kinds):
        x = float(rng.uniform(50, ROW_W - 50))
        draw_shape(d, k, x, i * ROW_H + ROW_H / 2 - 3, 32, fill=rgb(IDENTIFY[k]))
        d.line([(0, (i + 1) * ROW_H - 3), (ROW_W, (i + 1) * ROW_H - 3)], fill=BLACK, width=2)
    return Drawn((img,), " ".join(kinds), {"rows": kinds})


KNOT_CELL, KNOT_MARGIN = 100, 10


def safe_cells(crosses) -> list[tuple[int, int]]:
    """Cells (row, col) of the 6 x 6 grid with no X in them or in an edge neighbour.

    Parameters
    ----------
    crosses : iterable of tuple of int
        The ``(row, col)`` cells that hold an X.

    Returns
    -------
    list of tuple of int
        The safe cells in reading order.
    """
    xs = set(crosses)
    return [
        (i, j)
        for i in range(GRID_N)
        for j in range(GRID_N)
        if not ({(i, j), (i - 1, j), (i + 1, j), (i, j - 1), (i, j + 1)} & xs)
    ]


def cross_and_knots(size: int, rng: np.random.Generator) -> Drawn:
    """Draw a ``cross_and_knots`` trial.

    6 x 6 grid (100 px cells, 10 px margin): ``size`` cells hold a black X, the others their
    label ``(row,col)``.  Correct: any safe cell (``accept``), or ``none`` if there is none;
    the canonical answer is the first safe cell in reading order.

    Parameters
    ----------
    size : int
        Number of crosses, 1..20.
    rng : numpy.random.Generator
        The random stream.

    Returns
    -------
    Drawn
        ``images``: as described above. ``answer``: the first safe cell
        ``"(row,col)"``, or ``"none"``. ``accept``: every safe cell (or
        ``{"none"}``). ``meta``: ``crosses`` (``[row, col]`` each).
    """
    cells = [(int(c) // 6, int(c) % 6) for c in rng.choice(36, size, replace=False)]
    side = 2 * KNOT_MARGIN + GRID_N * KNOT_CELL
    img, d = canvas(side, side)
    m, c = KNOT_MARGIN, KNOT_CELL
    for k in range(GRID_N + 1):
        d.line([(m + k * c, m), (m + k * c, m + GRID_N * c)], fill=BLACK, width=2)
        d.line([(m, m + k * c), (m + GRID_N * c, m + k * c)], fill=BLACK, width=2)
    crosses = set(cells)
    for i in range(GRID_N):
        for j in range(GRID_N):
            x0, y0 = m + j * c, m + i * c
            if (i, j) in crosses:
                d.line([(x0 + 20, y0 + 20), (x0 + c - 20, y0 + c - 20)], fill=BLACK, width=6)
                d.line([(x0 + 20, y0 + c - 20), (x0 + c - 20, y0 + 20)], fill=BLACK, width=6)
            else:
                draw_centred_text(d, (x0 + c / 2, y0 + c / 2), f"({i},{j})", 18)
    safe = safe_cells(crosses)
    accept = frozenset(f"({i},{j})" for i, j in safe) or frozenset({"none"})
    answer = f"({safe[0][0]},{safe[0][1]})" if safe else "none"
    return Drawn((img,), answer, {"crosses": sorted(map(list, crosses))}, accept)


SORT_SCALE = 40.0  # px per radius unit


def sort_circles(size: int, rng: np.random.Generator) -> Drawn:
    """Draw a ``sort_circles`` trial.

    1000 x 800: ``size`` black circles, radii U(.3, 2) at least .05 apart (40 px per unit),
    each labelled in white at its centre with 1..size (random order).  Gold: labels smallest
    to largest.

    Parameters
    ----------
    size : int
        Number of circles, 1..20.
    rng : numpy.random.Generator
        The random stream.

    Returns
    -------
    Drawn
        ``images``: as described above. ``answer``: ``"2 5 1 ..."``, the labels
        smallest to largest. ``meta``: ``circles`` (``[x, y, r, label]`` each,
        pixels).
    """
    room = 2.0 - 0.3 - 0.05 * (size - 1)
    z = np.sort(rng.uniform(0, room, size))
    radii = (0.3 + z + 0.05 * np.arange(size))[rng.permutation(size)]
    discs = place_discs(rng, radii * SORT_SCALE, (4, 4, 996, 796), gap=8)
    labels = rng.permutation(size) + 1
    img, d = canvas(1000, 800)
    for (x, y, r), lab in zip(discs, labels, strict=True):
        draw_shape(d, "circle", x, y, r, fill=BLACK)
        draw_centred_text(d, (round(x), round(y)), str(int(lab)), 14, fill=WHITE)
    order = labels[np.argsort(radii, kind="stable")]
    meta = {
        "circles": [
            [_r(x), _r(y), _r(r), int(lab)] for (x, y, r), lab in zip(discs, labels, strict=True)
        ]
    }
    return Drawn((img,), " ".join(map(str, order)), meta)


# ----------------------------------------------------------------------------- palette domains

LEGEND_H = 130  # legend band height; a black separator line spans the width just below it


def draw_legend(d, width: int) -> None:
    """The 20 palette colours (swatch + name) in 4 rows of 5, then a full-width black line.

    Parameters
    ----------
    d : PIL.ImageDraw.ImageDraw
        Where to draw (the top ``LEGEND_H`` pixels).
    width : int
        Image width in pixels.
    """
    names = list(PALETTE20)
    col_w = width / 5
    for k, name in enumerate(names):
        x0, y0 = 10 + (k % 5) * col_w, 10 + (k // 5) * 28
        d.rectangle([x0, y0, x0 + 18, y0 + 18], fill=PALETTE20[name], outline=BLACK)
        draw_left_text(d, (round(x0 + 26), round(y0 + 9)), name, 14)
    d.line([(0, LEGEND_H - 4), (width, LEGEND_H - 4)], fill=BLACK, width=3)


def layered_colours(size: int, rng: np.random.Generator) -> Drawn:
    """Draw a ``layered_colours`` trial.

    Legend, then ``size`` concentric filled circles (radii from .9 to .05 of 400 px, evenly
    spaced) in distinct palette colours, drawn outside in.  Gold: colours inside to outside.

    Parameters
    ----------
    size : int
        Number of circles, 1..20.
    rng : numpy.random.Generator
        The random stream.

    Returns
    -------
    Drawn
        ``images``: as described above. ``answer``: the palette colour names,
        inside to outside. ``meta``: ``radii`` (pixels, outside in) and
        ``outside_in`` (the colours, outside in).
    """
    names = [list(PALETTE20)[int(k)] for k in rng.choice(20, size, replace=False)]
    radii = np.linspace(0.9, 0.05, size) if size > 1 else np.array([0.9])
    img, d = canvas(800, LEGEND_H + 800)
    draw_legend(d, 800)
    cx, cy = 400, LEGEND_H + 400
    for r, name in zip(radii, names, strict=True):  # outermost first
        draw_shape(d, "circle", cx, cy, r * 400, fill=PALETTE20[name])
    return Drawn(
        (img,),
        " ".join(reversed(names)),
        {"radii": [_r(r * 400) for r in radii], "outside_in": names},
    )


def colours_present(size: int, rng: np.random.Generator) -> Drawn:
    """Draw a ``colours_present`` trial.

    Legend, then ``size`` shapes (r 40, circle/triangle/square/pentagon) in distinct palette
    colours on white.  Gold: 20 yes/no in the legend's (the prompt's) colour order.

    Parameters
    ----------
    size : int
        Number of shapes (and colours), 1..20.
    rng : numpy.random.Generator
        The random stream.

    Returns
    -------
    Drawn
        ``images``: as described above. ``answer``: 20 words ``"yes"``/``"no"``,
        one per palette colour in legend order. ``meta``: ``shapes`` (``[kind,
        colour, x, y]`` each).
    """
    picked = sorted(int(k) for k in rng.choice(20, size, replace=False))
    names = list(PALETTE20)
    kinds = [SHAPES4[int(k)] for k in rng.integers(0, 4, size)]
    discs = _place_shapes(rng, [40] * size, kinds, (4, LEGEND_H + 4, 1196, LEGEND_H + 796), gap=10)
    img, d = canvas(1200, LEGEND_H + 800)
    draw_legend(d, 1200)
    order = rng.permutation(size)
    for k in order:
        (x, y, r), kind = discs[k], kinds[k]
        draw_shape(d, kind, x, y, r, fill=PALETTE20[names[picked[k]]])
    answer = " ".join("yes" if k in picked else "no" for k in range(20))
    meta = {
        "shapes": [
            [kinds[k], names[picked[k]], _r(discs[k][0]), _r(discs[k][1])] for k in range(size)
        ]
    }
    return Drawn((img,), answer, meta)


def background(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """A procedural stand-in for the authors' background photos.

    A smooth random colour field (an 8 x 6 grid of random colours, bilinearly
    upsampled, plus fine noise), every channel in 40..215, so no pixel equals a
    pure drawing colour.

    Parameters
    ----------
    rng : numpy.random.Generator
        The random stream.
    w, h : int
        Width and height in pixels.

    Returns
    -------
    PIL.Image.Image
        The RGB image; no pixel is a :data:`PALETTE20` colour.
    """
    coarse = rng.integers(60, 196, (6, 8, 3)).astype(np.uint8)
    field = np.asarray(Image.fromarray(coarse).resize((w, h), Image.BILINEAR)).astype(np.int16)
    field += rng.integers(-20, 21, (h, w, 3), dtype=np.int16)
    field = np.clip(field, 40, 215).astype(np.int32)
    packed = (field[..., 0] << 16) | (field[..., 1] << 8) | field[..., 2]
    # only the palette colours inside the clipped cube can clash (gray, tan, brown): the same
    # mask as np.isin against all twenty, a quarter of the time
    clash = np.zeros(packed.shape, bool)
    for r, g, b in PALETTE20.values():
        if min(r, g, b) >= 40 and max(r, g, b) <= 215:
            clash |= packed == (r << 16) | (g << 8) | b
    field[..., 0][clash] += 1  # (gray, tan and brown lie in 40..215): nudge off the palette
    return Image.fromarray(field.astype(np.uint8))


def list_shapes(size: int, rng: np.random.Generator, photo: bool = True) -> Drawn:
    """Draw a ``list_shapes`` trial.

    2000 x 1500: ``size`` shapes (r 75; circle/triangle/square/pentagon) in red, green or
    blue over a procedural background (``photo=False``: white).  Gold: the set of shape types.

    Parameters
    ----------
    size : int
        Number of shapes, 1..20.
    rng : numpy.random.Generator
        The random stream.
    photo : bool, default True
        Draw the shapes over a procedural background (:func:`background`);
        ``False`` draws them on white.

    Returns
    -------
    Drawn
        ``images``: as described above. ``answer``: the distinct shape kinds,
        sorted, space-separated. ``meta``: ``shapes`` (``[kind, [r, g, b], x,
        y]`` each).
    """
    kinds = [SHAPES4[int(k)] for k in rng.integers(0, 4, size)]
    cols = [(RED, GREEN, BLUE)[int(k)] for k in rng.integers(0, 3, size)]
    discs = _place_shapes(rng, [75] * size, kinds, (4, 4, 1996, 1496), gap=12)
    img = background(rng, 2000, 1500) if photo else canvas(2000, 1500)[0]
    d = ImageDraw.Draw(img)
    for (x, y, r), k, c in zip(discs, kinds, cols, strict=True):
        draw_shape(d, k, x, y, r, fill=c)
    meta = {
        "shapes": [
            [k, list(c), _r(x), _r(y)] for (x, y, _), k, c in zip(discs, kinds, cols, strict=True)
        ]
    }
    return Drawn((img,), " ".join(sorted(set(kinds))), meta)


def list_colours(size: int, rng: np.random.Generator, photo: bool = True) -> Drawn:
    """Draw a ``list_colours`` trial.

    Legend, then 2000 x 1500 of procedural background (``photo=False``: white) with ``size``
    shapes (r 90; circle/triangle/square/pentagon) in distinct palette colours.
    Gold: the set of colours.

    Parameters
    ----------
    size : int
        Number of shapes (and colours), 1..20.
    rng : numpy.random.Generator
        The random stream.
    photo : bool, default True
        Draw the shapes over a procedural background (:func:`background`);
        ``False`` draws them on white.

    Returns
    -------
    Drawn
        ``images``: as described above. ``answer``: the colour names, sorted,
        space-separated. ``meta``: ``shapes`` (``[kind, colour, x, y]`` each, y
        in the whole image).
    """
    names = [list(PALETTE20)[int(k)] for k in rng.choice(20, size, replace=False)]
    kinds = [SHAPES4[int(k)] for k in rng.integers(0, 4, size)]
    discs = _place_shapes(rng, [90] * size, kinds, (4, 4, 1996, 1496), gap=16)
    w, h = 2000, 1500
    img, d = canvas(w, LEGEND_H + h)
    draw_legend(d, w)
    img.paste(background(rng, w, h) if photo else canvas(w, h)[0], (0, LEGEND_H))
    for (x, y, r), k, name in zip(discs, kinds, names, strict=True):
        draw_shape(d, k, x, y + LEGEND_H, r, fill=PALETTE20[name])
    meta = {
        "shapes": [
            [k, n, _r(x), _r(y + LEGEND_H)]
            for (x, y, _), k, n in zip(discs, kinds, names, strict=True)
        ]
    }
    return Drawn((img,), " ".join(sorted(names)), meta)


LAYER_KINDS = ("circle", "diamond", "hexagon", "octagon")
LAYER_MIN_R = 24.0


def layered_shapes(size: int, rng: np.random.Generator) -> Drawn:
    """Draw a ``layered_shapes`` trial.

    1800 x 1800: ``size`` nested filled shapes (circle, diamond, hexagon, octagon; no circle
    directly inside a circle), the outermost of circumradius 800 px, each inscribed in the one
    around it (circumradius = the outer shape's inradius), in distinct random RGB colours.
    Sequences whose innermost shape would be under 24 px are redrawn.  Gold: inside to outside.

    Parameters
    ----------
    size : int
        Number of nested shapes, 1..20.
    rng : numpy.random.Generator
        The random stream.

    Returns
    -------
    Drawn
        ``images``: as described above. ``answer``: the shape kinds, inside to
        outside. ``meta``: ``outside_in`` (the kinds, outside in), ``radii``
        (circumradii in pixels, outside in) and ``colours`` (``[r, g, b]``
        each).
    """
    while True:
        kinds = []
        for _ in range(size):
            options = [
                k for k in LAYER_KINDS if not (kinds and kinds[-1] == "circle" and k == "circle")
            ]
            kinds.append(options[int(rng.integers(len(options)))])
        radii = [800.0]
        for k in kinds[:-1]:
            radii.append(radii[-1] * (1.0 if k == "circle" else math.cos(math.pi / SIDES[k])))
        if radii[-1] >= LAYER_MIN_R:
            break
    colours: list[tuple[int, int, int]] = []
    while len(colours) < size:
        c = tuple(int(v) for v in rng.integers(0, 256, 3))
        if c != (255, 255, 255) and c not in colours:
            colours.append(c)
    img, d = canvas(1800, 1800)
    for k, r, c in zip(kinds, radii, colours, strict=True):  # outermost first
        draw_shape(d, k, 900, 900, r, fill=c)
    meta = {
        "outside_in": kinds,
        "radii": [_r(r) for r in radii],
        "colours": [list(c) for c in colours],
    }
    return Drawn((img,), " ".join(reversed(kinds)), meta)


def _no_double_circle_count(L: int) -> int:
    """Sequences of length L over the 4 layer kinds with no two circles in a row."""
    c, p = 1, 3
    for _ in range(L - 1):
        c, p = p, 3 * (c + p)
    return c + p


def _layer_guess(rng, L):
    while True:
        seq = [LAYER_KINDS[int(k)] for k in rng.integers(0, 4, L)]
        if not any(a == b == "circle" for a, b in itertools.pairwise(seq)):
            return " ".join(seq)


PATH_CELL, PATH_MARGIN = 130, 10
PATH_COLOURS = ("red", "blue", "green", "orange", "purple", "gold", "magenta", "teal")


def _self_avoiding(rng, length: int) -> list[tuple[int, int]]:
    """A random self-avoiding walk of ``length`` cells on the 6 x 6 grid (depth-first search)."""
    while True:
        path = [(int(rng.integers(6)), int(rng.integers(6)))]
        tried: list[set] = [set()]
        while 0 < len(path) < length:
            i, j = path[-1]
            options = [
                c
                for c in ((i - 1, j), (i + 1, j), (i, j - 1), (i, j + 1))
                if 0 <= c[0] < 6 and 0 <= c[1] < 6 and c not in path and c not in tried[-1]
            ]
            if not options:
                path.pop()
                tried.pop()
                continue
            c = options[int(rng.integers(len(options)))]
            tried[-1].add(c)
            path.append(c)
            tried.append(set())
        if len(path) == length:
            return path


def grid_path(size: int, rng: np.random.Generator) -> Drawn:
    """Draw a ``grid_path`` trial.

    6 x 6 grid (130 px cells, 10 px margin, 800 px): every cell holds a circle, triangle or
    square (r 25) in a random colour; a black line with arrowheads at the cell borders joins the
    ``size`` cells of a self-avoiding path, ``S`` (top-left corner) marks its first cell and
    ``E`` (bottom-right corner) its last.  Gold: the shapes along the path, S to E.

    Parameters
    ----------
    size : int
        Number of cells on the path, 1..20.
    rng : numpy.random.Generator
        The random stream.

    Returns
    -------
    Drawn
        ``images``: as described above. ``answer``: the shape kinds along the
        path, S to E. ``meta``: ``path`` (``[row, col]`` per cell) and ``kinds``
        (the 6 x 6 grid of shape kinds).
    """
    path = _self_avoiding(rng, size)
    kinds = [[SHAPES3[int(k)] for k in row] for row in rng.integers(0, 3, (6, 6))]
    cols = [
        [PATH_COLOURS[int(k)] for k in row] for row in rng.integers(0, len(PATH_COLOURS), (6, 6))
    ]
    m, c = PATH_MARGIN, PATH_CELL
    img, d = canvas(800, 800)
    for k in range(7):
        d.line([(m + k * c, m), (m + k * c, m + 6 * c)], fill=BLACK, width=2)
        d.line([(m, m + k * c), (m + 6 * c, m + k * c)], fill=BLACK, width=2)

    def centre(cell):
        return m + (cell[1] + 0.5) * c, m + (cell[0] + 0.5) * c

    for a, b in itertools.pairwise(path):
        (x0, y0), (x1, y1) = centre(a), centre(b)
        d.line([(x0, y0), (x1, y1)], fill=BLACK, width=4)
        mx, my, ux, uy = (x0 + x1) / 2, (y0 + y1) / 2, np.sign(x1 - x0), np.sign(y1 - y0)
        tip = (mx + 12 * ux, my + 12 * uy)
        d.polygon(
            [
                tip,
                (mx - 8 * ux - 9 * uy, my - 8 * uy + 9 * ux),
                (mx - 8 * ux + 9 * uy, my - 8 * uy - 9 * ux),
            ],
            fill=BLACK,
        )
    for i in range(6):
        for j in range(6):
            draw_shape(d, kinds[i][j], *centre((i, j)), 25, fill=rgb(cols[i][j]))
    (si, sj), (ei, ej) = path[0], path[-1]
    draw_centred_text(d, (m + sj * c + 16, m + si * c + 16), "S", 18)
    draw_centred_text(d, (m + (ej + 1) * c - 16, m + (ei + 1) * c - 16), "E", 18)
    meta = {"path": [list(p) for p in path], "kinds": kinds}
    return Drawn((img,), " ".join(kinds[i][j] for i, j in path), meta)


MAZE_N, MAZE_CELL = 11, 40


def maze_solving(size: int, rng: np.random.Generator) -> Drawn:
    """Draw a ``maze_solving`` trial.

    11 x 11 maze of 40 px cells (black walls), carved by a randomised depth-first search from
    the top-left room; open cells are numbered in carve order (S = 0), the start shows ``S``,
    the cell numbered ``size`` shows ``E``, the others their numbers.  Gold: the shortest (in a
    carved maze the only) path, ``"s 3 4 e"``; the numbers in place of S or E are accepted too.

    Parameters
    ----------
    size : int
        The carve number of the end cell, 1..20.
    rng : numpy.random.Generator
        The random stream.

    Returns
    -------
    Drawn
        ``images``: as described above. ``answer``: ``"s ... e"``, the numbers
        of the cells between S and E in path order. ``accept``: the answer with
        ``0`` for ``s`` and/or ``size`` for ``e`` too. ``meta``: ``numbers``
        (the 11 x 11 carve numbers, -1 for walls) and ``path`` (``[row, col]``
        from S to E).
    """
    num = -np.ones((MAZE_N, MAZE_N), int)
    num[1, 1] = 0
    count, stack = 1, [(1, 1)]
    while stack:
        i, j = stack[-1]
        nbrs = [(i + di, j + dj) for di, dj in ((-2, 0), (2, 0), (0, -2), (0, 2))]
        nbrs = [
            (a, b) for a, b in nbrs if 0 < a < MAZE_N - 1 and 0 < b < MAZE_N - 1 and num[a, b] < 0
        ]
        if not nbrs:
            stack.pop()
            continue
        a, b = nbrs[int(rng.integers(len(nbrs)))]
        num[(i + a) // 2, (j + b) // 2] = count
        num[a, b] = count + 1
        count += 2
        stack.append((a, b))
    start = (1, 1)
    (end,) = [tuple(int(v) for v in c) for c in np.argwhere(num == size)]
    # the path: walk back from E to S along decreasing numbers (the DFS tree)
    path = [end]
    while path[-1] != start:
        i, j = path[-1]
        prev = [
            (a, b)
            for a, b in ((i - 1, j), (i + 1, j), (i, j - 1), (i, j + 1))
            if 0 <= num[a, b] < num[i, j]
        ]
        path.append(max(prev, key=lambda c: num[c]))
    path.reverse()
    side = MAZE_N * MAZE_CELL
    img, d = canvas(side, side)
    for i in range(MAZE_N):
        for j in range(MAZE_N):
            x0, y0 = j * MAZE_CELL, i * MAZE_CELL
            if num[i, j] < 0:
                d.rectangle([x0, y0, x0 + MAZE_CELL - 1, y0 + MAZE_CELL - 1], fill=BLACK)
            else:
                label = "S" if (i, j) == start else "E" if (i, j) == end else str(num[i, j])
                draw_centred_text(d, (x0 + MAZE_CELL // 2, y0 + MAZE_CELL // 2), label, 14)
    inner = [str(num[c]) for c in path[1:-1]]
    answer = " ".join(["s", *inner, "e"])
    accept = frozenset(" ".join([a, *inner, b]) for a in ("s", "0") for b in ("e", str(size)))
    return Drawn((img,), answer, {"numbers": num.tolist(), "path": [list(c) for c in path]}, accept)


def _maze_guess(rng, **_):
    L = int(rng.integers(1, N_SIZES + 1))
    inner = [str(k) for k in range(1, L) if rng.random() < 0.5]
    return " ".join(["s", *inner, str(L)])


GRAPH_R, GRAPH_W = 15, 800


def segment_cover(arr: np.ndarray, a, b, r: float) -> float:
    """Fraction of points on segment a-b (outside the end discs of radius ``r``) that are ink.

    Parameters
    ----------
    arr : numpy.ndarray
        RGB image, shape ``(height, width, 3)``; ink is any pixel not pure
        white.
    a, b : sequence of float
        The segment's ends ``(x, y)`` (node centres), in pixels.
    r : float
        Radius of the end discs left out (2 px more is skipped at each end).

    Returns
    -------
    float
        The fraction of 60 evenly spaced points that are ink, 0..1.
    """
    a, b = np.asarray(a, float), np.asarray(b, float)
    length = float(np.hypot(*(b - a)))
    ts = np.linspace((r + 2) / length, 1 - (r + 2) / length, 60)
    pts = a + ts[:, None] * (b - a)
    xs, ys = np.round(pts[:, 0]).astype(int), np.round(pts[:, 1]).astype(int)
    return float(np.mean(np.any(arr[ys, xs] != 255, axis=-1)))


def _clear_pairs(nodes: np.ndarray, pairs) -> np.ndarray:
    """For each pair (i, j): no other node centre within GRAPH_R + 3 px of segment i-j."""
    if not pairs:
        return np.zeros(0, bool)
    idx = np.array(pairs)
    a, b = nodes[idx[:, 0]][:, None, :], nodes[idx[:, 1]][:, None, :]
    p = nodes[None, :, :]
    ab = b - a
    t = np.clip(np.sum((p - a) * ab, -1) / np.sum(ab * ab, -1), 0, 1)
    dist = np.hypot(*np.moveaxis(p - a - t[..., None] * ab, -1, 0))
    dist[np.arange(len(idx)), idx[:, 0]] = np.inf
    dist[np.arange(len(idx)), idx[:, 1]] = np.inf
    return np.all(dist >= GRAPH_R + 3, axis=1)


def graph_counting(size: int, rng: np.random.Generator) -> Drawn:
    """Draw a ``graph_counting`` trial.

    800 x 800: ``size`` blue nodes (r 15) and E ~ U{size-1 .. min(C(size,2), size+5)} black
    edges between random distinct pairs (the graph may be disconnected).  Nodes are placed at
    random, at least 40 px apart (not a spring layout); edges join only pairs whose segment
    passes no other node within 18 px, and layouts where a non-edge is drawn over by other
    edges are redrawn.
    Gold: ``"nodes edges"``.

    Parameters
    ----------
    size : int
        Number of nodes, 1..20.
    rng : numpy.random.Generator
        The random stream.

    Returns
    -------
    Drawn
        ``images``: as described above. ``answer``: ``"nodes edges"``, the two
        counts. ``meta``: ``nodes`` (``[x, y]`` each) and ``edges`` (``[i, j]``
        node index pairs, sorted).
    """
    hi = min(comb(size, 2), size + 5)
    n_edges = int(rng.integers(size - 1, hi + 1)) if size > 1 else 0
    pairs = [(i, j) for i in range(size) for j in range(i + 1, size)]
    while True:
        nodes = [
            (x, y)
            for x, y, _ in place_discs(
                rng, [GRAPH_R] * size, (20, 20, GRAPH_W - 20, GRAPH_W - 20), gap=40
            )
        ]
        # an edge may only join a pair whose segment passes no other node within 18 px
        free = [pairs[k] for k in np.nonzero(_clear_pairs(np.array(nodes), pairs))[0]]
        if len(free) < n_edges:
            continue
        picked = rng.choice(len(free), n_edges, replace=False) if n_edges else []
        edges = [free[int(k)] for k in picked]
        img, d = canvas(GRAPH_W, GRAPH_W)
        for i, j in edges:
            d.line([nodes[i], nodes[j]], fill=BLACK, width=3)
        for x, y in nodes:
            draw_shape(d, "circle", x, y, GRAPH_R, fill=BLUE)
        a = np.asarray(img)
        edge_set = set(edges)
        if any(
            segment_cover(a, nodes[i], nodes[j], GRAPH_R) > 0.9
            for i, j in pairs
            if (i, j) not in edge_set
        ):
            continue
        break
    meta = {"nodes": [[_r(x), _r(y)] for x, y in nodes], "edges": sorted(map(list, edges))}
    return Drawn((img,), f"{size} {n_edges}", meta)


def _graph_guess(rng, **_):
    L = int(rng.integers(1, N_SIZES + 1))
    hi = min(comb(L, 2), L + 5)
    return f"{L} {int(rng.integers(L - 1, hi + 1)) if L > 1 else 0}"


def _graph_chance(size, **_):
    hi = min(comb(size, 2), size + 5)
    return 1.0 / N_SIZES / (hi - (size - 1) + 1 if size > 1 else 1)


NUMBERED_COLOURS = ("lightblue", "lightgreen", "khaki", "lightpink", "lightgray", "wheat")


def numbered_shapes(size: int, rng: np.random.Generator) -> Drawn:
    """Draw a ``numbered_shapes`` trial.

    1200 x 900: ``2 size`` light-coloured shapes (r 32), ``size`` of them circles, the rest
    triangles/squares/pentagons, each with a black number 1..2 size (random order) at its
    centre.  Gold: the circles' numbers, sorted as strings (the authors' order).

    Parameters
    ----------
    size : int
        Number of circles, 1..20 (``2 size`` shapes are drawn).
    rng : numpy.random.Generator
        The random stream.

    Returns
    -------
    Drawn
        ``images``: as described above. ``answer``: the circles' numbers, sorted
        as strings, space-separated. ``meta``: ``shapes`` (``[kind, number, x,
        y]`` each).
    """
    kinds = ["circle"] * size + [
        ("triangle", "square", "pentagon")[int(k)] for k in rng.integers(0, 3, size)
    ]
    perm = rng.permutation(2 * size)
    kinds = [kinds[int(k)] for k in perm]
    discs = _place_shapes(rng, [32] * (2 * size), kinds, (4, 4, 1196, 896), gap=8)
    labels = rng.permutation(2 * size) + 1
    cols = [NUMBERED_COLOURS[int(k)] for k in rng.integers(0, len(NUMBERED_COLOURS), 2 * size)]
    img, d = canvas(1200, 900)
    for (x, y, r), k, c, lab in zip(discs, kinds, cols, labels, strict=True):
        cy = y + (r / 4 if k == "triangle" else 0)  # a triangle's label sits lower, in its body
        draw_shape(d, k, x, y, r, fill=rgb(c))
        draw_centred_text(d, (round(x), round(cy)), str(int(lab)), 16)
    circles = sorted(str(int(lab)) for k, lab in zip(kinds, labels, strict=True) if k == "circle")
    meta = {
        "shapes": [
            [k, int(lab), _r(x), _r(y)]
            for (x, y, _), k, lab in zip(discs, kinds, labels, strict=True)
        ]
    }
    return Drawn((img,), " ".join(circles), meta)


# ----------------------------------------------------------------------------- answer priors
# A guess draws an answer uniformly from a finite answer space.  Count domains use one space for
# every size; list/set domains first draw a length L uniform on 1..20, then an answer of length L.
# chance(size) is then exact: 1/|space| or P(L = size)/|answers of length size|.


def _count_space(lo: int, hi: int):
    def guess(rng, **_):
        return str(int(rng.integers(lo, hi + 1)))

    def chance(size, **_):
        return 1.0 / (hi - lo + 1)

    return guess, chance


def _yes_no():
    return (lambda rng, **_: ("yes", "no")[int(rng.integers(0, 2))]), (lambda size, **_: 0.5)


def _list_space(n_answers, draw):
    """Length-mixed space: ``n_answers(L)`` answers of length L, ``draw(rng, L)`` one of them."""

    def guess(rng, **_):
        L = int(rng.integers(1, N_SIZES + 1))
        return draw(rng, L)

    def chance(size, **_):
        return 1.0 / N_SIZES / n_answers(size)

    return guess, chance


def _quadrant_guess(rng, **_):
    return f"{int(rng.integers(1, 5))} {int(rng.integers(1, 21))}"


def _locations_guess(rng, equal_counts=False, **_):
    L = int(rng.integers(1, N_SIZES + 1))
    a = L if equal_counts else int(rng.integers(0, 2 * L + 1))
    return f"{a} {2 * L - a}"


def _locations_chance(size, equal_counts=False, **_):
    return 1.0 / N_SIZES if equal_counts else 1.0 / N_SIZES / (2 * size + 1)


def _composition(rng, L, parts=3):
    """A uniform composition of L into ``parts`` non-negative parts (stars and bars)."""
    bars = np.sort(rng.choice(L + parts - 1, parts - 1, replace=False))
    edges = np.concatenate([[-1], bars, [L + parts - 1]])
    return " ".join(str(int(v)) for v in np.diff(edges) - 1)


def _cells(rng, L):
    picked = rng.choice(36, L, replace=False)
    return coords((int(c) // 6, int(c) % 6) for c in picked)


def _knot_guess(rng, **_):
    c = int(rng.integers(36))
    return f"({c // 6},{c % 6})"


def _knot_chance(size, **_):
    """A uniform guess among the 36 cells is right with probability E[#safe cells] / 36."""
    total = 0.0
    for i in range(GRID_N):
        for j in range(GRID_N):
            block = 1 + sum(
                0 <= a < GRID_N and 0 <= b < GRID_N
                for a, b in ((i - 1, j), (i + 1, j), (i, j - 1), (i, j + 1))
            )
            total += comb(36 - block, size) / comb(36, size)
    return total / 36


def _yes_subset(rng, L):
    chosen = set(rng.choice(20, L, replace=False).tolist())
    return " ".join("yes" if k in chosen else "no" for k in range(20))


def _shape_set_guess(rng, **_):
    """A uniform non-empty subset of the four shape types (15 sets)."""
    mask = int(rng.integers(1, 16))
    return " ".join(sorted(k for b, k in enumerate(SHAPES4) if mask >> b & 1))


def _numbered_guess(rng, **_):
    """Length L ~ U{1..20}, then L distinct labels from 1..2L, sorted as strings."""
    L = int(rng.integers(1, N_SIZES + 1))
    return " ".join(sorted(str(int(v) + 1) for v in rng.choice(2 * L, L, replace=False)))


def _numbered_chance(size, **_):
    return 1.0 / N_SIZES / comb(2 * size, size)


PRIORS = {
    "counting_circles": _count_space(1, 20),
    "count_coloured_circles": _count_space(1, 20),
    "change_colour": _count_space(1, 20),
    "vanishing_objects": _count_space(1, 20),
    "mirror_image": _count_space(1, 20),
    "water_image": _count_space(1, 20),
    "match_outline": _count_space(0, 20),
    "match_shadow": _count_space(0, 20),
    "inside_circles": _yes_no(),
    "circle_right_triangle": _yes_no(),
    "circle_location": (_quadrant_guess, lambda size, **_: 1.0 / 80),
    "counting_locations": (_locations_guess, _locations_chance),
    "counting_shapes": _list_space(lambda L: comb(L + 2, 2), _composition),
    "comparing_size": _list_space(
        lambda L: 2**L,
        lambda rng, L: " ".join(("blue", "green")[int(k)] for k in rng.integers(0, 2, L)),
    ),
    "sort_lines": _list_space(
        factorial, lambda rng, L: " ".join(str(int(v) + 1) for v in rng.permutation(L))
    ),
    "locate_circles_colour": _list_space(lambda L: comb(36, L), _cells),
    "circle_boxes": _count_space(0, 20),
    "identifying_shapes": _list_space(
        lambda L: 5**L,
        lambda rng, L: " ".join(list(IDENTIFY)[int(k)] for k in rng.integers(0, 5, L)),
    ),
    "cross_and_knots": (_knot_guess, _knot_chance),
    "layered_colours": _list_space(
        lambda L: perm(20, L),
        lambda rng, L: " ".join(list(PALETTE20)[int(k)] for k in rng.choice(20, L, replace=False)),
    ),
    "colours_present": _list_space(lambda L: comb(20, L), _yes_subset),
    "list_colours": _list_space(
        lambda L: comb(20, L),
        lambda rng, L: " ".join(
            sorted(list(PALETTE20)[int(k)] for k in rng.choice(20, L, replace=False))
        ),
    ),
    "graph_counting": (_graph_guess, _graph_chance),
    "grid_path": _list_space(
        lambda L: 3**L, lambda rng, L: " ".join(SHAPES3[int(k)] for k in rng.integers(0, 3, L))
    ),
    "maze_solving": (_maze_guess, lambda size, **_: 1.0 / N_SIZES / 2 ** (size - 1)),
    "layered_shapes": _list_space(_no_double_circle_count, _layer_guess),
    "list_shapes": (_shape_set_guess, lambda size, **_: 1.0 / 15),
    "numbered_shapes": (_numbered_guess, _numbered_chance),
    "sort_circles": _list_space(
        factorial, lambda rng, L: " ".join(str(int(v) + 1) for v in rng.permutation(L))
    ),
    "locate_circles_shape": _list_space(lambda L: comb(36, L), _cells),
}

GENERATORS = {
    "grid_path": grid_path,
    "maze_solving": maze_solving,
    "layered_shapes": layered_shapes,
    "graph_counting": graph_counting,
    "list_colours": list_colours,
    "layered_colours": layered_colours,
    "colours_present": colours_present,
    "list_shapes": list_shapes,
    "numbered_shapes": numbered_shapes,
    "circle_boxes": circle_boxes,
    "identifying_shapes": identifying_shapes,
    "cross_and_knots": cross_and_knots,
    "sort_circles": sort_circles,
    "change_colour": change_colour,
    "circle_location": circle_location,
    "circle_right_triangle": circle_right_triangle,
    "comparing_size": comparing_size,
    "count_coloured_circles": count_coloured_circles,
    "counting_circles": counting_circles,
    "counting_locations": counting_locations,
    "counting_shapes": counting_shapes,
    "inside_circles": inside_circles,
    "locate_circles_colour": locate_circles_colour,
    "locate_circles_shape": locate_circles_shape,
    "match_outline": match_outline,
    "match_shadow": match_shadow,
    "mirror_image": mirror_image,
    "sort_lines": sort_lines,
    "vanishing_objects": vanishing_objects,
    "water_image": water_image,
}

__all__ = ["GENERATORS", "PRIORS", "Drawn"]
