"""Object Re-Identification (Tunnel Vision, Sec. 3.1 and appendix A.1)."""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np
from PIL import Image, ImageDraw
from scipy import ndimage

from ..stimuli.drawing import rgb, streams
from .common import Demo, Trial, palette_labels

SIZE = 512
VARIANTS = ("standard", "unconnected", "pixel_perfect")
COLOURS = ("red", "green", "blue", "orange", "purple", "teal", "magenta", "gold")
PALETTE = {c: rgb(c) for c in COLOURS}
SHAPES = ("circle", "oval", "square", "rectangle", "triangle", "polygon", "line")
N_SHAPES = (2, 5)
SIZE_RANGE = (0.07 * SIZE, 0.2 * SIZE)
ROT_RANGE = (-math.pi, math.pi)
SCALE_RANGE = (0.3, 2.0)
TRANSLATE_PX = (15.0, 30.0)
ROTATE_DEG = (6.0, 36.0)
RESCALE = (0.10, 0.33)
P_EXTRA = 0.15
P_RESHAPE = 0.05
N_DISTRACTORS = (1, 3)
DISTRACTOR_GAP = 10.0
DISTRACTOR_GAP_OTHER = 5.0
MIN_CHANGE_PX = 40
MARGIN = 2.0
MAX_TOKENS = 30
ANSWER_FORMAT = "reid"
DEMO_SEEDS = (9101, 9102)

_TAIL = (
    " There may be extra shapes in Image 2 that are not part of the original object; as long as"
    " the object from Image 1 is present, the answer is yes even if there are other shapes present."
)
PROMPTS = {
    "standard": (
        "The first image shows an object made of connected geometric shapes, which together form"
        " an object. Does this SAME object appear in the second image? For example, if a component"
        " shape were to be rotated or translated separately from the entire composite-object, it"
        " would be a different object. Respond with {yes} or {no} (inside the curly brackets)."
        + _TAIL
    ),
    "unconnected": (
        "The first image shows an object made of geometric shapes, which together form an object."
        " Does this SAME object appear in the second image up to a rigid translation, rotation,"
        " and scale of the ENTIRE object as a whole? Respond with {yes} or {no}." + _TAIL
    ),
    "pixel_perfect": (
        "The first image shows an object made of geometric shapes, which together form an object."
        " Does this SAME object appear in the second image? For example, if a component shape were"
        " to be rotated or translated, it would be a different object. Respond with {yes} or {no}"
        " (inside the curly brackets)." + _TAIL
    ),
}
DISTRACTOR_NOTE = " Please ignore any distractor objects."
DEMO2_PREFIX = "That is correct. "
TEST_PREFIX = "Yes, that is correct. "

Shape = dict[str, Any]


def base_prompt(variant: str) -> str:
    """The variant's prompt (appendix A.1) with the distractor sentence, without prefixes."""
    _check_variant(variant)
    return PROMPTS[variant] + DISTRACTOR_NOTE


def bounding_radius(shape: Shape) -> float:
    """Radius of a circle about the shape's centre that contains it."""
    t = shape["type"]
    if t in ("circle", "polygon"):
        return shape["size"] / 2
    if t == "oval":
        return max(shape["w"], shape["h"]) / 2
    if t in ("square", "rectangle"):
        return math.hypot(shape["w"], shape["h"]) / 2
    if t == "triangle":
        return shape["size"] / math.sqrt(3)
    if t == "line":
        return math.hypot(shape["size"], line_width(shape)) / 2
    raise ValueError(f"unknown shape type {t!r}")


def line_width(shape: Shape) -> float:
    """Stroke width of a line shape: a tenth of its length, at least 2 px."""
    return max(2.0, shape["size"] / 10)


def outline(shape: Shape) -> list[tuple[float, float]]:
    """The polygon (image coordinates) that :func:`render` fills for ``shape``."""
    t, x, y, a = shape["type"], shape["x"], shape["y"], shape["angle"]
    if t in ("circle", "oval"):
        rx, ry = (shape["size"] / 2,) * 2 if t == "circle" else (shape["w"] / 2, shape["h"] / 2)
        u = np.linspace(0, 2 * np.pi, 96, endpoint=False)
        pts = np.column_stack([rx * np.cos(u), ry * np.sin(u)])
    elif t in ("square", "rectangle", "line"):
        w, h = (shape["size"], line_width(shape)) if t == "line" else (shape["w"], shape["h"])
        pts = np.array([[-w / 2, -h / 2], [w / 2, -h / 2], [w / 2, h / 2], [-w / 2, h / 2]])
    elif t == "triangle":
        s = shape["size"]
        ht = s * math.sqrt(3) / 2
        pts = np.array([[0, -2 * ht / 3], [-s / 2, ht / 3], [s / 2, ht / 3]])
    elif t == "polygon":
        u = 2 * np.pi * np.arange(shape["n"]) / shape["n"]
        pts = shape["size"] / 2 * np.column_stack([np.cos(u), np.sin(u)])
    else:
        raise ValueError(f"unknown shape type {t!r}")
    c, s_ = math.cos(a), math.sin(a)
    rot = pts @ np.array([[c, s_], [-s_, c]])
    return [(float(x + px), float(y + py)) for px, py in rot]


def render(shapes: list[Shape], size: int = SIZE) -> Image.Image:
    """Draw ``shapes`` (in list order, later on top) crisp on a white square image."""
    img = Image.new("RGB", (size, size), "white")
    draw = ImageDraw.Draw(img)
    for shape in shapes:
        draw.polygon(outline(shape), fill=PALETTE[shape["colour"]])
    return img


def render_labels(shapes: list[Shape], size: int = SIZE) -> np.ndarray:
    """The palette index map of :func:`render` drawn directly (same polygons, one byte a pixel)."""
    img = Image.new("L", (size, size), 0)
    draw = ImageDraw.Draw(img)
    for shape in shapes:
        draw.polygon(outline(shape), fill=COLOURS.index(shape["colour"]) + 1)
    return np.asarray(img)


def labels(img: Image.Image) -> np.ndarray:
    """Palette index map of a re-identification image (0 white, k + 1 for colour ``COLOURS[k]``)."""
    return palette_labels(np.asarray(img), PALETTE)


def random_shape(
    rng: np.random.Generator, kind: str | None = None, colour: str | None = None
) -> Shape:
    """One random shape at the origin (type, colour, size, angle as the paper's generator)."""
    t = kind or str(rng.choice(SHAPES))
    shape: Shape = {
        "type": t,
        "colour": colour or str(rng.choice(COLOURS)),
        "x": 0.0,
        "y": 0.0,
        "angle": 0.0 if t == "circle" else float(rng.uniform(0, 2 * math.pi)),
    }
    base = float(rng.uniform(*SIZE_RANGE))
    if t in ("square", "rectangle", "oval"):
        shape["w"] = base
        shape["h"] = base if t == "square" else base * float(rng.uniform(0.6, 1.4))
    else:
        shape["size"] = base
        if t == "polygon":
            shape["n"] = int(rng.integers(5, 9))
    return shape


def transform(
    shapes: list[Shape], angle: float, scale: float, centre: float = SIZE / 2
) -> list[Shape]:
    """Rotate by ``angle`` (rad) and scale about ``(centre, centre)``: positions, angles and sizes."""
    c, s = math.cos(angle), math.sin(angle)
    out = []
    for sh in shapes:
        dx, dy = sh["x"] - centre, sh["y"] - centre
        new = dict(sh)
        new["x"] = centre + scale * (c * dx - s * dy)
        new["y"] = centre + scale * (s * dx + c * dy)
        new["angle"] = sh["angle"] + angle
        for key in ("w", "h", "size"):
            if key in sh:
                new[key] = sh[key] * scale
        out.append(new)
    return out


def fits(shapes: list[Shape], size: int = SIZE) -> bool:
    """Whether every shape's bounding circle lies inside the image (with a 2 px margin)."""
    for sh in shapes:
        r = bounding_radius(sh) + MARGIN
        if not (r <= sh["x"] <= size - r and r <= sh["y"] <= size - r):
            return False
    return True


def n_blobs(mask: np.ndarray) -> int:
    """Number of 8-connected components of a boolean mask."""
    return int(ndimage.label(mask, structure=np.ones((3, 3)))[1])


def _object(rng: np.random.Generator) -> list[Shape]:
    n = int(rng.integers(N_SHAPES[0], N_SHAPES[1] + 1))
    shapes = [random_shape(rng) for _ in range(n)]
    radii = [bounding_radius(s) for s in shapes]
    pos = [(0.0, 0.0)]
    for i in range(1, n):
        for _ in range(100):
            j = int(rng.integers(i))
            d = radii[i] + radii[j] - rng.uniform(0, 0.1 * min(radii[i], radii[j]))
            u = rng.uniform(0, 2 * math.pi)
            p = (pos[j][0] + d * math.cos(u), pos[j][1] + d * math.sin(u))
            if all(
                math.dist(p, pos[k]) >= 0.75 * (radii[i] + radii[k]) for k in range(i) if k != j
            ):
                break
        pos.append(p)
    xs = [p[0] for p in pos]
    ys = [p[1] for p in pos]
    lo_x = min(x - r for x, r in zip(xs, radii, strict=True))
    hi_x = max(x + r for x, r in zip(xs, radii, strict=True))
    lo_y = min(y - r for y, r in zip(ys, radii, strict=True))
    hi_y = max(y + r for y, r in zip(ys, radii, strict=True))
    cx, cy = (lo_x + hi_x) / 2, (lo_y + hi_y) / 2
    for sh, (x, y) in zip(shapes, pos, strict=True):
        sh["x"] = SIZE / 2 + x - cx
        sh["y"] = SIZE / 2 + y - cy
    return shapes


def _connected(shapes: list[Shape]) -> bool:
    """Whether the drawn shapes form one 8-connected blob (drawn in a crop: integer shift, same pixels)."""
    x0 = math.floor(min(s["x"] - bounding_radius(s) for s in shapes)) - 2
    y0 = math.floor(min(s["y"] - bounding_radius(s) for s in shapes)) - 2
    x1 = math.ceil(max(s["x"] + bounding_radius(s) for s in shapes)) + 2
    y1 = math.ceil(max(s["y"] + bounding_radius(s) for s in shapes)) + 2
    img = Image.new("L", (x1 - x0, y1 - y0), 0)
    draw = ImageDraw.Draw(img)
    for sh in shapes:
        draw.polygon([(x - x0, y - y0) for x, y in outline(sh)], fill=1)
    return n_blobs(np.asarray(img) > 0) == 1


def _jitter(rng: np.random.Generator, shapes: list[Shape]) -> tuple[list[Shape], list[dict]]:
    """Alter 1-2 shapes (image-2 frame); returns the new list and what changed."""
    out = [dict(s) for s in shapes]
    k = int(rng.integers(1, min(2, len(out)) + 1))
    idx = sorted(int(i) for i in rng.choice(len(out), size=k, replace=False))
    changes = []
    for i in idx:
        sh = out[i]
        options = (
            ["translate", "scale"] if sh["type"] == "circle" else ["translate", "rotate", "scale"]
        )
        chosen = {str(rng.choice(options))}
        for op in options:
            if op not in chosen and rng.random() < P_EXTRA:
                chosen.add(op)
        reshape = rng.random() < P_RESHAPE
        ops = [op for op in ("translate", "rotate", "scale") if op in chosen]
        if "translate" in chosen:
            d, u = rng.uniform(*TRANSLATE_PX), rng.uniform(0, 2 * math.pi)
            sh["x"] += d * math.cos(u)
            sh["y"] += d * math.sin(u)
        if "rotate" in chosen:
            sh["angle"] += math.radians(rng.uniform(*ROTATE_DEG)) * (
                1 if rng.random() < 0.5 else -1
            )
        if "scale" in chosen:
            f = rng.uniform(*RESCALE)
            f = 1 + f if rng.random() < 0.5 else 1 - f
            for key in ("w", "h", "size"):
                if key in sh:
                    sh[key] *= f
        if reshape:
            r = bounding_radius(sh)
            kind = str(rng.choice([t for t in SHAPES if t != sh["type"]]))
            new = random_shape(rng, kind, sh["colour"])
            scale = r / bounding_radius(new)
            for key in ("w", "h", "size"):
                if key in new:
                    new[key] *= scale
            new.update(x=sh["x"], y=sh["y"], angle=0.0 if kind == "circle" else sh["angle"])
            out[i] = sh = new
            ops.append("reshape")
        changes.append({"index": i, "type": shapes[i]["type"], "colour": sh["colour"], "ops": ops})
    return out, changes


def _visible_change(a: list[Shape], b: list[Shape]) -> int:
    diff = render_labels(a) != render_labels(b)
    return int(ndimage.binary_opening(diff, structure=np.ones((3, 3))).sum())


def _distractors(rng: np.random.Generator, occupied: np.ndarray) -> list[Shape]:
    dist_obj = ndimage.distance_transform_edt(~occupied)
    placed: list[Shape] = []
    placed_mask = np.zeros_like(occupied)
    n = int(rng.integers(N_DISTRACTORS[0], N_DISTRACTORS[1] + 1))
    for _ in range(n):
        sh = random_shape(rng)
        r = bounding_radius(sh) + MARGIN
        dist_other = ndimage.distance_transform_edt(~placed_mask) if placed else None
        for _try in range(100):
            sh["x"], sh["y"] = (float(v) for v in rng.uniform(r, SIZE - r, 2))
            mask = render_labels([sh]) > 0
            if dist_obj[mask].min() < DISTRACTOR_GAP:
                continue
            if dist_other is not None and dist_other[mask].min() < DISTRACTOR_GAP_OTHER:
                continue
            placed.append(sh)
            placed_mask |= mask
            break
    return placed


def make_trial(
    variant: str,
    rng_or_seed: int | np.random.Generator,
    positive: bool | None = None,
    with_demos: bool = True,
) -> Trial:
    """Generate one Object Re-Identification trial."""
    _check_variant(variant)
    r_obj, r_tf, r_jit, r_dis, r_cls = streams(rng_or_seed, 5)
    if positive is None:
        positive = bool(r_cls.random() < 0.5)
    connected = variant == "standard"
    for _attempt in range(2000):
        shapes1 = _object(r_obj)
        if not fits(shapes1) or (connected and not _connected(shapes1)):
            continue
        angle, scale = 0.0, 1.0
        pos2 = shapes1
        if variant != "pixel_perfect":
            for _ in range(100):
                angle, scale = float(r_tf.uniform(*ROT_RANGE)), float(r_tf.uniform(*SCALE_RANGE))
                cand = transform(shapes1, angle, scale)
                if fits(cand) and (not connected or _connected(cand)):
                    pos2 = cand
                    break
            else:
                continue
        for _ in range(50):
            neg2, changes = _jitter(r_jit, pos2)
            if not fits(neg2) or (connected and not _connected(neg2)):
                continue
            change_px = _visible_change(pos2, neg2)
            if change_px >= MIN_CHANGE_PX:
                break
        else:
            continue
        break
    else:  # pragma: no cover - the loops above succeed in a few attempts
        raise RuntimeError("could not generate an object re-identification trial")
    occupied = (render_labels(pos2) > 0) | (render_labels(neg2) > 0)
    distractors = _distractors(r_dis, occupied)
    obj2 = pos2 if positive else neg2
    img1 = render(shapes1)
    img2 = render(obj2 + distractors)
    meta = {
        "variant": variant,
        "n_shapes": len(shapes1),
        "positive": positive,
        "changed": [] if positive else changes,
        "n_changed": 0 if positive else len(changes),
        "rotation_deg": math.degrees(angle),
        "scale": scale,
        "n_distractors": len(distractors),
        "change_px": change_px,
        "shapes1": shapes1,
        "shapes2": obj2,
        "distractors": distractors,
    }
    prompt = base_prompt(variant)
    return Trial(
        task="object_reid",
        variant=variant,
        images=(img1, img2),
        prompt=(TEST_PREFIX + prompt) if with_demos else prompt,
        demos=demos(variant) if with_demos else (),
        answer="yes" if positive else "no",
        answer_format=ANSWER_FORMAT,
        max_tokens=MAX_TOKENS,
        meta=meta,
    )


@lru_cache(maxsize=8)
def demos(variant: str) -> tuple[Demo, Demo]:
    """The two fixed demonstrations: a positive answered ``{yes}``, then a negative ``{no}``."""
    prompt = base_prompt(variant)
    yes = make_trial(variant, DEMO_SEEDS[0], positive=True, with_demos=False)
    no = make_trial(variant, DEMO_SEEDS[1], positive=False, with_demos=False)
    return (
        Demo(prompt, yes.images, "{yes}"),
        Demo(DEMO2_PREFIX + prompt, no.images, "{no}"),
    )


def _check_variant(variant: str) -> None:
    if variant not in VARIANTS:
        raise ValueError(f"unknown object_reid variant {variant!r}; expected one of {VARIANTS}")
