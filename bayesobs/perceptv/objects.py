"""Percept-V domains about objects: counts, yes/no, fixed-length answers, lists and sets."""

from __future__ import annotations

import numpy as np

from ..stimuli.drawing import draw_centred_text, rgb
from .common import (
    BLACK,
    BLUE,
    BROWN,
    GRAY,
    GREEN,
    RED,
    SHAPES3,
    SHAPES4,
    Drawn,
    canvas,
    draw_shape,
    place_discs,
    place_shapes,
    rounded,
)

# ----------------------------------------------------------------------------- single counts


def counting_circles(size: int, rng: np.random.Generator) -> Drawn:
    """500 x 300, ``size`` black circles of radius U{10..30}, apart. Gold: the count."""
    radii = rng.integers(10, 31, size)
    discs = place_discs(rng, radii, (2, 2, 498, 298))
    img, d = canvas(500, 300)
    for x, y, r in discs:
        draw_shape(d, "circle", x, y, r, fill=BLACK)
    return Drawn(
        (img,), str(size), {"circles": [[rounded(x), rounded(y), int(r)] for x, y, r in discs]}
    )


def count_coloured_circles(size: int, rng: np.random.Generator) -> Drawn:
    """500 x 300, ``2 size`` circles r U{10..20}: ``size`` red, the rest blue/green/yellow."""
    radii = rng.integers(10, 21, 2 * size)
    discs = place_discs(rng, radii, (2, 2, 498, 298))
    others = ("blue", "green", "yellow")
    colours = ["red"] * size + [others[int(k)] for k in rng.integers(0, 3, size)]
    img, d = canvas(500, 300)
    for (x, y, r), c in zip(discs, colours, strict=True):
        draw_shape(d, "circle", x, y, r, fill=rgb(c))
    meta = {
        "circles": [
            [rounded(x), rounded(y), int(r), c] for (x, y, r), c in zip(discs, colours, strict=True)
        ]
    }
    return Drawn((img,), str(size), meta)


def change_colour(size: int, rng: np.random.Generator) -> Drawn:
    """Two 1500 x 1000 images of ``2 size`` red/blue/green circles; ``size`` recoloured in image 2."""
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
        "circles": [[rounded(x), rounded(y), int(r)] for x, y, r in discs],
        "colours_1": [names[c] for c in c1],
        "colours_2": [names[c] for c in c2],
    }
    return Drawn(tuple(images), str(size), meta)


def vanishing_objects(size: int, rng: np.random.Generator) -> Drawn:
    """Two 1500 x 1000 images of ``2 size`` black shapes (r 15..30); ``size`` gone in image 2."""
    radii = rng.integers(15, 31, 2 * size)
    kinds = [SHAPES3[int(k)] for k in rng.integers(0, 3, 2 * size)]
    discs = place_shapes(rng, radii, kinds, (4, 4, 1496, 996), gap=8)
    gone = set(int(k) for k in rng.choice(2 * size, size, replace=False))
    images = []
    for keep in (lambda i: True, lambda i: i not in gone):
        img, d = canvas(1500, 1000)
        for i, ((x, y, r), k) in enumerate(zip(discs, kinds, strict=True)):
            if keep(i):
                draw_shape(d, k, x, y, r, fill=BLACK)
        images.append(img)
    meta = {
        "shapes": [
            [k, rounded(x), rounded(y), int(r)] for (x, y, r), k in zip(discs, kinds, strict=True)
        ],
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
    discs = place_shapes(rng, radii, kinds, half, gap=5)
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
            [k, c, rounded(x), rounded(y), int(r)]
            for (x, y, r), k, c in zip(discs, kinds, cols, strict=True)
        ],
        "mirrored": sorted(moved),
    }
    return Drawn(tuple(images), str(size), meta)


def mirror_image(size: int, rng: np.random.Generator) -> Drawn:
    """Two 600 x 400 images: shapes left of a vertical blue line, ``size`` reflected to the right."""
    return _mirror(size, rng, "vertical")


def water_image(size: int, rng: np.random.Generator) -> Drawn:
    """Two 400 x 600 images: shapes above a horizontal blue line, ``size`` reflected below."""
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
            rows.append([k, rounded(x), y, r])
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
    """Two images of ``size`` rows: filled black shapes vs outlines. Gold: matching rows."""
    return _match(size, rng, shadow=False)


def match_shadow(size: int, rng: np.random.Generator) -> Drawn:
    """Two images of ``size`` rows: red shapes vs grey shadows flipped vertically. Gold: matches."""
    return _match(size, rng, shadow=True)


# ----------------------------------------------------------------------------- single yes/no


GRID_N = 6


def circle_right_triangle(size: int, rng: np.random.Generator) -> Drawn:
    """6 x 6 grid (800 px): ``size`` blue circles, ``min(size, 36 - size)`` red triangles."""
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
    """``size`` black rings, centres U(.1,.9)^2, radii U(.1,.5), and a red dot of radius .05."""
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
            [rounded(px(x)), rounded(px(y)), rounded(r * INSIDE_PX)]
            for (x, y), r in zip(cx, rr, strict=True)
        ],
        "dot": [rounded(px(dot[0])), rounded(px(dot[1]))],
    }
    return Drawn((img,), "yes" if inside else "no", meta)


# ----------------------------------------------------------------------------- fixed length


def counting_shapes(size: int, rng: np.random.Generator) -> Drawn:
    """500 x 300, ``size`` black circles/triangles/squares, half-size U{10..20}."""
    radii = rng.integers(10, 21, size)
    kinds = [SHAPES3[int(k)] for k in rng.integers(0, 3, size)]
    discs = place_shapes(rng, radii, kinds, (2, 2, 498, 298), gap=5)
    img, d = canvas(500, 300)
    for (x, y, r), k in zip(discs, kinds, strict=True):
        draw_shape(d, k, x, y, r, fill=BLACK)
    counts = [kinds.count(k) for k in ("circle", "triangle", "square")]
    meta = {
        "shapes": [
            [k, rounded(x), rounded(y), int(r)] for (x, y, r), k in zip(discs, kinds, strict=True)
        ]
    }
    return Drawn((img,), " ".join(map(str, counts)), meta)


TABLE_Y = (140, 160)


def counting_locations(size: int, rng: np.random.Generator, equal_counts: bool = False) -> Drawn:
    """500 x 300, a brown table at y 140..160 and black circles (r U{6..10}) above and below."""
    above = size if equal_counts else int(rng.integers(0, 2 * size + 1))
    below = 2 * size - above
    up = place_discs(rng, rng.integers(6, 11, above), (2, 2, 498, TABLE_Y[0] - 4), gap=4)
    down = place_discs(rng, rng.integers(6, 11, below), (2, TABLE_Y[1] + 4, 498, 298), gap=4)
    img, d = canvas(500, 300)
    d.rectangle([40, TABLE_Y[0], 460, TABLE_Y[1]], fill=BROWN)
    for x, y, r in up + down:
        draw_shape(d, "circle", x, y, r, fill=BLACK)
    meta = {
        "above": [[rounded(x), rounded(y), int(r)] for x, y, r in up],
        "below": [[rounded(x), rounded(y), int(r)] for x, y, r in down],
        "equal_counts": equal_counts,
    }
    return Drawn((img,), f"{above} {below}", meta)


LOC_W, LOC_H, LOC_SCALE = 1500, 1000, 0.3  # data units; pixels per unit


def circle_location(size: int, rng: np.random.Generator) -> Drawn:
    """Crossed grey axes over x in [-1500, 1500], y in [-1000, 1000]; ``size`` black circles r 75."""
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
    meta = {"circles": [[rounded(x), rounded(y), q] for x, y, q in discs], "counts": counts}
    return Drawn((img,), f"{best + 1} {counts[best]}", meta)


# ----------------------------------------------------------------------------- lists


CMP_ROW_H, CMP_W, CMP_SCALE = 120, 500, 250.0


def comparing_size(size: int, rng: np.random.Generator) -> Drawn:
    """``size`` rows (120 px each, a black line under each): a blue and a green circle."""
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
        rows.append([rounded(a * CMP_SCALE), rounded(b * CMP_SCALE), blue_left])
        out.append("blue" if a > b else "green")
    return Drawn((img,), " ".join(out), {"rows": rows})


def sort_lines(size: int, rng: np.random.Generator) -> Drawn:
    """1000 x 1000: ``size`` vertical lines from y 990 up, lengths U{250..960} at least 20 apart."""
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
    """The labelled 6 x 6 grid of the locate domains: 100 px cells, 40 px margin."""
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
    """Pixel centre of cell ``(i, j)`` of the :func:`grid_canvas` grid."""
    return GRID_MARGIN + (j + 0.5) * GRID_CELL, GRID_MARGIN + (i + 0.5) * GRID_CELL


def coords(cells) -> str:
    """Cells as the ``coords`` answer format: ``"(i,j) (k,l)"``, sorted."""
    return " ".join(f"({i},{j})" for i, j in sorted(cells))


def locate_circles_colour(size: int, rng: np.random.Generator) -> Drawn:
    """Draw a ``locate_circles_colour`` trial."""
    n_other = min(size, 36 - size)
    cells = [(int(c) // 6, int(c) % 6) for c in rng.choice(36, size + n_other, replace=False)]
    cols = ["green"] * size + [DISTRACTOR_COLOURS[int(k)] for k in rng.integers(0, 4, n_other)]
    img, d = grid_canvas()
    for (i, j), c in zip(cells, cols, strict=True):
        draw_shape(d, "circle", *cell_centre(i, j), 35, fill=rgb(c))
    meta = {"cells": [[i, j, c] for (i, j), c in zip(cells, cols, strict=True)]}
    return Drawn((img,), coords(cells[:size]), meta)


def locate_circles_shape(size: int, rng: np.random.Generator) -> Drawn:
    """As :func:`locate_circles_colour`, but the others are green squares and triangles."""
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
