"""Simulated subjects for the Tunnel Vision tasks: pure functions ``(trial, rng) -> reply``."""

from __future__ import annotations

import math
import re
import weakref
from collections.abc import Callable
from functools import lru_cache

import numpy as np
from scipy import ndimage

from ..stimuli.drawing import render_text
from . import circuits, hunt, reid
from .common import Trial, palette_labels

REID_MISMATCH_PX = 20
GIST_THRESHOLD = 0.5
CHAIN_ERROR = 0.2
TRACE_CONFUSION = 0.6
_EIGHT = np.ones((3, 3), bool)


def _choice(rng: np.random.Generator, seq):
    return seq[int(rng.integers(len(seq)))]


# ----------------------------------------------------------------------------- re-identification


def _colour_hist(lab: np.ndarray) -> np.ndarray:
    return np.bincount(lab.ravel(), minlength=len(reid.COLOURS) + 1)[1:].astype(float)


def _object_candidates(lab1: np.ndarray, lab2: np.ndarray, keep: int = 3) -> list[np.ndarray]:
    """Masks of the image-2 blob sets whose colour make-up is closest to image 1's object."""
    blobs, n = ndimage.label(lab2 > 0, structure=_EIGHT)
    if n == 0:
        return []
    n = min(n, 12)
    hists = np.stack([_colour_hist(np.where(blobs == k + 1, lab2, 0)) for k in range(n)])
    h1 = _colour_hist(lab1)
    h1 = h1 / h1.sum()
    subsets = ((np.arange(1, 2**n)[:, None] >> np.arange(n)) & 1).astype(float)
    sums = subsets @ hists
    totals = sums.sum(1)
    dist = np.abs(sums / totals[:, None] - h1[None, :]).sum(1)
    ratio = totals / max((lab1 > 0).sum(), 1)
    dist[(ratio < 0.05) | (ratio > 5)] = np.inf  # whole-object scale is 0.3-2.0 (area 0.09-4)
    order = np.argsort(dist, kind="stable")[:keep]
    return [np.isin(blobs, 1 + np.flatnonzero(subsets[i])) for i in order if np.isfinite(dist[i])]


def _agreement(lab1, pts1, l1, lab2m, pts2, l2, c1, th, s, c2) -> np.ndarray:
    """Mean colour-label agreement of the two objects, both ways, for N transforms at once."""
    h, w = lab1.shape
    c, sn = np.cos(th)[:, None], np.sin(th)[:, None]
    s = np.asarray(s)[:, None]
    dx = (pts2[None, :, 0] - c2[:, 0:1]) / s
    dy = (pts2[None, :, 1] - c2[:, 1:2]) / s
    qx = np.clip(np.rint(c1[0] + c * dx + sn * dy).astype(int), 0, w - 1)
    qy = np.clip(np.rint(c1[1] - sn * dx + c * dy).astype(int), 0, h - 1)
    fwd = (lab1[qy, qx] == l2[None, :]).mean(1)
    dx = (pts1[None, :, 0] - c1[0]) * s
    dy = (pts1[None, :, 1] - c1[1]) * s
    px = np.clip(np.rint(c2[:, 0:1] + c * dx - sn * dy).astype(int), 0, w - 1)
    py = np.clip(np.rint(c2[:, 1:2] + sn * dx + c * dy).astype(int), 0, h - 1)
    rev = (lab2m[py, px] == l1[None, :]).mean(1)
    return 0.5 * (fwd + rev)


def _rms_radius(mask: np.ndarray, centre: np.ndarray) -> float:
    ys, xs = np.nonzero(mask)
    return float(np.sqrt(((xs - centre[0]) ** 2 + (ys - centre[1]) ** 2).mean()))


def _points(mask: np.ndarray, cap: int) -> np.ndarray:
    ys, xs = np.nonzero(mask)
    step = max(1, len(xs) // cap)
    return np.column_stack([xs[::step], ys[::step]]).astype(float)


def _fit(lab1: np.ndarray, m1: np.ndarray, lab2m: np.ndarray, mask2: np.ndarray):
    """Whole-object transform (rotation, scale, image-2 centre) that best aligns the two objects."""
    c1 = np.argwhere(m1)[:, ::-1].mean(0)
    c2 = np.argwhere(mask2)[:, ::-1].mean(0)
    s = _rms_radius(mask2, c2) / _rms_radius(m1, c1)

    def data(cap):
        p1, p2 = _points(m1, cap), _points(mask2, cap)
        l1 = lab1[p1[:, 1].astype(int), p1[:, 0].astype(int)]
        l2 = lab2m[p2[:, 1].astype(int), p2[:, 0].astype(int)]
        return lab1, p1, l1, lab2m, p2, l2, c1

    few, full = data(600), data(3000)
    coarse = np.radians(np.arange(0, 360, 2.0))
    n = len(coarse)
    cs = _agreement(*few, coarse, np.full(n, s), np.tile(c2, (n, 1)))
    best = (-1.0, 0.0, s, c2)
    ks = np.array([-4, -3, -2, -1, 1, 2, 3, 4], float)
    for th0 in coarse[np.argsort(-cs, kind="stable")[:2]]:
        x = np.array([th0, s, c2[0], c2[1]])
        steps = np.array([math.radians(0.5), 0.01 * s, 1.0, 1.0])
        score = _agreement(*full, x[:1], x[1:2], x[None, 2:])[0]
        for _round in range(3):
            for i in range(4):
                cand = np.tile(x, (len(ks), 1))
                cand[:, i] += ks * steps[i]
                sc = _agreement(*full, cand[:, 0], cand[:, 1], cand[:, 2:])
                k = int(np.argmax(sc))
                if sc[k] > score:
                    score, x = sc[k], cand[k]
            steps = steps / 2
        if score > best[0]:
            best = (float(score), float(x[0]), float(x[1]), x[2:].copy())
    return c1, best[1], best[2], best[3]


def reid_mismatch(img1, img2) -> int:
    """Pixels (after a 3 x 3 opening) where image 1 warped onto image 2's object disagrees in colour."""
    lab1 = reid.labels(img1)
    lab2 = reid.labels(img2)
    m1 = lab1 > 0
    if not m1.any():
        return 10**9
    best = 10**9
    h, w = lab1.shape
    for mask2 in _object_candidates(lab1, lab2):
        lab2m = np.where(mask2, lab2, 0)
        c1, th, s, c2 = _fit(lab1, m1, lab2m, mask2)
        c, sn = math.cos(th), math.sin(th)
        ys1, xs1 = np.nonzero(m1)
        d = (np.column_stack([xs1, ys1])[:: max(1, len(xs1) // 4000)] - c1) * s
        mapped = c2 + np.column_stack([c * d[:, 0] - sn * d[:, 1], sn * d[:, 0] + c * d[:, 1]])
        ys2, xs2 = np.nonzero(mask2)
        x_lo = int(max(0, min(xs2.min(), mapped[:, 0].min()) - 4))
        x_hi = int(min(w, max(xs2.max(), mapped[:, 0].max()) + 5))
        y_lo = int(max(0, min(ys2.min(), mapped[:, 1].min()) - 4))
        y_hi = int(min(h, max(ys2.max(), mapped[:, 1].max()) + 5))
        ys, xs = np.mgrid[y_lo:y_hi, x_lo:x_hi]
        dx, dy = (xs - c2[0]) / s, (ys - c2[1]) / s
        qx = np.rint(c1[0] + c * dx + sn * dy).astype(int)
        qy = np.rint(c1[1] - sn * dx + c * dy).astype(int)
        ok = (qx >= 0) & (qx < w) & (qy >= 0) & (qy < h)
        warped = np.zeros(xs.shape, lab1.dtype)
        warped[ok] = lab1[qy[ok], qx[ok]]
        win = lab2m[y_lo:y_hi, x_lo:x_hi]
        diff = (warped != win) & ((warped > 0) | (win > 0))
        best = min(best, int(ndimage.binary_opening(diff, structure=np.ones((3, 3))).sum()))
        if best == 0:
            break
    return best


def matcher(trial: Trial, rng: np.random.Generator) -> str:
    """Re-identification by segmentation and whole-object alignment (about 100% correct)."""
    same = reid_mismatch(*trial.images) < REID_MISMATCH_PX
    return "{yes}" if same else "{no}"


def gist(trial: Trial, rng: np.random.Generator) -> str:
    """Re-identification from colour histograms only (blind to shape and arrangement)."""
    h1, h2 = (_colour_hist(reid.labels(im)) for im in trial.images)
    d = np.abs(h1 / max(h1.sum(), 1) - h2 / max(h2.sum(), 1)).sum()
    return "{yes}" if d < GIST_THRESHOLD else "{no}"


def always_yes(trial: Trial, rng: np.random.Generator) -> str:
    """Always answers yes."""
    return "{yes}"


# ----------------------------------------------------------------------------- scavenger hunt

_START = re.compile(r"Starting at the (\w+) (\w+), follow the labels? for (\d+) steps?")
_HUNT_LAB_BOX = (hunt.CELL, 20)


def _ink(arr: np.ndarray) -> np.ndarray:
    """Text pixels: pure black (text is drawn without antialiasing; no shape or wire is black)."""
    return np.all(arr == 0, axis=-1) if arr.ndim == 3 else arr == 0


@lru_cache(maxsize=64)
def _label_templates() -> tuple[list[str], np.ndarray]:
    names = [hunt.label_text(p) for p in hunt.PAIRS]
    return names, np.stack([_ink(render_text(n, hunt.FONT_SIZE, _HUNT_LAB_BOX)) for n in names])


def read_hunt_cells(img) -> list[dict]:
    """Every cell's ``row``, ``col``, ``colour`` (modal palette colour) and ``shape``."""
    lab = palette_labels(np.asarray(img), hunt.PALETTE)
    out = []
    for r in range(hunt.GRID):
        for c in range(hunt.GRID):
            y0, x0 = r * hunt.CELL, c * hunt.CELL
            cell = lab[y0 : y0 + hunt.CELL, x0 : x0 + hunt.CELL]
            counts = np.bincount(cell.ravel(), minlength=len(hunt.COLOURS) + 1)[1:]
            k = int(np.argmax(counts))
            ys, xs = np.nonzero(cell == k + 1)
            shape = "circle"
            if len(xs):
                bw, bh = xs.max() - xs.min() + 1, ys.max() - ys.min() + 1
                if bh < 0.93 * bw:
                    shape = "triangle"
                else:
                    ya, yb, xa, xb = ys.min() + 2, ys.max() - 2, xs.min() + 2, xs.max() - 2
                    if sum(cell[y, x] == k + 1 for y in (ya, yb) for x in (xa, xb)) >= 3:
                        shape = "square"
            out.append({"row": r, "col": c, "colour": hunt.COLOURS[k], "shape": shape})
    return out


def read_hunt_label(img, row: int, col: int) -> str:
    """The label of cell ``(row, col)``: the best of the 33 label templates on its text band."""
    names, masks = _label_templates()
    cy, x0, r = row * hunt.CELL + hunt.CELL // 2, col * hunt.CELL, 1
    arr = np.asarray(img)
    band = np.zeros((_HUNT_LAB_BOX[1] + 2 * r, _HUNT_LAB_BOX[0] + 2 * r), bool)
    lo, hi = max(x0 - r, 0), min(x0 + hunt.CELL + r, arr.shape[1])
    band[:, lo - (x0 - r) : hi - (x0 - r)] = _ink(arr[cy - 10 - r : cy + 10 + r, lo:hi])
    return names[best_match(band, masks, r)[0]]


def read_hunt_grid(img) -> list[dict]:
    """Every cell with its ``label`` too (see :func:`read_hunt_cells`, :func:`read_hunt_label`)."""
    cells = read_hunt_cells(img)
    for c in cells:
        c["label"] = read_hunt_label(img, c["row"], c["col"])
    return cells


def chainer(trial: Trial, rng: np.random.Generator, error: float = CHAIN_ERROR) -> str:
    """Follow the labels read from the image; each step goes astray with probability ``error``."""
    m = _START.search(trial.prompt)
    if not m:
        return "{" + _choice(rng, hunt.COLOURS) + "}"
    start, steps = f"{m.group(1)} {m.group(2)}", int(m.group(3))
    wants_cell = "What shape are you on" in trial.prompt
    img = trial.images[0]
    cells = read_hunt_cells(img)
    where = {f"{c['colour']} {c['shape']}": i for i, c in enumerate(cells)}
    cur = where.get(start)
    for _ in range(steps):
        if cur is None:
            break
        if rng.random() < error:
            cur = _choice(rng, [i for i in range(len(cells)) if i != cur])
        else:
            cur = where.get(read_hunt_label(img, cells[cur]["row"], cells[cur]["col"]))
    if cur is None:  # the chain left the grid: guess
        pair = _choice(rng, hunt.PAIRS)
        return "{" + (f"{pair[0]} {pair[1]}" if wants_cell else pair[0]) + "}"
    c = cells[cur]
    return "{" + (f"{c['colour']} {c['shape']}" if wants_cell else c["colour"]) + "}"


def frequent(trial: Trial, rng: np.random.Generator) -> str:
    """The colour held by the most cells (ties broken at random)."""
    cells = read_hunt_cells(trial.images[0])
    counts = {c: 0 for c in hunt.COLOURS}
    for cell in cells:
        counts[cell["colour"]] += 1
    top = max(counts.values())
    return "{" + _choice(rng, [c for c in hunt.COLOURS if counts[c] == top]) + "}"


# ----------------------------------------------------------------------------- circuits

_PORT_Q = re.compile(r"wire from port (\d+)")
_FILLS = {f: tuple(int(f[i : i + 2], 16) for i in (1, 3, 5)) for f in circuits.COMPONENT_FILLS}
_DIRS = [(1, 0), (1, 1), (0, 1), (-1, 1), (-1, 0), (-1, -1), (0, -1), (1, -1)]


def read_components(img) -> list[tuple[str, tuple[int, int, int, int]]]:
    """Component boxes (pastel blobs) and their labels read by template matching."""
    arr = np.asarray(img)
    lab = palette_labels(arr[::2, ::2], _FILLS) > 0  # boxes are large: half resolution finds them
    blobs, _ = ndimage.label(lab)
    names = [f"C{k}" for k in range(1, 11)]
    tw, th = 60, 20
    masks = np.stack([_ink_template(nm, circuits.LABEL_SIZE, (tw, th)) for nm in names])
    out = []
    for sl in ndimage.find_objects(blobs):
        y0, y1, x0, x1 = 2 * sl[0].start, 2 * sl[0].stop - 1, 2 * sl[1].start, 2 * sl[1].stop - 1
        if (y1 - y0) * (x1 - x0) < 1000:
            continue
        cx, cy, r = (x0 + x1) // 2, (y0 + y1) // 2, 6
        band = _ink(arr[cy - th // 2 - r : cy + th // 2 + r, cx - tw // 2 - r : cx + tw // 2 + r])
        if band.shape != (th + 2 * r, tw + 2 * r):
            continue
        out.append((names[best_match(band, masks, r)[0]], (x0, y0, x1, y1)))
    return out


@lru_cache(maxsize=64)
def _ink_template(text: str, size: int, box: tuple[int, int], anchor: str = "mm") -> np.ndarray:
    return _ink(render_text(text, size, box, anchor))


def best_match(crop: np.ndarray, masks: np.ndarray, shift: int) -> tuple[int, float]:
    """Index and score of the template best matching an ink ``crop`` within +-``shift`` px."""
    th, tw = masks.shape[1:]
    win = np.lib.stride_tricks.sliding_window_view(crop, (th, tw))  # (2s+1, 2s+1, th, tw)
    inter = np.einsum("abij,kij->kab", win.astype(np.int32), masks.astype(np.int32))
    union = masks.sum((1, 2))[:, None, None] + win.sum((2, 3))[None] - inter
    score = inter / np.maximum(union, 1)
    k = int(np.argmax(score.reshape(len(masks), -1).max(1)))
    return k, float(score[k].max())


def read_ports(img) -> dict[int, tuple[int, int]]:
    """Breadboard port centres keyed by the number read beside each (layout from the grey board)."""
    arr = np.asarray(img)
    small = arr[::2, ::2]
    ys, xs = np.nonzero((small[..., 0] == 224) & (small[..., 1] == 224) & (small[..., 2] == 224))
    if not len(xs):
        return {}
    left, right, top, bottom = (
        2 * xs.min() - 2,
        2 * xs.max() + 2,
        2 * ys.min() - 2,
        2 * ys.max() + 2,
    )
    bw, bh = right - left, bottom - top
    centres = [
        (int(left + bw * f), int(top + bh / 6 * (i + 1))) for f in (0.25, 0.75) for i in range(5)
    ]
    tw, th, r = 20, 16, 2
    names = [str(k) for k in range(1, 11)]
    masks = np.stack([_ink_template(nm, circuits.NUMBER_SIZE, (tw, th), "lm") for nm in names])
    best: dict[int, tuple[float, tuple[int, int]]] = {}
    for x, y in centres:
        x0 = x + circuits.PORT_RADIUS + 4
        band = _ink(arr[y - th // 2 - r : y + th // 2 + r, x0 - r : x0 + tw + r])
        if band.shape != (th + 2 * r, tw + 2 * r):
            continue
        k, score = best_match(band, masks, r)
        if score > best.get(k + 1, (-1.0, None))[0]:
            best[k + 1] = (score, (x, y))
    return {k: v[1] for k, v in best.items()}


def port_centre(img, port: int) -> tuple[int, int] | None:
    """Centre of breadboard port ``port`` (see :func:`read_ports`); ``None`` if no port reads so."""
    return read_circuit(img)[1].get(port)


def _box_distance(p, box) -> float:
    x0, y0, x1, y1 = box
    dx = max(x0 - p[0], 0, p[0] - x1)
    dy = max(y0 - p[1], 0, p[1] - y1)
    return math.hypot(dx, dy)


_SCENES: dict[int, tuple[weakref.ref, tuple]] = {}  # id(image) -> (weak reference, reading)


def read_circuit(
    img,
) -> tuple[list[tuple[str, tuple[int, int, int, int]]], dict[int, tuple[int, int]]]:
    """Components (label, box) and breadboard port centres by the number read beside each port."""
    entry = _SCENES.get(id(img))
    if entry is not None and entry[0]() is img:
        return entry[1]
    if len(_SCENES) > 1024:
        _SCENES.clear()
    reading = (read_components(img), read_ports(img))
    _SCENES[id(img)] = (weakref.ref(img), reading)
    return reading


def _circuit_scene(trial: Trial):
    img = trial.images[0]
    m = _PORT_Q.search(trial.prompt)
    comps, ports = read_circuit(img)
    start = ports.get(int(m.group(1))) if m else None
    return np.asarray(img), comps, start


def nearest(trial: Trial, rng: np.random.Generator) -> str:
    """The component box nearest the query port."""
    _, comps, start = _circuit_scene(trial)
    if not comps or start is None:
        return "{C1}"
    return "{" + min(comps, key=lambda c: _box_distance(start, c[1]))[0] + "}"


def colourcue(trial: Trial, rng: np.random.Generator) -> str:
    """A component with a port carrying the query wire's colour (at random among them)."""
    arr, comps, start = _circuit_scene(trial)
    if not comps or start is None:
        return "{C1}"
    colour = arr[start[1], start[0]]
    hits = []
    for name, (x0, y0, x1, y1) in comps:
        pad = 6
        win = arr[max(y0 - pad, 0) : y1 + pad, max(x0 - pad, 0) : x1 + pad]
        if np.all(win == colour, axis=-1).any():
            hits.append(name)
    return "{" + _choice(rng, hits or [c[0] for c in comps]) + "}"


def trace(
    arr: np.ndarray, start: tuple[int, int], rng: np.random.Generator, confusion: float
) -> tuple[float, float]:
    """Follow the wire of the start pixel's colour; returns where the trace ends."""
    h, w = arr.shape[:2]
    mask = np.all(arr == arr[start[1], start[0]], axis=-1)

    def on(x: float, y: float) -> bool:
        xi, yi = round(x), round(y)
        return 0 <= xi < w and 0 <= yi < h and bool(mask[yi, xi])

    def hits(p, d, lo, hi) -> int:
        return sum(on(p[0] + k * d[0], p[1] + k * d[1]) for k in range(lo, hi + 1))

    def unit(d):
        n = math.hypot(*d)
        return (d[0] / n, d[1] / n)

    p = (float(start[0]), float(start[1]))
    scores = [hits(p, unit(d), 3, 10) for d in _DIRS]
    if max(scores) < 5:
        return p
    d = unit(_DIRS[int(np.argmax(scores))])
    cooldown = 16
    for _ in range(4000):
        perp = (-d[1], d[0])
        if (
            cooldown <= 0
            and on(p[0] + 7 * perp[0], p[1] + 7 * perp[1])
            and on(p[0] - 7 * perp[0], p[1] - 7 * perp[1])
        ):
            cooldown = 16  # a crossing with a wire of the same colour
            if rng.random() < confusion:
                d = _choice(rng, [d, perp, (-perp[0], -perp[1])])
        cooldown -= 1
        ahead = next((k for k in range(1, 9) if on(p[0] + k * d[0], p[1] + k * d[1])), None)
        if ahead is not None:
            p = (p[0] + d[0], p[1] + d[1])
            perp = (-d[1], d[0])
            offs = [
                t for t in (-3, -2, -1, 0, 1, 2, 3) if on(p[0] + t * perp[0], p[1] + t * perp[1])
            ]
            if offs and len(offs) <= 5:  # re-centre on the wire (not inside a crossing)
                t = sum(offs) / len(offs)
                p = (p[0] + t * perp[0], p[1] + t * perp[1])
            continue
        back = (-d[0], -d[1])
        turns = [
            u
            for u in (unit(v) for v in _DIRS)
            if abs(u[0] - d[0]) + abs(u[1] - d[1]) > 1e-6
            and abs(u[0] - back[0]) + abs(u[1] - back[1]) > 1e-6
        ]
        pb = (p[0] - 2 * d[0], p[1] - 2 * d[1])  # the bend's centre lies about 2 px back
        scores = [hits(pb, u, 4, 12) for u in turns]
        if max(scores) < 5:
            return p
        d = turns[int(np.argmax(scores))]
        p = pb
        cooldown = 16
    return p


def tracer(trial: Trial, rng: np.random.Generator, confusion: float = TRACE_CONFUSION) -> str:
    """Trace the wire; at a crossing with a same-coloured wire, confused with p = ``confusion``."""
    arr, comps, start = _circuit_scene(trial)
    if not comps or start is None:
        return "{C1}"
    end = trace(arr, start, rng, confusion)
    name, box = min(comps, key=lambda c: _box_distance(end, c[1]))
    if _box_distance(end, box) > 20:
        return "{" + _choice(rng, [c[0] for c in comps]) + "}"
    return "{" + name + "}"


# ----------------------------------------------------------------------------- registry


def random_reply(trial: Trial, rng: np.random.Generator) -> str:
    """A uniformly random valid answer (yes/no, one of 11 colours or 33 cells, a component seen)."""
    if trial.task == "object_reid":
        return _choice(rng, ["{yes}", "{no}"])
    if trial.task == "scavenger_hunt":
        if "What shape are you on" in trial.prompt:
            pair = _choice(rng, hunt.PAIRS)
            return "{" + f"{pair[0]} {pair[1]}" + "}"
        return "{" + _choice(rng, hunt.COLOURS) + "}"
    comps = read_circuit(trial.images[0])[0]
    return "{" + _choice(rng, [c[0] for c in comps] or ["C1"]) + "}"


SIMS: dict[str, dict[str, Callable[[Trial, np.random.Generator], str]]] = {
    "object_reid": {"matcher": matcher, "gist": gist, "yes": always_yes, "random": random_reply},
    "scavenger_hunt": {"chainer": chainer, "frequent": frequent, "random": random_reply},
    "circuits": {
        "tracer": tracer,
        "colourcue": colourcue,
        "nearest": nearest,
        "random": random_reply,
    },
}


def answer(sim: str, trial: Trial, rng: np.random.Generator) -> str:
    """The reply of simulated subject ``sim`` to ``trial``."""
    try:
        fn = SIMS[trial.task][sim]
    except KeyError:
        raise ValueError(
            f"no simulated subject {sim!r} for {trial.task}; have {sorted(SIMS.get(trial.task, {}))}"
        ) from None
    return fn(trial, rng)
