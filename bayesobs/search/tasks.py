"""Visual search (pop-out vs conjunction): circle sizes, 2 among 5, light priors."""

from __future__ import annotations

import math
import re
from typing import ClassVar

import numpy as np

from ..errors import BayesobsInputError
from ..stimuli.base import Stimulus, Task, box_grid, canvas, disc, segment

SIZE = 400
HALF = SIZE / 2
DIAGONAL = math.hypot(SIZE, SIZE)  # 565.69 px: the error of a refused coordinate answer
CELLS = ("1,1", "1,2", "2,1", "2,2")
ANSWERS = ("cell", "coords")
COLOURS = {"red": (220, 30, 30), "green": (20, 150, 20), "blue": (30, 30, 220)}

# circle_sizes
DISTRACTOR_RADIUS = 20.0
TARGET_RADIUS = {"small": 22.5, "medium": 25.0, "large": 30.0}
CIRCLE_GAP = 2.0
# two_among_five: seven-segment digits, 10 x 18 px, stroke 3 px, rotated at random
GLYPH_W, GLYPH_H, STROKE = 10.0, 18.0, 3.0
GLYPH_RADIUS = math.hypot(GLYPH_W / 2, GLYPH_H / 2) + STROKE / 2  # 11.8 px
DIGIT_GAP = 2.0
# light_priors: shaded discs on a mid-grey disc inside a black border
SPHERE_RADIUS = 18.0
SPHERE_GAP = 20.0  # "placed at least 20 pixels apart"
FIELD_RADIUS = 190.0
FIELD_GREY = 128.0
SHADE = 100.0  # luminance from 128 - 100 (dark side) to 128 + 100 (lit side)
LIGHT = {"top": (0.0, -1.0), "bottom": (0.0, 1.0), "left": (-1.0, 0.0), "right": (1.0, 0.0)}
OPPOSITE = {"top": "bottom", "bottom": "top", "left": "right", "right": "left"}

# seven-segment digits (x right, y down, centred): 2 and 5 are mirror images of each other
_SEGMENTS = {
    "a": ((-1, -1), (1, -1)),
    "b": ((1, -1), (1, 0)),
    "c": ((1, 0), (1, 1)),
    "d": ((-1, 1), (1, 1)),
    "e": ((-1, 0), (-1, 1)),
    "f": ((-1, -1), (-1, 0)),
    "g": ((-1, 0), (1, 0)),
}
DIGITS = {"2": "abged", "5": "afgcd"}


def cell_of(x: float, y: float) -> str:
    """The grid cell ``"i,j"`` (row, column from 1) holding point ``(x, y)``; ``"invalid"`` outside."""
    if not (0 <= x <= SIZE and 0 <= y <= SIZE):
        return "invalid"
    return f"{1 + (y >= HALF)},{1 + (x >= HALF)}"


def glyph_segments(digit: str, x: float, y: float, angle_deg: float):
    """End points of the strokes of a seven-segment ``digit`` centred at ``(x, y)``, rotated."""
    c, s = math.cos(math.radians(angle_deg)), math.sin(math.radians(angle_deg))
    out = []
    for name in DIGITS[digit]:
        pts = []
        for u, v in _SEGMENTS[name]:
            px, py = u * GLYPH_W / 2, v * GLYPH_H / 2
            pts.append((x + c * px - s * py, y + s * px + c * py))
        out.append((*pts[0], *pts[1]))
    return out


def draw_digit(img: np.ndarray, digit: str, x: float, y: float, angle: float, colour) -> None:
    """Draw ``digit`` (2 or 5) centred at ``(x, y)``, rotated by ``angle`` degrees, into ``img``."""
    strokes = np.array(glyph_segments(digit, x, y, angle))
    x0, y0, x1, y1 = (strokes[:, i, None, None] for i in range(4))
    dx, dy = x1 - x0, y1 - y0
    length2 = dx * dx + dy * dy
    if not length2.all():  # a stroke of no length: stroke by stroke
        for a, b, c, d in strokes.tolist():
            segment(img, a, b, c, d, STROKE, colour)
        return
    # one box around every stroke, every stroke's pixels at once: the pixels segment()
    # fills stroke by stroke (the same arithmetic), in one colour
    sl, xx, yy = box_grid(
        img,
        min(x0.min(), x1.min()),
        min(y0.min(), y1.min()),
        max(x0.max(), x1.max()),
        max(y0.max(), y1.max()),
        STROKE,
        sparse=True,
    )
    t = np.clip(((xx - x0) * dx + (yy - y0) * dy) / length2, 0, 1)
    px, py = x0 + t * dx, y0 + t * dy
    inked = ((xx - px) ** 2 + (yy - py) ** 2 <= (STROKE / 2) ** 2).any(axis=0)
    img[sl][inked] = colour


def place(
    rng: np.random.Generator,
    radii: np.ndarray,
    gap: float,
    field_radius: float | None = None,
    border_margin: float = 0.0,
    max_tries: int = 200,
    batch: int = 1024,
) -> np.ndarray:
    """Centres ``(n, 2)`` of discs of ``radii`` keeping at least ``gap`` px between edges."""
    radii = np.asarray(radii, float)
    n = len(radii)
    for _ in range(max_tries):
        p = np.empty((n, 2))
        for i in range(n):
            xy = _candidate(rng, p[:i], radii, i, gap, field_radius, border_margin, batch)
            if xy is None:
                break
            p[i] = xy
        else:
            return np.round(p, 2)
    raise RuntimeError(f"could not place {n} items without overlap in {max_tries} tries")


def _candidate(rng, placed, radii, i, gap, field_radius, border_margin, batch):
    """The first of up to ``batch`` uniform positions for item ``i`` that clears ``placed``."""
    r = radii[i]
    need2 = (radii[:i] + r + gap + 0.02) ** 2  # 0.02 px headroom for the rounding
    for size in (32, batch):  # a small batch usually does; a large one before giving up
        if field_radius is None:
            cand = rng.uniform(r, SIZE - r, (size, 2))
        else:
            ang = rng.uniform(0, 2 * np.pi, size)
            rad = (field_radius - r) * np.sqrt(rng.uniform(0, 1, size))
            cand = HALF + np.column_stack([rad * np.cos(ang), rad * np.sin(ang)])
        ok = np.ones(size, bool)
        if i == 0 and border_margin > 0:
            ok &= (np.abs(cand - HALF) >= border_margin).all(axis=1)
        if i:
            ok &= (((cand[:, None, :] - placed[None, :, :]) ** 2).sum(-1) >= need2).all(axis=1)
        hit = np.flatnonzero(ok)
        if len(hit):
            return cand[hit[0]]
    return None


_CELL_RE = re.compile(r"cell\s*[\(\[]?\s*(-?\d+)\s*[,;]\s*(-?\d+)\s*[\)\]]?", re.I)
_QUADRANT_RE = re.compile(r"\b(top|upper|bottom|lower)[\s-]*(left|right)\b", re.I)
_COORD_RE = re.compile(
    r"[\(\[]\s*(-?\d+(?:\.\d+)?)\s*(?:px)?\s*,\s*(-?\d+(?:\.\d+)?)\s*(?:px)?\s*[\)\]]"
)
_XY_RE = re.compile(r"x\s*[=:]\s*(-?\d+(?:\.\d+)?)\D{1,12}?y\s*[=:]\s*(-?\d+(?:\.\d+)?)", re.I)


def parse_cell(reply: str | None) -> str:
    """The cell ``"i,j"`` a reply names (first ``Cell (i,j)`` or quadrant), else ``"invalid"``."""
    if not reply:
        return "invalid"
    m = _CELL_RE.search(reply)
    if m:
        cell = f"{int(m.group(1))},{int(m.group(2))}"
        return cell if cell in CELLS else "invalid"
    q = _QUADRANT_RE.search(reply)
    if q:
        row = 1 if q.group(1).lower() in ("top", "upper") else 2
        col = 1 if q.group(2).lower() == "left" else 2
        return f"{row},{col}"
    return "invalid"


def parse_point(reply: str | None) -> tuple[float, float] | None:
    """The first ``(x, y)`` pair (or ``x = .., y = ..``) in a reply; ``None`` if there is none."""
    if not reply:
        return None
    m = _COORD_RE.search(reply) or _XY_RE.search(reply)
    return (float(m.group(1)), float(m.group(2))) if m else None


class SearchTask(Task):
    """Common machinery of the visual-search tasks (image only; answers are cells or points)."""

    modalities: ClassVar[tuple[str, ...]] = ("image",)
    paradigm: ClassVar[str] = "search"
    role = "visual search participant"
    person_task = "look at pictures of many items and tap the one that is different"
    conditions: ClassVar[tuple[str, ...]]
    default_condition: ClassVar[str]
    instruction = "Answer in exactly the format the question asks for."
    what: ClassVar[str]  # noun phrase of the target, for the questions
    person_instruction = (
        "Find the item the question describes and tap (or click) it on the picture, then press "
        "Submit."
    )
    seconds_per_answer = 6.0  # one look and one tap

    option_keys: ClassVar[tuple[str, ...]] = ("search", "answer", "border_margin")

    def _options(self, options: dict) -> tuple[str, str, float]:
        unknown = set(options) - set(self.option_keys)
        if unknown:
            raise BayesobsInputError(
                f"{self.name}: unknown option(s) {', '.join(sorted(unknown))}; "
                f"the options are {', '.join(self.option_keys)}"
            )
        search = options.get("search", self.default_condition)
        if search not in self.conditions:
            raise BayesobsInputError(
                f"{self.name}: unknown search condition {search!r}; choose from {', '.join(self.conditions)}"
            )
        answer = options.get("answer", "cell")
        if answer not in ANSWERS:
            raise BayesobsInputError(
                f"{self.name}: unknown answer mode {answer!r}; choose from {', '.join(ANSWERS)}"
            )
        margin = float(options.get("border_margin", 0.0))
        if not 0 <= margin < HALF / 2:
            raise BayesobsInputError(f"{self.name}: border_margin must be in [0, 100) px")
        return search, answer, margin

    def set_sizes(self, rng, low, high, n) -> np.ndarray:
        """``n`` distractor counts drawn uniformly from the whole numbers in ``[low, high]``."""
        lo, hi = math.ceil(low), math.floor(high)
        if lo < 0 or hi < lo:
            raise BayesobsInputError(
                f"{self.name}: the session range must hold distractor counts >= 0"
            )
        return rng.integers(lo, hi + 1, size=n)

    def question(self, answer: str, **fill) -> str:
        """The question asked with the image, for answer mode ``answer`` (``cell`` or ``coords``)."""
        raise NotImplementedError

    def generate(self, rng, low, high, n, options):
        """``n`` search displays (target first), one per drawn distractor count."""
        search, answer, margin = self._options(options)
        out = []
        for k in self.set_sizes(rng, low, high, n):
            params = self.layout(rng, int(k), search, margin, options)
            fill = params.pop("fill", {})
            x, y = params["x"][0], params["y"][0]
            params.update(search=search, answer=answer, target_cell=cell_of(x, y))
            text = self.question(answer, **fill)
            out.append(Stimulus(self.name, float(k), "", params, prompt=text))
        return out

    def layout(self, rng, k: int, search: str, margin: float, options: dict) -> dict:
        """Item positions and features of one display with ``k`` distractors."""
        raise NotImplementedError

    def tap_area(self, stim: Stimulus) -> tuple[int, int]:
        """The 400 x 400 image is tapped: a person answers a cell or a point by tapping the target."""
        return (SIZE, SIZE)

    def person_target(self, stim: Stimulus) -> str:
        """The question a person reads: what the target is and that it is tapped."""
        raise NotImplementedError

    def human_question(self, stim: Stimulus) -> str:
        """What the target is, and how it is answered (a tap; a cell answer is the quarter tapped)."""
        how = "Tap it."
        if stim.params["answer"] == "cell":
            how = "Tap it: the quarter of the picture you tap in is your answer."
        return f"{self.person_target(stim)} {how}"

    def human_answer(self, stim: Stimulus) -> str:
        """The target's quarter of the picture (cell answers) or the ringed target (points)."""
        if stim.params["answer"] == "cell":
            row, col = stim.params["target_cell"].split(",")
            where = ("top" if row == "1" else "bottom") + "-" + ("left" if col == "1" else "right")
            return f"the {where} quarter of the picture (the target is ringed in green)"
        return "the centre of the item ringed in green"

    def tap_reply(self, stim: Stimulus, x: float, y: float) -> str:
        """The reply a tap at image pixel ``(x, y)`` gives: its cell, or the point itself."""
        if stim.params["answer"] == "cell":
            return f"Cell ({cell_of(x, y)})"
        return f"({x:g}, {y:g})"

    def human_replies(self, stim: Stimulus, text: str) -> tuple[str, ...]:
        """As typed, then ``Cell (text)`` (a cell answer) or ``(text)`` (a point)."""
        bare = text.strip().strip("()")
        return (text, f"Cell ({bare})" if stim.params["answer"] == "cell" else f"({bare})")

    def record(self, stim: Stimulus, reply: str | None, truncated: bool = False) -> dict:
        """Score a reply: the named cell or point against the target, ``correct`` 1/0."""
        # the answer leads the reply ('Cell (i,j)' or '(x, y)'), so a truncated note does not matter
        p = stim.params
        tx, ty = p["x"][0], p["y"][0]
        row = {
            "set_size": int(stim.value),
            "search_condition": p["search"],
            "answer": p["answer"],
            "target_x": tx,
            "target_y": ty,
            "target_cell": p["target_cell"],
        }
        if p["answer"] == "cell":
            cell = parse_cell(reply)
            correct = int(cell == p["target_cell"])
            row.update(response_cell=cell, response_x=None, response_y=None, error_px=None)
            valid = cell != "invalid"
        else:
            pt = parse_point(reply)
            if pt is None:  # a refusal scores the image diagonal
                err, cell = DIAGONAL, "invalid"
                row.update(response_x=None, response_y=None)
            else:
                err, cell = math.hypot(pt[0] - tx, pt[1] - ty), cell_of(*pt)
                row.update(response_x=pt[0], response_y=pt[1])
            correct = int(err <= p["target_radius"])
            row.update(response_cell=cell, error_px=round(err, 4))
            valid = pt is not None
        row["correct"] = correct
        return {"response": float(correct), "valid": valid, **row}


def _cell_question(what: str, items: str, where: str | None = None) -> str:
    return (
        "The image is divided into a 2x2 grid. Each element of the grid is referred to as a cell. "
        f"{items} In which cell is {what}? In the case where {where or what} overlaps multiple "
        f"cells, please provide the cell where the centre of {where or what} is located. Please "
        "only respond with 'Cell (i,j)' where (i,j) corresponds to the ith row and jth column of "
        "the grid. The top left cell is Cell (1,1). If you are uncertain you may optionally add a "
        "note explaining that but please start your response with 'Cell (i,j)'."
    )


def _coords_question(what: str, items: str) -> str:
    return (
        "The presented image is 400x400 pixels large, and the origin (0,0) is in the top left of "
        f"the image. {items} What are the coordinates of the centre of {what}? Please give your "
        "best estimate. If you are uncertain please guess but optionally add a description to "
        "note this. However, for ease of processing please begin your response with a set of "
        "coordinates using round brackets."
    )


class CircleSizes(SearchTask):
    """One larger circle among same-coloured circles of radius 20 px (0-49 distractors)."""

    name = "circle_sizes"
    person_task = "see pictures of circles and tap the one circle that is larger than the others"
    value_range = (0.0, 49.0)  # distractors: the paper's largest display
    conditions = ("small", "medium", "large")
    default_condition = "large"

    def layout(self, rng, k, search, margin, options):
        """One larger circle among ``k`` same-coloured circles of radius 20 px."""
        r_t = TARGET_RADIUS[search]
        radii = np.array([r_t] + [DISTRACTOR_RADIUS] * k)
        xy = place(rng, radii, CIRCLE_GAP, border_margin=margin)
        colour = str(rng.choice(sorted(COLOURS)))
        return {
            "x": xy[:, 0].tolist(),
            "y": xy[:, 1].tolist(),
            "r": radii.tolist(),
            "colour": colour,
            "target_radius": r_t,
        }

    def question(self, answer, **fill):
        """Which cell holds (or where is) the larger circle."""
        items = "In the presented image there are a number of circles. One of the circles is larger than the rest."
        if answer == "cell":
            return _cell_question("the larger circle", items)
        return _coords_question("the larger circle", items)

    def person_target(self, stim):
        """One circle is larger than the others."""
        return "One of the circles is larger than all the others. Find the larger circle."

    def draw(self, stim):
        """The circles drawn on a white field."""
        img = canvas(SIZE, SIZE)
        p = stim.params
        for x, y, r in zip(p["x"], p["y"], p["r"], strict=True):
            disc(img, x, y, r, COLOURS[p["colour"]])
        return img


class TwoAmongFive(SearchTask):
    """A rotated 2 among 5s (or a 5 among 2s), 0-99 distractors, three colour conditions."""

    name = "two_among_five"
    person_task = "see pictures of the digits 2 and 5 and tap the one digit that is the odd one out"
    value_range = (0.0, 99.0)  # distractors: the paper's largest display
    conditions = ("disjunctive", "shape_conjunctive", "shape_colour_conjunctive")
    default_condition = "disjunctive"
    option_keys = ("search", "answer", "border_margin", "target")

    def layout(self, rng, k, search, margin, options):
        """One target digit among ``k`` distractor digits, rotated at random."""
        which = str(options.get("target", "either"))
        if which not in ("2", "5", "either"):
            raise BayesobsInputError(f"{self.name}: target must be '2', '5' or 'either'")
        target = str(rng.choice(["2", "5"])) if which == "either" else which
        other = "5" if target == "2" else "2"
        c_t, c_o = (str(c) for c in rng.choice(sorted(COLOURS), size=2, replace=False))
        if search == "disjunctive":  # the target's colour is unique
            digits, colours = [target] + [other] * k, [c_t] + [c_o] * k
        elif search == "shape_conjunctive":  # one colour: shape alone defines the target
            digits, colours = [target] + [other] * k, [c_t] * (k + 1)
        else:  # distractors share one feature with the target: (c_t, other) or (c_o, target)
            half = rng.random(k) < 0.5
            digits = [target] + [other if h else target for h in half]
            colours = [c_t] + [c_t if h else c_o for h in half]
        radii = np.full(k + 1, GLYPH_RADIUS)
        xy = place(rng, radii, DIGIT_GAP, border_margin=margin)
        angles = np.round(rng.uniform(0, 360, k + 1), 1)
        fill = {
            "target": target,
            "other": other,
            "colour": c_t,
            "named": search == "shape_colour_conjunctive",
        }
        return {
            "x": xy[:, 0].tolist(),
            "y": xy[:, 1].tolist(),
            "digit": digits,
            "colour": colours,
            "angle": angles.tolist(),
            "target_radius": GLYPH_RADIUS,
            "fill": fill,
        }

    def question(self, answer, target="2", other="5", colour="red", named=False):
        """Which cell holds (or where is) the target digit."""
        if named:  # shape-colour conjunction: the target must be named by colour and shape
            what = f"the {colour} '{target}'"
            items = "In the presented image there are a number of objects. There are '2's and '5's written as numerals."
        else:
            what = "the target"
            items = (
                "In the presented image there are a number of objects. Almost all of the objects "
                f"are the number {other} written as a numeral. There is a single target in the "
                "image, similarly represented by a numeral."
            )
        if answer == "cell":
            return _cell_question(what, items)
        return _coords_question(what, items)

    def person_target(self, stim):
        """The odd digit: named by colour and shape in the conjunction condition."""
        target, colour = stim.params["digit"][0], stim.params["colour"][0]
        other = "5" if target == "2" else "2"
        if stim.params["search"] == "shape_colour_conjunctive":
            return (
                f"The picture shows 2s and 5s in several colours. Find the {colour} {target} "
                "(there is only one)."
            )
        return f"All the digits are {other}s except one, which is a {target}. Find that {target}."

    def draw(self, stim):
        """The digits drawn in their colours and rotations."""
        img = canvas(SIZE, SIZE)
        p = stim.params
        for x, y, d, c, a in zip(p["x"], p["y"], p["digit"], p["colour"], p["angle"], strict=True):
            draw_digit(img, d, x, y, a, COLOURS[c])
        return img


class LightPriors(SearchTask):
    """Shaded discs lit from one direction; the target is lit from the opposite one (2-17 distractors)."""

    name = "light_priors"
    person_task = (
        "see pictures of shaded balls and tap the one ball that is lit from the other side"
    )
    value_range = (0.0, 17.0)  # distractors: the paper's largest display
    conditions = ("top", "bottom", "left", "right")
    default_condition = "top"

    def layout(self, rng, k, search, margin, options):
        """One sphere lit from ``search`` among ``k`` lit from the opposite side, in a round field."""
        radii = np.full(k + 1, SPHERE_RADIUS)
        xy = place(rng, radii, SPHERE_GAP, field_radius=FIELD_RADIUS - 12, border_margin=margin)
        light = [search] + [OPPOSITE[search]] * k
        return {
            "x": xy[:, 0].tolist(),
            "y": xy[:, 1].tolist(),
            "light": light,
            "target_radius": SPHERE_RADIUS,
        }

    def question(self, answer, **fill):
        """Which cell holds (or where is) the oddly lit sphere."""
        items = (
            "In the presented image there are a number of spheres lit from different directions. "
            "Almost all of the spheres are lit from the same direction, but one sphere is lit from "
            "the opposite direction."
        )
        if answer == "cell":
            return _cell_question(
                "this oppositely lit sphere", items, "the sphere lit from the opposite direction"
            )
        return _coords_question("the oppositely lit sphere", items)

    def person_target(self, stim):
        """One sphere is lit from the opposite side."""
        return (
            "The balls are all lit from the same side, except one, which is lit from the opposite "
            "side. Find that ball."
        )

    def draw(self, stim):
        """The shaded spheres drawn on their grey disc on black."""
        img = np.zeros((SIZE, SIZE, 3))
        disc(img, HALF, HALF, FIELD_RADIUS, (FIELD_GREY,) * 3)
        yy, xx = np.ogrid[0:SIZE, 0:SIZE]  # open grids: the same values, broadcast
        for x, y, light in zip(
            stim.params["x"], stim.params["y"], stim.params["light"], strict=True
        ):
            ux, uy = LIGHT[light]
            r = SPHERE_RADIUS
            ya, yb = int(y - r - 1), int(y + r + 2)
            xa, xb = int(x - r - 1), int(x + r + 2)
            sx, sy = xx[:, xa:xb] - x, yy[ya:yb, :] - y
            inside = sx * sx + sy * sy <= r * r
            lum = FIELD_GREY + SHADE * (sx * ux + sy * uy) / r  # brighter towards the light
            view = img[ya:yb, xa:xb]
            view[inside] = np.repeat(lum[inside][:, None], 3, axis=1)
        return img
