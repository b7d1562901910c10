"""Percept-V domains of scenes: boxes, knots, palettes, layers, paths, mazes, graphs, numbered shapes."""

from __future__ import annotations

import itertools
import math
from math import comb

import numpy as np
from PIL import Image, ImageDraw

from ..stimuli.drawing import draw_centred_text, draw_left_text, rgb
from .common import (
    BLACK,
    BLUE,
    GREEN,
    PALETTE20,
    RED,
    SHAPES3,
    SHAPES4,
    SIDES,
    WHITE,
    Drawn,
    canvas,
    draw_shape,
    place_discs,
    place_shapes,
    rounded,
)
from .objects import GRID_N, ROW_H, ROW_W

# ----------------------------------------------------------------------------- further domains


def circle_boxes(size: int, rng: np.random.Generator) -> Drawn:
    """Draw a ``circle_boxes`` trial."""
    left = int(rng.integers(0, 2 * size + 1))
    lo = place_discs(rng, [30] * left, (4, 4, 792, 796), gap=6)
    hi = place_discs(rng, [30] * (2 * size - left), (808, 4, 1596, 796), gap=6)
    img, d = canvas(1600, 800)
    d.line([(800, 0), (800, 800)], fill=BLUE, width=4)
    for x, y, r in lo + hi:
        draw_shape(d, "circle", x, y, r, fill=RED)
    meta = {
        "left": [[rounded(x), rounded(y)] for x, y, _ in lo],
        "right": [[rounded(x), rounded(y)] for x, y, _ in hi],
    }
    return Drawn((img,), str(abs(left - size)), meta)


IDENTIFY = {
    "circle": "blue",
    "triangle": "red",
    "diamond": "green",
    "pentagon": "cyan",
    "hexagon": "magenta",
}


def identifying_shapes(size: int, rng: np.random.Generator) -> Drawn:
    """Draw an ``identifying_shapes`` trial."""
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
    """Cells (row, col) of the 6 x 6 grid with no X in them or in an edge neighbour."""
    xs = set(crosses)
    return [
        (i, j)
        for i in range(GRID_N)
        for j in range(GRID_N)
        if not ({(i, j), (i - 1, j), (i + 1, j), (i, j - 1), (i, j + 1)} & xs)
    ]


def cross_and_knots(size: int, rng: np.random.Generator) -> Drawn:
    """Draw a ``cross_and_knots`` trial."""
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
    """Draw a ``sort_circles`` trial."""
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
            [rounded(x), rounded(y), rounded(r), int(lab)]
            for (x, y, r), lab in zip(discs, labels, strict=True)
        ]
    }
    return Drawn((img,), " ".join(map(str, order)), meta)


# ----------------------------------------------------------------------------- palette domains

LEGEND_H = 130  # legend band height; a black separator line spans the width just below it


def draw_legend(d, width: int) -> None:
    """The 20 palette colours (swatch + name) in 4 rows of 5, then a full-width black line."""
    names = list(PALETTE20)
    col_w = width / 5
    for k, name in enumerate(names):
        x0, y0 = 10 + (k % 5) * col_w, 10 + (k // 5) * 28
        d.rectangle([x0, y0, x0 + 18, y0 + 18], fill=PALETTE20[name], outline=BLACK)
        draw_left_text(d, (round(x0 + 26), round(y0 + 9)), name, 14)
    d.line([(0, LEGEND_H - 4), (width, LEGEND_H - 4)], fill=BLACK, width=3)


def layered_colours(size: int, rng: np.random.Generator) -> Drawn:
    """Draw a ``layered_colours`` trial."""
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
        {"radii": [rounded(r * 400) for r in radii], "outside_in": names},
    )


def colours_present(size: int, rng: np.random.Generator) -> Drawn:
    """Draw a ``colours_present`` trial."""
    picked = sorted(int(k) for k in rng.choice(20, size, replace=False))
    names = list(PALETTE20)
    kinds = [SHAPES4[int(k)] for k in rng.integers(0, 4, size)]
    discs = place_shapes(rng, [40] * size, kinds, (4, LEGEND_H + 4, 1196, LEGEND_H + 796), gap=10)
    img, d = canvas(1200, LEGEND_H + 800)
    draw_legend(d, 1200)
    order = rng.permutation(size)
    for k in order:
        (x, y, r), kind = discs[k], kinds[k]
        draw_shape(d, kind, x, y, r, fill=PALETTE20[names[picked[k]]])
    answer = " ".join("yes" if k in picked else "no" for k in range(20))
    meta = {
        "shapes": [
            [kinds[k], names[picked[k]], rounded(discs[k][0]), rounded(discs[k][1])]
            for k in range(size)
        ]
    }
    return Drawn((img,), answer, meta)


def background(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """A procedural stand-in for the authors' background photos."""
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
    """Draw a ``list_shapes`` trial."""
    kinds = [SHAPES4[int(k)] for k in rng.integers(0, 4, size)]
    cols = [(RED, GREEN, BLUE)[int(k)] for k in rng.integers(0, 3, size)]
    discs = place_shapes(rng, [75] * size, kinds, (4, 4, 1996, 1496), gap=12)
    img = background(rng, 2000, 1500) if photo else canvas(2000, 1500)[0]
    d = ImageDraw.Draw(img)
    for (x, y, r), k, c in zip(discs, kinds, cols, strict=True):
        draw_shape(d, k, x, y, r, fill=c)
    meta = {
        "shapes": [
            [k, list(c), rounded(x), rounded(y)]
            for (x, y, _), k, c in zip(discs, kinds, cols, strict=True)
        ]
    }
    return Drawn((img,), " ".join(sorted(set(kinds))), meta)


def list_colours(size: int, rng: np.random.Generator, photo: bool = True) -> Drawn:
    """Draw a ``list_colours`` trial."""
    names = [list(PALETTE20)[int(k)] for k in rng.choice(20, size, replace=False)]
    kinds = [SHAPES4[int(k)] for k in rng.integers(0, 4, size)]
    discs = place_shapes(rng, [90] * size, kinds, (4, 4, 1996, 1496), gap=16)
    w, h = 2000, 1500
    img, d = canvas(w, LEGEND_H + h)
    draw_legend(d, w)
    img.paste(background(rng, w, h) if photo else canvas(w, h)[0], (0, LEGEND_H))
    for (x, y, r), k, name in zip(discs, kinds, names, strict=True):
        draw_shape(d, k, x, y + LEGEND_H, r, fill=PALETTE20[name])
    meta = {
        "shapes": [
            [k, n, rounded(x), rounded(y + LEGEND_H)]
            for (x, y, _), k, n in zip(discs, kinds, names, strict=True)
        ]
    }
    return Drawn((img,), " ".join(sorted(names)), meta)


LAYER_KINDS = ("circle", "diamond", "hexagon", "octagon")
LAYER_MIN_R = 24.0


def layered_shapes(size: int, rng: np.random.Generator) -> Drawn:
    """Draw a ``layered_shapes`` trial."""
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
        "radii": [rounded(r) for r in radii],
        "colours": [list(c) for c in colours],
    }
    return Drawn((img,), " ".join(reversed(kinds)), meta)


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
    """Draw a ``grid_path`` trial."""
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
    """Draw a ``maze_solving`` trial."""
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


GRAPH_R, GRAPH_W = 15, 800


def segment_cover(arr: np.ndarray, a, b, r: float) -> float:
    """Fraction of points on segment a-b (outside the end discs of radius ``r``) that are ink."""
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
    """Draw a ``graph_counting`` trial."""
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
    meta = {
        "nodes": [[rounded(x), rounded(y)] for x, y in nodes],
        "edges": sorted(map(list, edges)),
    }
    return Drawn((img,), f"{size} {n_edges}", meta)


NUMBERED_COLOURS = ("lightblue", "lightgreen", "khaki", "lightpink", "lightgray", "wheat")


def numbered_shapes(size: int, rng: np.random.Generator) -> Drawn:
    """Draw a ``numbered_shapes`` trial."""
    kinds = ["circle"] * size + [
        ("triangle", "square", "pentagon")[int(k)] for k in rng.integers(0, 3, size)
    ]
    perm = rng.permutation(2 * size)
    kinds = [kinds[int(k)] for k in perm]
    discs = place_shapes(rng, [32] * (2 * size), kinds, (4, 4, 1196, 896), gap=8)
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
            [k, int(lab), rounded(x), rounded(y)]
            for (x, y, _), k, lab in zip(discs, kinds, labels, strict=True)
        ]
    }
    return Drawn((img,), " ".join(circles), meta)
