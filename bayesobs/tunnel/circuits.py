"""Circuit Connections (Tunnel Vision, Sec. 3.3 and appendix A.3)."""

from __future__ import annotations

import itertools
import math
from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw

from ..stimuli.drawing import draw_centred_text, draw_left_text, rgb, streams
from .common import Demo, Trial

W, H = 800, 600
BB_W, BB_H = 200, 320
BB_LEFT, BB_TOP = (W - BB_W) // 2, (H - BB_H) // 2
BB_FILL = "#e0e0e0"
PORT_RADIUS = 10
COMP_W, COMP_H = 100, 60
EDGE_MARGIN = 20
N_COMPONENTS = (4, 10)
N_PORTS = (1, 3)
N_WIRES = (7, 15)
N_CLUTTER = (0, 6)
WIRE_WIDTH = 4
BEND_CLEAR = 10.0
PARALLEL_CLEAR = 12.0
PORT_CLEAR = PORT_RADIUS + 4.0
MIN_SEGMENT = 24.0
COLOUR_MODES = ("standard", "single", "unique")
WIRE_COLOURS = ("red", "orange", "yellow", "green", "blue", "purple")
EXTRA_COLOURS = (
    "#FF1493",
    "#00FFFF",
    "#FFD700",
    "#ADFF2F",
    "#FF00FF",
    "#1E90FF",
    "#D2691E",
    "#8A2BE2",
    "#00FA9A",
    "#DC143C",
    "#7FFF00",
    "#BDB76B",
    "#FF8C00",
    "#48D1CC",
    "#C71585",
    "#7CFC00",
    "#BA55D3",
    "#20B2AA",
)
UNIQUE_COLOURS = WIRE_COLOURS + EXTRA_COLOURS
COMPONENT_FILLS = (
    "#ffd0d0",
    "#d0ffd0",
    "#d0d0ff",
    "#fff0d0",
    "#d0f0ff",
    "#f0d0ff",
    "#e0ffe0",
    "#ffe0ff",
)
LABEL_SIZE = 14
NUMBER_SIZE = 12
MAX_TOKENS = 150
DEMO_SEEDS = (9301, 9302)
PROMPT = (
    "Which component does the wire from port {port} on the breadboard, which is the gray rectangle"
    " with numbered ports, connect to? A wire is a series of connected, same colored lines that go"
    " from the center of a port, represented on the screen as a white circle, to another port. Each"
    " wire only connects two ports, one at either end. A wire will NEVER turn at the same spot that"
    " it intersects another wire, and wires do not change colors. Answer with the component label"
    " in curly braces, e.g {{C0}}."
)

Point = tuple[float, float]


def breadboard_ports() -> list[tuple[int, int]]:
    """Centres of breadboard ports 1..10 (index 0 is port 1)."""
    xs = (BB_LEFT + BB_W * 0.25, BB_LEFT + BB_W * 0.75)
    step = BB_H / 6
    return [(int(x), int(BB_TOP + step * (i + 1))) for x in xs for i in range(5)]


def prompt(port: int) -> str:
    """The test prompt (appendix A.3) for breadboard port ``port``."""
    return PROMPT.format(port=port)


def segments(path: list[Point]) -> list[tuple[Point, Point]]:
    """Consecutive segments of a polyline."""
    return list(itertools.pairwise(path))


def _orient(a: Point, b: Point, c: Point) -> float:
    return (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])


def segments_cross(s: tuple[Point, Point], t: tuple[Point, Point]) -> bool:
    """Whether two segments properly intersect (cross at one interior point of both)."""
    (p, q), (r, u) = s, t
    return _orient(p, q, r) * _orient(p, q, u) < 0 and _orient(r, u, p) * _orient(r, u, q) < 0


def count_crossings(path: list[Point], others: list[list[Point]]) -> int:
    """Proper intersections between the segments of ``path`` and of every path in ``others``."""
    return sum(
        segments_cross(s, t) for other in others for s in segments(path) for t in segments(other)
    )


def path_length(path: list[Point]) -> float:
    """Euclidean length of a polyline."""
    return float(sum(math.dist(a, b) for a, b in segments(path)))


def point_segment_distance(p: Point, s: tuple[Point, Point]) -> float:
    """Distance from point ``p`` to segment ``s``."""
    (ax, ay), (bx, by) = s
    dx, dy = bx - ax, by - ay
    n2 = dx * dx + dy * dy
    t = 0.0 if n2 == 0 else max(0.0, min(1.0, ((p[0] - ax) * dx + (p[1] - ay) * dy) / n2))
    return math.hypot(p[0] - ax - t * dx, p[1] - ay - t * dy)


def diagonal_routes(p0: Point, p1: Point) -> list[list[Point]]:
    """The two-segment +-45 degree routes from ``p0`` to ``p1`` (one segment if already diagonal)."""
    routes = []
    for s in (1.0, -1.0):
        x = (p0[0] + p1[0]) / 2 + (p1[1] - p0[1]) / (2 * s)
        y = p0[1] + s * (x - p0[0])
        mid = (round(x, 2), round(y, 2))
        if math.dist(mid, p0) < 1 or math.dist(mid, p1) < 1:
            routes.append([p0, p1])
        else:
            routes.append([p0, mid, p1])
    return routes


def _samples(path: list[Point], step: float = 2.0) -> np.ndarray:
    pts = []
    for a, b in segments(path):
        n = max(2, int(math.dist(a, b) / step) + 1)
        t = np.linspace(0, 1, n)[:, None]
        pts.append(np.asarray(a) * (1 - t) + np.asarray(b) * t)
    return np.vstack(pts)


def route_ok(
    path: list[Point],
    wires: list[list[Point]],
    ports: list[Point],
    boxes: list[tuple[int, int, int, int]],
) -> bool:
    """Whether a candidate route keeps the diagram unambiguous (see the module docstring)."""
    for x, y in path[1:-1]:
        if not (8 <= x <= W - 8 and 8 <= y <= H - 8):
            return False
    if len(path) > 2 and min(path_length([a, b]) for a, b in segments(path)) < MIN_SEGMENT:
        return False
    ends = (path[0], path[-1])
    pts = _samples(path)
    for port in ports:
        if min(math.dist(port, e) for e in ends) < 1:
            continue
        if np.min(np.hypot(pts[:, 0] - port[0], pts[:, 1] - port[1])) < PORT_CLEAR:
            return False
    for l_, t_, r_, b_ in boxes:
        inside = (
            (pts[:, 0] > l_ + 2)
            & (pts[:, 0] < r_ - 2)
            & (pts[:, 1] > t_ + 2)
            & (pts[:, 1] < b_ - 2)
        )
        if inside.any():
            return False
    new_segs = segments(path)
    for other in wires:
        old_segs = segments(other)
        for bend in path[1:-1]:
            if any(point_segment_distance(bend, s) < BEND_CLEAR for s in old_segs):
                return False
        for bend in other[1:-1]:
            if any(point_segment_distance(bend, s) < BEND_CLEAR for s in new_segs):
                return False
        for s in new_segs:
            for t in old_segs:
                if _runs_along(s, t):
                    return False
    return True


def _runs_along(s: tuple[Point, Point], t: tuple[Point, Point]) -> bool:
    (ax, ay), (bx, by) = s
    (cx, cy), (dx, dy) = t
    u = np.array([bx - ax, by - ay], float)
    v = np.array([dx - cx, dy - cy], float)
    nu, nv = np.linalg.norm(u), np.linalg.norm(v)
    if nu == 0 or nv == 0 or abs(u @ v) / (nu * nv) < 0.999:
        return False
    e = u / nu
    normal = np.array([-e[1], e[0]])
    if abs((np.array([cx - ax, cy - ay])) @ normal) >= PARALLEL_CLEAR:
        return False
    lo, hi = sorted(((cx - ax) * e[0] + (cy - ay) * e[1], (dx - ax) * e[0] + (dy - ay) * e[1]))
    return hi > 0 and lo < nu


def _place_components(rng: np.random.Generator, n: int) -> list[dict]:
    comps: list[dict] = []
    for i in range(n):
        for _ in range(500):
            side = str(rng.choice(("left", "right", "top", "bottom")))
            if side in ("left", "right"):
                left = EDGE_MARGIN if side == "left" else W - COMP_W - EDGE_MARGIN
                top = int(rng.integers(EDGE_MARGIN, H - COMP_H - EDGE_MARGIN + 1))
            else:
                left = int(rng.integers(EDGE_MARGIN, W - COMP_W - EDGE_MARGIN + 1))
                top = EDGE_MARGIN if side == "top" else H - COMP_H - EDGE_MARGIN
            box = (left, top, left + COMP_W, top + COMP_H)
            pad = 2 * PORT_RADIUS + 4
            if all(
                box[2] + pad < c["bbox"][0]
                or box[0] > c["bbox"][2] + pad
                or box[3] + pad < c["bbox"][1]
                or box[1] > c["bbox"][3] + pad
                for c in comps
            ):
                break
        else:
            return comps
        n_ports = int(rng.integers(N_PORTS[0], N_PORTS[1] + 1))
        face = {"left": "right", "right": "left", "top": "bottom", "bottom": "top"}[side]
        l_, t_, r_, b_ = box
        if face in ("left", "right"):
            x = l_ if face == "left" else r_
            ports = [(int(x), int(y)) for y in np.linspace(t_ + 10, b_ - 10, n_ports)]
        else:
            y = t_ if face == "top" else b_
            ports = [(int(x), int(y)) for x in np.linspace(l_ + 10, r_ - 10, n_ports)]
        if n_ports == 1:
            ports = (
                [((l_ + r_) // 2, ports[0][1])]
                if face in ("top", "bottom")
                else [(ports[0][0], (t_ + b_) // 2)]
            )
        comps.append(
            {
                "label": f"C{i + 1}",
                "bbox": box,
                "side": side,
                "ports": ports,
                "fill": str(rng.choice(COMPONENT_FILLS)),
            }
        )
    return comps


def render(bb_ports: list[tuple[int, int]], comps: list[dict], wires: list[dict]) -> Image.Image:
    """Draw breadboard, components, wires (in order) and the port numbers on top."""
    img = Image.new("RGB", (W, H), "white")
    draw = ImageDraw.Draw(img)
    draw.rectangle(
        [BB_LEFT, BB_TOP, BB_LEFT + BB_W, BB_TOP + BB_H], fill=BB_FILL, outline="black", width=2
    )
    r = PORT_RADIUS
    for x, y in bb_ports:
        draw.ellipse([x - r, y - r, x + r, y + r], fill="white", outline="black", width=2)
    for c in comps:
        l_, t_, r_, b_ = c["bbox"]
        draw.rectangle(c["bbox"], fill=c["fill"], outline="black", width=2)
        draw_centred_text(draw, ((l_ + r_) / 2, (t_ + b_) / 2), c["label"], LABEL_SIZE)
        for x, y in c["ports"]:
            draw.ellipse([x - r, y - r, x + r, y + r], fill="white", outline="black", width=2)
    for w in wires:
        draw.line(
            [tuple(p) for p in w["path"]], fill=rgb(w["colour"]), width=WIRE_WIDTH, joint="curve"
        )
    for k, (x, y) in enumerate(bb_ports, start=1):
        draw_left_text(draw, (x + r + 4, y), str(k), NUMBER_SIZE)
    return img


def make_trial(
    variant: str, rng_or_seed: int | np.random.Generator, with_demos: bool = True
) -> Trial:
    """Generate one Circuit Connections trial."""
    if variant not in COLOUR_MODES:
        raise ValueError(
            f"unknown circuits colour mode {variant!r}; expected one of {COLOUR_MODES}"
        )
    r_comp, r_wire, r_col, r_query = streams(rng_or_seed, 4)
    bb_ports = breadboard_ports()
    for _attempt in range(100):
        comps = _place_components(
            r_comp, int(r_comp.integers(N_COMPONENTS[0], N_COMPONENTS[1] + 1))
        )
        if len(comps) >= N_COMPONENTS[0]:
            wires = _route_wires(r_wire, bb_ports, comps)
            if any(w["kind"] == "breadboard" for w in wires):
                break
    else:  # pragma: no cover
        raise RuntimeError("could not generate a circuit")
    if variant == "single":
        colours = [str(r_col.choice(WIRE_COLOURS))] * len(wires)
    elif variant == "unique":
        colours = [UNIQUE_COLOURS[i] for i in r_col.permutation(len(UNIQUE_COLOURS))[: len(wires)]]
    else:
        colours = [str(c) for c in r_col.choice(WIRE_COLOURS, size=len(wires))]
    for w, c in zip(wires, colours, strict=True):
        w["colour"] = c
    img = render(bb_ports, comps, wires)
    bb_wires = [w for w in wires if w["kind"] == "breadboard"]
    q = bb_wires[int(r_query.integers(len(bb_wires)))]
    qi = wires.index(q)
    others = [w["path"] for w in wires if w is not q]
    meta = {
        "colour_mode": variant,
        "query_port": q["port"],
        "component": q["component"],
        "distance_px": math.dist(q["path"][0], q["path"][-1]),
        "path_length": path_length(q["path"]),
        "crossings": count_crossings(q["path"], others),
        "crossings_earlier": count_crossings(q["path"], [w["path"] for w in wires[:qi]]),
        "wire_colour": q["colour"],
        "n_components": len(comps),
        "n_wires": len(bb_wires),
        "n_clutter": len(wires) - len(bb_wires),
        "wires": wires,
        "components": comps,
        "bb_ports": bb_ports,
    }
    return Trial(
        task="circuits",
        variant=variant,
        images=(img,),
        prompt=prompt(q["port"]),
        demos=demos(variant) if with_demos else (),
        answer=q["component"],
        answer_format="circuit",
        max_tokens=MAX_TOKENS,
        meta=meta,
    )


def _route_wires(
    rng: np.random.Generator, bb_ports: list[tuple[int, int]], comps: list[dict]
) -> list[dict]:
    all_ports: list[Point] = [tuple(map(float, p)) for p in bb_ports]
    for c in comps:
        all_ports += [tuple(map(float, p)) for p in c["ports"]]
    boxes = [c["bbox"] for c in comps]
    free = {(c["label"], tuple(p)) for c in comps for p in c["ports"]}
    n_target = min(int(rng.integers(N_WIRES[0], N_WIRES[1] + 1)), 10, len(free))
    wires: list[dict] = []
    paths: list[list[Point]] = []
    for port_no in rng.permutation(10) + 1:
        if len(wires) >= n_target:
            break
        p0 = tuple(map(float, bb_ports[port_no - 1]))
        done = False
        for ci in rng.permutation(len(comps)):
            c = comps[ci]
            options = [p for p in c["ports"] if (c["label"], tuple(p)) in free]
            rng.shuffle(options)
            for p1 in options:
                routes = diagonal_routes(p0, tuple(map(float, p1)))
                for k in rng.permutation(len(routes)):
                    if route_ok(routes[k], paths, all_ports, boxes):
                        free.discard((c["label"], tuple(p1)))
                        paths.append(routes[k])
                        wires.append(
                            {
                                "kind": "breadboard",
                                "port": int(port_no),
                                "component": c["label"],
                                "path": routes[k],
                            }
                        )
                        done = True
                        break
                if done:
                    break
            if done:
                break
    n_clutter = int(rng.integers(N_CLUTTER[0], N_CLUTTER[1] + 1))
    placed = 0
    for _ in range(5 * n_clutter):
        if placed >= n_clutter:
            break
        avail = sorted(free)
        if len(avail) < 2:
            break
        a = avail[int(rng.integers(len(avail)))]
        bs = [p for p in avail if p[0] != a[0]]
        if not bs:
            continue
        b = bs[int(rng.integers(len(bs)))]
        for route in diagonal_routes(tuple(map(float, a[1])), tuple(map(float, b[1]))):
            if route_ok(route, paths, all_ports, boxes):
                free.discard(a)
                free.discard(b)
                paths.append(route)
                wires.append(
                    {"kind": "clutter", "port": None, "component": f"{a[0]}-{b[0]}", "path": route}
                )
                placed += 1
                break
    return wires


@lru_cache(maxsize=4)
def demos(variant: str) -> tuple[Demo, Demo]:
    """The two fixed demonstrations of a colour mode, each with its worked answer."""
    out = []
    for seed in DEMO_SEEDS:
        t = make_trial(variant, seed, with_demos=False)
        out.append(
            Demo(
                t.prompt,
                t.images,
                f"After following the wire, it connects to {t.answer}. {{{t.answer}}}",
            )
        )
    return tuple(out)
