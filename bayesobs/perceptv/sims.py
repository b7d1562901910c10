"""Simulated Percept-V subjects: pure functions ``(trial, rng, **kw) -> reply``."""

from __future__ import annotations

import itertools
from collections import deque

import numpy as np
from scipy import ndimage

from . import DOMAINS
from .common import PALETTE20, Trial, rgb
from .parse import format_reply, malformed_reply
from .pixels import (
    blobs,
    cell_of,
    colour_mask,
    grid_lines,
    ink_mask,
    line_positions,
    pack,
    packed,
    read_number,
    rgb_array,
    shape_kind,
)
from .scenes import GRAPH_R, NUMBERED_COLOURS, safe_cells, segment_cover

ERROR = 0.01
SLOPPY_RATE = 0.3


# ----------------------------------------------------------------------------- noise


def _miscount(rng, n: int, error: float) -> int:
    """``n`` seen objects, each miscounted by one (either way) with probability ``error``."""
    errs = rng.random(n) < error
    signs = rng.choice((-1, 1), n)
    return max(int(n + np.sum(signs[errs])), 0)


def _flip(rng, flags, error: float) -> list[bool]:
    return [bool(f) ^ bool(rng.random() < error) for f in flags]


def _other(rng, value, options):
    rest = [o for o in options if o != value]
    return rest[int(rng.integers(len(rest)))]


def _mislabel(rng, values, options, error: float):
    return [_other(rng, v, options) if rng.random() < error else v for v in values]


# ----------------------------------------------------------------------------- per-domain solvers


def _counting_circles(t: Trial, rng, e):
    return str(_miscount(rng, len(blobs(ink_mask(rgb_array(t.images[0])))), e))


def _count_coloured_circles(t, rng, e):
    arr = rgb_array(t.images[0])
    red = colour_mask(arr, (255, 0, 0))
    n_red = len(blobs(red))
    n_other = len(blobs(ink_mask(arr) & ~red))
    missed = int(np.sum(rng.random(n_red) < e))
    extra = int(np.sum(rng.random(n_other) < e))
    return str(n_red - missed + extra)


def _change_colour(t, rng, e):
    a1, a2 = rgb_array(t.images[0]), rgb_array(t.images[1])
    flags = []
    for b in blobs(ink_mask(a1)):
        sl, m = b["slice"], b["mask"]
        flags.append(bool(np.any(a1[sl][m] != a2[sl][m])))
    return str(sum(_flip(rng, flags, e)))


def _vanishing_objects(t, rng, e):
    a1, a2 = rgb_array(t.images[0]), rgb_array(t.images[1])
    flags = []
    for b in blobs(ink_mask(a1)):
        sl, m = b["slice"], b["mask"]
        flags.append(bool(np.all(ink_mask(a2[sl])[m] == 0)))
    return str(sum(_flip(rng, flags, e)))


def _mirror(axis):
    def solve(t, rng, e):
        a1, a2 = rgb_array(t.images[0]), rgb_array(t.images[1])
        blue = (0, 0, 255)
        shapes1 = blobs(ink_mask(a1) & ~colour_mask(a1, blue), 10)
        shapes2 = blobs(ink_mask(a2) & ~colour_mask(a2, blue), 10)
        h, w = a2.shape[:2]
        flags = [(b["x"] > w / 2) if axis == "vertical" else (b["y"] > h / 2) for b in shapes2]
        n_moved = sum(flags)
        # every first-image shape is judged moved or not; errors flip that judgement
        judged = [True] * n_moved + [False] * (len(shapes1) - n_moved)
        return str(sum(_flip(rng, judged, e)))

    return solve


def _row_kinds(arr: np.ndarray) -> list[str]:
    black = colour_mask(arr, (0, 0, 0))
    full = black.sum(axis=1) > 0.95 * arr.shape[1]
    bounds = [-1.0, *line_positions(full.astype(float), 0.5), float(arr.shape[0])]
    ink = ink_mask(arr) & ~full[:, None]
    kinds = []
    for y0, y1 in itertools.pairwise(bounds):
        row = ink[int(y0) + 3 : int(y1) - 2]
        bs = blobs(row)
        if bs:
            big = max(bs, key=lambda b: b["area"])
            kinds.append(shape_kind(big["mask"]))
        else:
            kinds.append("")
    return kinds


def _match(t, rng, e):
    k1 = _row_kinds(rgb_array(t.images[0]))
    k2 = _row_kinds(rgb_array(t.images[1]))
    kinds = ("circle", "triangle", "square", "pentagon")
    k1, k2 = _mislabel(rng, k1, kinds, e), _mislabel(rng, k2, kinds, e)
    return str(sum(a == b for a, b in zip(k1, k2, strict=False)))


def _circle_right_triangle(t, rng, e):
    arr = rgb_array(t.images[0])
    xs, ys = grid_lines(arr)
    cells = {}
    for colour, kind in (((0, 0, 255), "circle"), ((255, 0, 0), "triangle")):
        for b in blobs(colour_mask(arr, colour)):
            cells[cell_of(b["x"], b["y"], xs, ys)] = kind
    kinds = dict(
        zip(cells, _mislabel(rng, list(cells.values()), ("circle", "triangle"), e), strict=True)
    )
    yes = any(k == "triangle" and kinds.get((i, j + 1)) == "circle" for (i, j), k in kinds.items())
    return "yes" if yes else "no"


def _inside_circles(t, rng, e):
    arr = rgb_array(t.images[0])
    black = colour_mask(arr, (0, 0, 0))
    dot = blobs(colour_mask(arr, (255, 0, 0)))
    if not dot:
        return "no"
    dx, dy = round(dot[0]["x"]), round(dot[0]["y"])
    free, _ = ndimage.label(~black)
    face = free == free[dy, dx]
    touches = bool(face[0].any() or face[-1].any() or face[:, 0].any() or face[:, -1].any())
    inside = not touches  # an enclosed face is taken as inside a circle (wrong for pockets)
    # rings merge into few components: estimate their number from the ink (a ring of the mean
    # radius, 0.3 units = 120 px, 3 px wide, has about 2 pi 120 3 = 2260 black pixels)
    k = max(round(int(black.sum()) / (2 * np.pi * 120 * 3)), 1)
    if rng.random() < 1 - (1 - e) ** k:
        inside = not inside
    return "yes" if inside else "no"


def _counting_shapes(t, rng, e):
    kinds = [shape_kind(b["mask"]) for b in blobs(ink_mask(rgb_array(t.images[0])))]
    kinds = _mislabel(rng, kinds, ("circle", "triangle", "square"), e)
    return " ".join(str(kinds.count(k)) for k in ("circle", "triangle", "square"))


def _counting_locations(t, rng, e):
    arr = rgb_array(t.images[0])
    table = colour_mask(arr, (165, 42, 42))
    rows = np.nonzero(table.any(axis=1))[0]
    top, bottom = rows.min(), rows.max()
    bs = blobs(colour_mask(arr, (0, 0, 0)), 10)
    above = sum(b["y"] < top for b in bs)
    below = sum(b["y"] > bottom for b in bs)
    return f"{_miscount(rng, above, e)} {_miscount(rng, below, e)}"


def _circle_location(t, rng, e):
    arr = rgb_array(t.images[0])
    h, w = arr.shape[:2]
    quads = []
    for b in blobs(colour_mask(arr, (0, 0, 0))):
        right, top = b["x"] > w / 2, b["y"] < h / 2
        quads.append(
            {(True, True): 1, (False, True): 2, (False, False): 3, (True, False): 4}[(right, top)]
        )
    quads = _mislabel(rng, quads, (1, 2, 3, 4), e)
    counts = [quads.count(q) for q in (1, 2, 3, 4)]
    best = int(np.argmax(counts))
    return f"{best + 1} {counts[best]}"


def _comparing_size(t, rng, e):
    arr = rgb_array(t.images[0])
    black = colour_mask(arr, (0, 0, 0))
    full = black.sum(axis=1) > 0.95 * arr.shape[1]
    bounds = [-1.0, *line_positions(full.astype(float), 0.5)]
    out = []
    for y0, y1 in itertools.pairwise(bounds):
        band = arr[int(y0) + 1 : int(y1)]
        blue = int(colour_mask(band, (0, 0, 255)).sum())
        green = int(colour_mask(band, (0, 128, 0)).sum())
        bigger = "blue" if blue > green else "green"
        if rng.random() < 1 - (1 - e) ** 2:
            bigger = "green" if bigger == "blue" else "blue"
        out.append(bigger)
    return " ".join(out)


def _swap_neighbours(rng, order: list, e: float) -> list:
    order = list(order)
    for i in range(len(order) - 1):
        if rng.random() < e:
            order[i], order[i + 1] = order[i + 1], order[i]
    return order


def _sort_lines(t, rng, e):
    arr = rgb_array(t.images[0])
    black = colour_mask(arr, (0, 0, 0))
    lines = [b for b in blobs(black) if b["slice"][0].stop - b["slice"][0].start > 100]
    labelled = []
    n = len(lines)
    text = black.copy()
    for b in lines:
        text[b["slice"]][b["mask"]] = False
    for b in lines:
        top = b["slice"][0].start
        label = read_number(text, b["x"], top - 16, 22, range(1, n + 1), half_w=22)
        labelled.append((b["slice"][0].stop - top, label))
    order = [lab for _, lab in sorted(labelled, key=lambda p: p[0])]
    return " ".join(_swap_neighbours(rng, order, e))


def _grid_labels(arr, xs, ys):
    black = colour_mask(arr, (0, 0, 0))
    text = black.copy()
    text[:, [round(x) + d for x in xs for d in (-1, 0, 1)]] = False
    text[[round(y) + d for y in ys for d in (-1, 0, 1)], :] = False
    n = len(xs) - 1
    cols = [
        read_number(text, (xs[j] + xs[j + 1]) / 2, ys[0] / 2, 20, range(0, 10)) for j in range(n)
    ]
    rows = [
        read_number(text, xs[0] / 2, (ys[i] + ys[i + 1]) / 2, 20, range(0, 10)) for i in range(n)
    ]
    return rows, cols


def _locate(by_shape: bool):
    def solve(t, rng, e):
        arr = rgb_array(t.images[0])
        xs, ys = grid_lines(arr)
        row_lab, col_lab = _grid_labels(arr, xs, ys)
        objects = blobs(ink_mask(arr) & ~colour_mask(arr, (0, 0, 0)))
        target = []
        for b in objects:
            if by_shape:
                hit = shape_kind(b["mask"]) == "circle"
            else:
                sl, m = b["slice"], b["mask"]
                hit = bool(np.all(arr[sl][m] == (0, 128, 0)))
            target.append(hit)
        target = _flip(rng, target, e)
        if not any(target):  # a reply names at least one cell: keep the unperturbed reading
            target = [
                (shape_kind(b["mask"]) == "circle")
                if by_shape
                else bool(np.all(arr[b["slice"]][b["mask"]] == (0, 128, 0)))
                for b in objects
            ]
        cells = set()
        for b, hit in zip(objects, target, strict=True):
            if hit:
                i, j = cell_of(b["x"], b["y"], xs, ys)
                cells.add((int(row_lab[i]), int(col_lab[j])))
        return " ".join(f"({i},{j})" for i, j in sorted(cells))

    return solve


def _circle_boxes(t, rng, e):
    arr = rgb_array(t.images[0])
    line_x = float(np.mean(np.nonzero(colour_mask(arr, (0, 0, 255)).any(axis=0))[0]))
    reds = blobs(colour_mask(arr, (255, 0, 0)))
    left = _miscount(rng, sum(b["x"] < line_x for b in reds), e)
    right = _miscount(rng, sum(b["x"] > line_x for b in reds), e)
    return str(abs(left - right) // 2)


_IDENTIFY_RGB = {
    (0, 0, 255): "circle",
    (255, 0, 0): "triangle",
    (0, 128, 0): "diamond",
    (0, 255, 255): "pentagon",
    (255, 0, 255): "hexagon",
}


def _identifying_shapes(t, rng, e):
    arr = rgb_array(t.images[0])
    black = colour_mask(arr, (0, 0, 0))
    full = black.sum(axis=1) > 0.95 * arr.shape[1]
    bounds = [-1.0, *line_positions(full.astype(float), 0.5)]
    names = []
    for y0, y1 in itertools.pairwise(bounds):
        band = arr[int(y0) + 2 : int(y1) - 1]
        seen = [n for c, n in _IDENTIFY_RGB.items() if colour_mask(band, c).sum() > 50]
        names.append(seen[0] if seen else "circle")
    names = _mislabel(rng, names, tuple(_IDENTIFY_RGB.values()), e)
    return " ".join(names)


def _cross_and_knots(t, rng, e):
    arr = rgb_array(t.images[0])
    xs, ys = grid_lines(arr)
    black = colour_mask(arr, (0, 0, 0))
    crosses = []
    for i in range(len(ys) - 1):
        for j in range(len(xs) - 1):
            cell = black[int(ys[i]) + 4 : int(ys[i + 1]) - 3, int(xs[j]) + 4 : int(xs[j + 1]) - 3]
            if cell.sum() > 500:  # an X (two 6 px strokes) vs a small "(i,j)" label
                crosses.append((i, j))
    seen = [c for c in crosses if rng.random() >= e]  # each X overlooked with probability e

    safe = safe_cells(seen)
    return f"({safe[0][0]},{safe[0][1]})" if safe else "none"


def _sort_circles(t, rng, e):
    arr = rgb_array(t.images[0])
    black = colour_mask(arr, (0, 0, 0))
    circles = blobs(black, 100)
    n = len(circles)
    found = []
    for b in circles:
        filled = ndimage.binary_fill_holes(b["mask"])
        text = filled & ~b["mask"]
        sl = b["slice"]
        label = read_number(text, b["x"] - sl[1].start, b["y"] - sl[0].start, 14, range(1, n + 1))
        found.append((int(filled.sum()), label))
    order = [lab for _, lab in sorted(found, key=lambda p: p[0])]
    return " ".join(_swap_neighbours(rng, order, e))


_PALETTE = dict(PALETTE20)
_PACKED = {(r << 16) | (g << 8) | b: name for name, (r, g, b) in _PALETTE.items()}


def _below_legend(arr: np.ndarray) -> np.ndarray:
    """The part of the image under the legend's full-width black line."""
    black = colour_mask(arr, (0, 0, 0))
    full = np.nonzero(black.sum(axis=1) > 0.95 * arr.shape[1])[0]
    return arr[full.max() + 1 :] if len(full) else arr


def _layered_colours(t, rng, e):
    arr = _below_legend(rgb_array(t.images[0]))
    ys, xs = np.nonzero(ink_mask(arr))
    cy, cx = (ys.min() + ys.max()) // 2, (xs.min() + xs.max()) // 2
    row = arr[cy, cx:].astype(np.int64)
    packed = (row[:, 0] << 16) | (row[:, 1] << 8) | row[:, 2]
    seq = []
    for v in packed:
        name = _PACKED.get(int(v))
        if name and (not seq or seq[-1] != name):
            seq.append(name)
    return " ".join(_mislabel(rng, seq, tuple(_PALETTE), e))


def _colours_present(t, rng, e):
    arr = _below_legend(rgb_array(t.images[0])).astype(np.int64)
    packed = (arr[..., 0] << 16) | (arr[..., 1] << 8) | arr[..., 2]
    values, counts = np.unique(packed, return_counts=True)
    seen = {
        _PACKED[int(v)] for v, c in zip(values, counts, strict=True) if c > 50 and int(v) in _PACKED
    }
    flags = _flip(rng, [True] * len(seen), e)  # each shape's colour overlooked with probability e
    seen = {n for n, keep in zip(sorted(seen), flags, strict=True) if keep}
    return " ".join("yes" if n in seen else "no" for n in _PALETTE)


def _list_shapes(t, rng, e):
    p = packed(rgb_array(t.images[0]))
    kinds = []
    for c in ((255, 0, 0), (0, 128, 0), (0, 0, 255)):
        kinds += [shape_kind(b["mask"]) for b in blobs(p == pack(c), 200)]
    kinds = _mislabel(rng, kinds, ("circle", "triangle", "square", "pentagon"), e)
    return " ".join(sorted(set(kinds)))


def _numbered_shapes(t, rng, e):
    p = packed(rgb_array(t.images[0]))
    black = p == 0
    shapes = []
    for name in NUMBERED_COLOURS:
        shapes += blobs(p == pack(rgb(name)), 200)
    n = len(shapes)
    circles = []
    for b in shapes:
        sl = b["slice"]
        is_circle = shape_kind(b["mask"]) == "circle"
        if rng.random() < e:
            is_circle = not is_circle
        if not is_circle:
            continue
        text = black[sl] & ndimage.binary_fill_holes(b["mask"])
        ys, xs = np.nonzero(text)
        if len(xs) == 0:
            continue
        circles.append(read_number(text, xs.mean(), ys.mean(), 16, range(1, n + 1)))
    if not circles:  # a reply names at least one number
        circles = ["1"]
    return " ".join(sorted(set(circles)))


def _list_colours(t, rng, e):
    p = packed(_below_legend(rgb_array(t.images[0])))
    seen = sorted(name for v, name in _PACKED.items() if np.count_nonzero(p == v) > 500)
    kept = [n for n, keep in zip(seen, _flip(rng, [True] * len(seen), e), strict=True) if keep]
    return " ".join(kept or seen)


def _graph_counting(t, rng, e):

    arr = rgb_array(t.images[0])
    nodes = [(b["x"], b["y"]) for b in blobs(colour_mask(arr, (0, 0, 255)), 100)]
    n = len(nodes)
    edges = sum(
        segment_cover(arr, nodes[i], nodes[j], GRAPH_R) > 0.9
        for i in range(n)
        for j in range(i + 1, n)
    )
    return f"{_miscount(rng, n, e)} {_miscount(rng, edges, e)}"


_LAYER_RATIO = {"circle": 1.0, "octagon": 0.900, "hexagon": 0.827, "diamond": 0.637}


def _layered_shapes(t, rng, e):
    p = packed(rgb_array(t.images[0]))
    small = p[::4, ::4]
    layers = []
    for v in np.unique(small):
        if v == 0xFFFFFF:
            continue
        ys, xs = np.nonzero(small == v)
        y0, x0 = max(4 * ys.min() - 4, 0), max(4 * xs.min() - 4, 0)
        ys, xs = np.nonzero(p[y0 : 4 * ys.max() + 5, x0 : 4 * xs.max() + 5] == v)
        ys, xs = ys + y0, xs + x0
        box = (ys.min(), ys.max() + 1, xs.min(), xs.max() + 1)
        cy, cx = (box[0] + box[1] - 1) / 2, (box[2] + box[3] - 1) / 2
        hy, hx = (box[1] - box[0]) / 2, (box[3] - box[2]) / 2
        r_max = float(np.sqrt(((ys - cy) ** 2 + (xs - cx) ** 2).max()))
        # a diamond and the circle around it share box and reach: only the circle has ink
        # outside the box's inscribed diamond
        corners = int(np.sum(np.abs(ys - cy) / hy + np.abs(xs - cx) / hx > 1.05))
        layers.append([(box[1] - box[0]) * (box[3] - box[2]), r_max, corners, int(v), box])
    layers.sort(key=lambda L: (L[0], L[1]))  # innermost (smallest box, then reach) first
    for k in range(len(layers) - 1):
        a, b = layers[k], layers[k + 1]
        if a[0] == b[0] and abs(a[1] - b[1]) <= 1.5 and a[2] > b[2]:
            layers[k], layers[k + 1] = b, a
    kinds, union = [], np.zeros(p.shape, bool)
    for *_, v, (y0, y1, x0, x1) in layers:
        union[y0:y1, x0:x1] |= p[y0:y1, x0:x1] == v
        ys, xs = np.nonzero(union[y0:y1, x0:x1])
        cx, cy = xs.mean(), ys.mean()
        r_max = np.sqrt(((xs - cx) ** 2 + (ys - cy) ** 2).max()) + 0.5
        ratio = len(xs) / (np.pi * r_max**2)
        kinds.append(min(_LAYER_RATIO, key=lambda k: abs(_LAYER_RATIO[k] - ratio)))
    return " ".join(_mislabel(rng, kinds, tuple(_LAYER_RATIO), e))


def _maze_solving(t, rng, e):

    arr = rgb_array(t.images[0])
    black = colour_mask(arr, (0, 0, 0))
    n = 11
    cell = arr.shape[0] // n
    wall = np.array(
        [
            [
                black[i * cell : (i + 1) * cell, j * cell : (j + 1) * cell].mean() > 0.8
                for j in range(n)
            ]
            for i in range(n)
        ]
    )
    labels = {}
    cands = ["S", "E", *[str(k) for k in range(60)]]
    for i in range(n):
        for j in range(n):
            if not wall[i, j]:
                crop = black[i * cell : (i + 1) * cell, j * cell : (j + 1) * cell]
                labels[i, j] = read_number(crop, cell / 2, cell / 2, 14, cands, half_w=cell / 2)
    start = next(c for c, v in labels.items() if v == "S")
    end = next(c for c, v in labels.items() if v == "E")
    prev, queue = {start: None}, deque([start])
    while queue:
        i, j = queue.popleft()
        for c in ((i - 1, j), (i + 1, j), (i, j - 1), (i, j + 1)):
            if c in labels and c not in prev:
                prev[c] = (i, j)
                queue.append(c)
    path, c = [], end
    while c is not None:
        path.append(c)
        c = prev[c]
    inner = [labels[c] for c in reversed(path[1:-1])]
    inner = [str(int(rng.integers(60))) if rng.random() < e else v for v in inner]
    return " ".join(["s", *inner, "e"])


def _grid_path(t, rng, e):
    arr = rgb_array(t.images[0])
    black = colour_mask(arr, (0, 0, 0))
    # grid lines span the whole grid; a path line never spans more than 5 of the 6 cells
    span = 0.95 * (arr.shape[0] - 20)
    xs = line_positions(black.sum(axis=0), span)
    ys = line_positions(black.sum(axis=1), span)
    n = len(xs) - 1
    cx = [(xs[k] + xs[k + 1]) / 2 for k in range(n)]
    cy = [(ys[k] + ys[k + 1]) / 2 for k in range(n)]
    links: dict = {}
    for i in range(n):
        for j in range(n):
            for a, b in (((i, j), (i, j + 1)), ((i, j), (i + 1, j))):
                if b[0] >= n or b[1] >= n:
                    continue
                if a[0] == b[0]:  # a vertical border at xs[j + 1]: look 20 px to each side
                    x, y = int(xs[j + 1]), int(cy[i])
                    hit = (
                        black[y - 1 : y + 2, x - 22 : x - 18].any()
                        and black[y - 1 : y + 2, x + 18 : x + 22].any()
                    )
                else:
                    x, y = int(cx[j]), int(ys[i + 1])
                    hit = (
                        black[y - 22 : y - 18, x - 1 : x + 2].any()
                        and black[y + 18 : y + 22, x - 1 : x + 2].any()
                    )
                if hit:
                    links.setdefault(a, []).append(b)
                    links.setdefault(b, []).append(a)
    # S: the cell with ink in its top-left corner
    start = next(
        (i, j)
        for i in range(n)
        for j in range(n)
        if black[int(ys[i]) + 8 : int(ys[i]) + 26, int(xs[j]) + 8 : int(xs[j]) + 26].any()
    )
    path, prev = [start], None
    while True:
        nxt = [c for c in links.get(path[-1], []) if c != prev]
        if not nxt:
            break
        prev = path[-1]
        path.append(nxt[0])
    kinds = []
    ink = ink_mask(arr) & ~black
    for i, j in path:
        sub = ink[int(cy[i]) - 30 : int(cy[i]) + 31, int(cx[j]) - 30 : int(cx[j]) + 31]
        bs = blobs(sub)
        kinds.append(shape_kind(max(bs, key=lambda b: b["area"])["mask"]) if bs else "circle")
    return " ".join(_mislabel(rng, kinds, ("circle", "triangle", "square"), e))


SOLVERS = {
    "grid_path": _grid_path,
    "maze_solving": _maze_solving,
    "layered_shapes": _layered_shapes,
    "graph_counting": _graph_counting,
    "list_colours": _list_colours,
    "layered_colours": _layered_colours,
    "colours_present": _colours_present,
    "list_shapes": _list_shapes,
    "numbered_shapes": _numbered_shapes,
    "circle_boxes": _circle_boxes,
    "identifying_shapes": _identifying_shapes,
    "cross_and_knots": _cross_and_knots,
    "sort_circles": _sort_circles,
    "counting_circles": _counting_circles,
    "count_coloured_circles": _count_coloured_circles,
    "change_colour": _change_colour,
    "vanishing_objects": _vanishing_objects,
    "mirror_image": _mirror("vertical"),
    "water_image": _mirror("horizontal"),
    "match_outline": _match,
    "match_shadow": _match,
    "circle_right_triangle": _circle_right_triangle,
    "inside_circles": _inside_circles,
    "counting_shapes": _counting_shapes,
    "counting_locations": _counting_locations,
    "circle_location": _circle_location,
    "comparing_size": _comparing_size,
    "sort_lines": _sort_lines,
    "locate_circles_colour": _locate(by_shape=False),
    "locate_circles_shape": _locate(by_shape=True),
}


def perceive(trial: Trial, rng: np.random.Generator, error: float = ERROR) -> str:
    """The perceiver's normalised answer (before formatting)."""
    return SOLVERS[trial.domain](trial, rng, error)


def perceiver(trial: Trial, rng: np.random.Generator, error: float = ERROR) -> str:
    """Image analysis with a per-object error ``error``; a well-formed reply."""
    return format_reply(trial.answer_format, perceive(trial, rng, error))


def guesser(trial: Trial, rng: np.random.Generator) -> str:
    """A draw from the domain's answer prior, well-formed (accuracy = the chance level)."""
    dom = DOMAINS[trial.domain]
    return format_reply(trial.answer_format, dom.guess(rng, **trial.meta.get("options", {})))


def sloppy(
    trial: Trial, rng: np.random.Generator, rate: float = SLOPPY_RATE, error: float = ERROR
) -> str:
    """The perceiver's answer, but out of format with probability ``rate``."""
    value = perceive(trial, rng, error)
    if rng.random() < rate:
        return malformed_reply(value)
    return format_reply(trial.answer_format, value)


SIMS = {"perceiver": perceiver, "guesser": guesser, "sloppy": sloppy}


def answer(subject: str, trial: Trial, rng: np.random.Generator, **kw) -> str:
    """Reply of the simulated ``subject`` (``perceiver``, ``guesser``, ``sloppy``) to ``trial``."""
    try:
        fn = SIMS[subject]
    except KeyError:
        raise ValueError(f"unknown subject {subject!r}; expected one of {sorted(SIMS)}") from None
    return fn(trial, rng, **kw)
