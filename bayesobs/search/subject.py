"""Simulated visual searchers that look at the rendered image."""

from __future__ import annotations

import re
from functools import lru_cache
from statistics import NormalDist

import numpy as np
from scipy import ndimage

from ..chat import FatalSubjectError, Reply, Request
from ..search.tasks import CELLS, COLOURS, SIZE, cell_of, draw_digit
from ..seeds import stable_rng
from ..stimuli import from_png
from ..stimuli.base import channel_mean

SEARCH_KINDS = ("parallel", "serial", "graded", "steep", "random")
SEARCH_TASKS = ("circle_sizes", "two_among_five", "light_priors")
CAPACITY = 8
LAPSE = 0.05
# sim:graded and sim:steep find the target with probability Phi((THRESHOLD - distractors) / SD):
# searchers of known psychometric function (a normal one, psignifit's threshold 24 and width
# 2 * 1.645 * SD), a broad one (SD 6: its transition is two fifths of 0-49) and a steep one
GRADED_THRESHOLD = 24.0
GRADED_SD = {"graded": 6.0, "steep": 2.0}
POINT_SD = 4.0  # px: localisation noise of a coordinate answer
_PATCH = 13  # half-width of the digit templates (27 x 27 px)
_COLOUR_NAMES = sorted(COLOURS)


@lru_cache(maxsize=1)
def _templates() -> np.ndarray:
    """Unit-norm, zero-mean ink templates of 2 and 5 at every 5 degrees: ``(2, 72, 27*27)``."""
    size = 2 * _PATCH + 1
    out = np.empty((2, 72, size * size))
    for d, digit in enumerate("25"):
        for a in range(72):
            img = np.zeros((size, size, 3))
            draw_digit(img, digit, _PATCH, _PATCH, 5.0 * a, (1.0, 1.0, 1.0))
            t = img[..., 0].ravel()
            t = t - t.mean()
            out[d, a] = t / np.linalg.norm(t)
    return out


def channel_max(img: np.ndarray) -> np.ndarray:
    """The largest of the three channels per pixel: ``img.max(axis=2)``, faster."""
    return np.maximum(np.maximum(img[..., 0], img[..., 1]), img[..., 2])


def fill_holes(mask: np.ndarray) -> np.ndarray:
    """``mask`` with its holes filled: ``scipy.ndimage.binary_fill_holes``, by labelling."""
    gaps, n = ndimage.label(~mask)
    outside = np.zeros(n + 1, bool)
    outside[np.concatenate([gaps[0], gaps[-1], gaps[:, 0], gaps[:, -1]])] = True
    outside[0] = False  # label 0: the mask itself
    return ~outside[gaps]


_LUM = np.arange(3 * 255 + 1) / 3.0  # the mean of three 8-bit channels, by their sum


def contrast(img: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Luminance and contrast with the background of an image (the first step of :func:`segment_items`)."""
    if img.dtype != np.uint8:
        img = np.asarray(img, dtype=float)
        lum = channel_mean(img)
        hist = np.bincount(np.clip(lum, 0, 255).astype(int).ravel(), minlength=256)
        bg_lum = int(np.argmax(hist))  # the commonest luminance is the background
        bg = img[np.abs(lum - bg_lum) < 1].mean(axis=0)
        return lum, channel_max(np.abs(img - bg))
    total = np.add(img[..., 0], img[..., 1], dtype=np.uint16)
    total += img[..., 2]
    lum = _LUM[total]
    bg_lum = int(np.argmax(np.bincount((total // 3).ravel(), minlength=256)))
    # |lum - bg_lum| < 1 in whole sums: |total - 3 bg_lum| <= 2
    near = (np.abs(np.arange(3 * 255 + 1) - 3 * bg_lum) <= 2)[total]
    sums = [np.sum(img[..., c], where=near, dtype=np.int64) for c in range(3)]  # exact
    bg = np.array(sums) / np.count_nonzero(near)
    values = np.arange(256.0)
    ink = np.abs(values - bg[0])[img[..., 0]]
    np.maximum(ink, np.abs(values - bg[1])[img[..., 1]], out=ink)
    np.maximum(ink, np.abs(values - bg[2])[img[..., 2]], out=ink)
    return lum, ink


def segment_items(img: np.ndarray, shading: bool = False) -> dict[str, np.ndarray]:
    """Items of a search image and their features."""
    img = np.asarray(img)
    lum, ink = contrast(img)
    mask = ink > 40
    if shading:
        mask |= ndimage.gaussian_gradient_magnitude(lum, 1.0) > 1.5
    labels, n = ndimage.label(mask)
    idx = np.arange(1, n + 1)
    area = np.bincount(labels.ravel(), minlength=n + 1)[1:]
    edge = np.isin(idx, np.concatenate([labels[0], labels[-1], labels[:, 0], labels[:, -1]]))
    frame = edge & (area > 8 * np.median(area)) if n else edge
    drop = np.zeros(n + 1, bool)
    drop[idx[frame]] = True
    mask = fill_holes(mask & ~drop[labels])
    labels, n = ndimage.label(mask)
    w = lum.shape[1]
    # per-item sums over the labelled pixels only, in pixel order: the background (label 0)
    # is never read, and each item's sum adds the same terms in the same order as over all pixels
    at = np.flatnonzero(labels)
    lab = labels.ravel()[at]
    yy, xx = np.divmod(at, w)

    def per_item(v):  # sums over each labelled region
        return np.bincount(lab, weights=v, minlength=n + 1)[1:]

    area = np.bincount(lab, minlength=n + 1)[1:].astype(float)
    keep = area >= 20  # specks
    if not keep.any():
        return {
            "x": np.empty(0),
            "y": np.empty(0),
            "area": np.empty(0),
            "colour": np.empty((0, 3)),
            "light": np.empty((0, 2)),
            "ink": ink,
        }
    L = lum.ravel()[at]
    cx, cy = per_item(xx) / area, per_item(yy) / area
    rgb = img.reshape(-1, 3)[at].astype(float)
    colour = np.column_stack([per_item(rgb[:, c]) for c in range(3)]) / area[:, None]
    # the luminance-weighted offset from the centroid points to the lit side
    sl = per_item(L)
    lx = per_item(L * xx) - cx * sl
    ly = per_item(L * yy) - cy * sl
    norm = np.hypot(lx, ly)
    light = np.column_stack([lx, ly]) / np.where(norm > 0, norm, 1.0)[:, None]
    return {
        "x": cx[keep],
        "y": cy[keep],
        "area": area[keep],
        "colour": colour[keep],
        "light": light[keep],
        "ink": ink,
    }


def digit_evidence(ink: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per item, best match to a rotated 2 minus best match to a rotated 5 (correlations)."""
    templates = _templates()
    pad = np.pad(ink / max(float(ink.max()), 1e-9), _PATCH + 1)
    patches = []
    for cx, cy in zip(np.rint(x).astype(int), np.rint(y).astype(int), strict=True):
        p = pad[cy + 1 : cy + 2 * _PATCH + 2, cx + 1 : cx + 2 * _PATCH + 2].ravel()
        p = p - p.mean()
        patches.append(p / max(float(np.linalg.norm(p)), 1e-9))
    if not patches:
        return np.empty(0)
    score = np.einsum("np,dap->nda", np.array(patches), templates).max(axis=2)
    return score[:, 0] - score[:, 1]


@lru_cache(maxsize=2048)
def _items(png: bytes, task: str) -> dict[str, np.ndarray]:
    """The items of an image (decoded as 8 bits), with their digit evidence for two_among_five."""
    items = segment_items(from_png(png, dtype=np.uint8), task == "light_priors")
    if task == "two_among_five":  # once per image, not once per trial and searcher
        items["digits"] = digit_evidence(items["ink"], items["x"], items["y"])
    del items["ink"]  # read only for the digit evidence: not kept (1.3 MB an image)
    return items


def target_scores(task: str, question: str, items: dict[str, np.ndarray]) -> np.ndarray:
    """How target-like each item is, given the task and the question asked."""
    n = len(items["x"])
    if n == 0:
        return np.empty(0)
    if task == "circle_sizes":
        return items["area"]
    if task == "light_priors":
        ref = np.median(items["light"], axis=0)
        return -(items["light"] @ ref)  # lit against the majority
    if task == "two_among_five":
        chir = items.get("digits")
        if chir is None:
            chir = digit_evidence(items["ink"], items["x"], items["y"])
        digit = np.where(chir > 0, "2", "5")
        colour = np.array(_COLOUR_NAMES)[
            np.argmax([_colour_match(items["colour"], c) for c in _COLOUR_NAMES], axis=0)
        ]
        named = re.search(r"the (red|green|blue) '([25])'", question)
        if named:  # the shape-colour conjunction names its target
            hits = (colour == named.group(1)).astype(float) + (digit == named.group(2))
            return hits + 0.01 * np.abs(chir)
        other = re.search(r"the number ([25]) written", question)
        target = "5" if other and other.group(1) == "2" else "2"
        share = np.array([(colour == c).mean() for c in colour])
        return (digit == target) + (1.0 - share) + 0.01 * np.abs(chir)
    raise ValueError(task)


def _colour_match(rgb: np.ndarray, name: str) -> np.ndarray:
    ref = np.array(COLOURS[name], float)
    ref = ref - ref.mean()
    v = rgb - rgb.mean(axis=1, keepdims=True)
    return (v @ ref) / (np.linalg.norm(v, axis=1) * np.linalg.norm(ref) + 1e-9)


def _graded(kind: str, distractors: int) -> float:
    """``sim:graded``'s or ``sim:steep``'s chance of finding the target among ``distractors``."""
    return NormalDist().cdf((GRADED_THRESHOLD - distractors) / GRADED_SD[kind])


class SearchSubject:
    """A simulated searcher (``sim:parallel``, ``sim:serial``, ``sim:graded``, ``sim:steep``, ``sim:random``)."""

    def __init__(self, kind: str, seed: int = 0, capacity: int = CAPACITY, lapse: float = LAPSE):
        if kind not in SEARCH_KINDS:
            raise ValueError(
                f"unknown simulated searcher sim:{kind}; choose from {', '.join('sim:' + k for k in SEARCH_KINDS)}"
            )
        self.kind, self.seed, self.capacity, self.lapse = kind, seed, capacity, lapse
        self.name = f"sim:{kind}"

    def answer(self, request: Request) -> str:
        """The cell or point this searcher answers for a trial (seeded by the trial)."""
        meta = request.meta
        task = meta["task"]
        if task not in SEARCH_TASKS:
            raise FatalSubjectError(
                f"{self.name} is a visual searcher ({', '.join(SEARCH_TASKS)}); task {task} "
                "needs a magnitude observer such as sim:bayesian"
            )
        turn = request.turns[-1]
        question = turn.text or ""
        cells = "Cell (i,j)" in question
        ident = (meta["session"], meta["run"], meta["condition"], meta["modality"], meta["trial"])
        rng = stable_rng((self.seed, self.kind, ident))
        if self.kind == "random" or turn.png is None:
            if cells:
                return f"Cell ({CELLS[rng.integers(4)]})"
            x, y = rng.uniform(0, SIZE, 2)
            return f"({x:.0f}, {y:.0f})"
        items = _items(turn.png, task)
        n = len(items["x"])
        if n == 0:
            return "I cannot find the target." if not cells else "Cell (1,1)"
        score = target_scores(task, question, items)
        if rng.random() < self.lapse:
            pick = int(rng.integers(n))
        elif self.kind == "parallel" or (
            self.kind in GRADED_SD and rng.random() < _graded(self.kind, n - 1)
        ):
            pick = int(np.argmax(score))
        elif self.kind in GRADED_SD:  # not found: a random item
            pick = int(rng.integers(n))
        else:  # serial: inspect at most `capacity` items in a random order
            look = rng.permutation(n)[: self.capacity]
            pick = int(look[np.argmax(score[look])])
        x, y = float(items["x"][pick]), float(items["y"][pick])
        if cells:
            return f"Cell ({cell_of(x, y)})"
        x, y = x + POINT_SD * rng.standard_normal(), y + POINT_SD * rng.standard_normal()
        return f"({x:.0f}, {y:.0f})"

    async def complete(self, request: Request) -> Reply:
        """Answer one trial (refused for tasks that are not visual search)."""
        return Reply(text=self.answer(request))


def random_reply(request: Request, seed: int = 0) -> str:
    """``sim:random``'s reply to a visual search trial (the paradigm's ``random`` hook)."""
    return SearchSubject("random", seed=seed).answer(request)
