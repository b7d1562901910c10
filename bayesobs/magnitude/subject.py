"""Simulated observers that perceive the *rendered* stimulus."""

from __future__ import annotations

import math
import re
from collections import OrderedDict
from functools import lru_cache

import numpy as np

from ..chat import COT_SENTENCE, FatalSubjectError, Reply, Request, Turn
from ..magnitude.maze import DIRS, UNIT_PX
from ..seeds import stable_rng
from ..stimuli import from_png
from ..stimuli.base import channel_mean

KINDS = ("bayesian", "antibayes", "kalman", "linear", "anchor")
ANCHOR_WEIGHT = 0.5  # sim:anchor: weight on its own previous answer
# perceptual noise SD per task as a fraction of a typical magnitude; image noise is larger
SCALE = {
    "line_ratio": 0.5,
    "marker_location": 0.5,
    "maze_distance": 10.0,
    "duration": 10.0,
    "numerosity": 20.0,
}
WEBER = ("duration", "numerosity")  # noise proportional to the magnitude
TEXT_SD, IMAGE_SD = 0.05, 0.09
WORDS_PER_S = 2.6
COT_PRIOR_VARIANCE = 2.0  # cot: the static-Bayes prior's variance is multiplied by this
PERCEPT_CACHE = 4096  # percepts kept per subject (a run's context is perceived once)


# ---------------------------------------------------------------- perception
def read_text(task: str, text: str) -> float:
    """The value a careful reader gets from the ASCII / text rendering."""
    if task == "line_ratio":
        lengths = [len(m) for m in re.findall(r"[-~]+", text)]  # ~: a smudge (noise_text)
        return min(lengths) / max(lengths)
    if task == "marker_location":
        line = next(ln for ln in text.splitlines() if "0" in ln).strip()
        return line.index("0") / (len(line) - 1)
    if task == "maze_distance":
        x = y = 0
        for name, n in re.findall(r"(right|left|up|down) ~?(\d+)", text):
            dx, dy = DIRS[name]
            x, y = x + dx * int(n), y + dy * int(n)
        return math.hypot(x, y)
    if task == "numerosity":
        return float(text.count("o"))
    if task == "duration":
        words = sum(len(ln.split(":", 1)[-1].split()) for ln in text.splitlines())
        turns = len(text.splitlines())
        return words / WORDS_PER_S + 0.4 * (turns - 1)
    raise ValueError(f"cannot read task {task!r}")


def text_noise_level(text: str) -> float:
    """The degradation a reader can see in a ``noise_text`` rendering: the share of smudges."""
    marked = len(re.findall(r"~(?=\d)", text))
    smudges = text.count("~") - marked
    numbers = sum(int(n) >= 1 for n in re.findall(r"(?<![\d.])\d+(?![\d.])", text))
    units = text.count("-") + smudges + numbers
    return (smudges + marked) / units if units else 0.0


def _half_max_extent(profile: np.ndarray) -> tuple[float, float]:
    """Sub-pixel left/right edges where a 1-D profile crosses half its maximum."""
    half = profile.max() / 2
    above = np.flatnonzero(profile >= half)
    i, j = above[0], above[-1]
    left = i - (profile[i] - half) / (profile[i] - profile[i - 1]) if i > 0 else float(i)
    right = (
        j + (profile[j] - half) / (profile[j] - profile[j + 1])
        if j + 1 < len(profile)
        else float(j)
    )
    return left, right  # positions of the half-max crossings (pixel-centre coordinates)


def estimate_blur(img: np.ndarray) -> float:
    """Blur sigma (pixels) from the steepest horizontal edge of the image."""
    gray = channel_mean(img)
    steepest = np.abs(np.diff(gray, axis=1)).max() / 255.0
    # a step edge of contrast 1 blurred by sigma has a maximal gradient 1 / (sigma sqrt(2 pi))
    return 0.0 if steepest >= 0.4 else 1.0 / (steepest * math.sqrt(2 * math.pi))


def measure_image(task: str, img: np.ndarray) -> float:
    """The value measured from the image's pixels."""

    def dark():  # ink
        return 255.0 - channel_mean(img)

    def red():
        return np.clip(img[..., 0] - (img[..., 1] + img[..., 2]) / 2, 0, None)

    def green():
        return np.clip(img[..., 1] - (img[..., 0] + img[..., 2]) / 2, 0, None)

    if task == "line_ratio":
        mid = img.shape[0] // 2  # one line above the middle, one below
        lengths = []
        ink = dark()
        for band in (ink[:mid], ink[mid:]):
            r = int(np.argmax(band.sum(axis=1)))
            left, right = _half_max_extent(band[r])
            lengths.append(right - left)
        return min(lengths) / max(lengths)
    if task == "marker_location":
        # the line's row: the darkest row of black ink; the red tick counts as ink there
        ink, tick = dark(), red()
        r = int(np.argmax(np.clip(ink - 2 * tick, 0, None).sum(axis=1)))
        left, right = _half_max_extent(np.maximum(ink[r], tick[r]))
        xm = _centroid(tick)[0]
        # ends of the line are half a pixel inside the crossings
        return (xm - (left + 0.5)) / ((right - 0.5) - (left + 0.5))
    if task == "numerosity":
        # start-up time: this part of SciPy loads only where it is used
        from scipy.ndimage import label

        ink = dark()
        _, count = label(ink > 0.5 * ink.max())  # half-maximum; blur merges close dots: counts fall
        return float(count)
    if task == "maze_distance":
        gx, gy = _centroid(green())
        rx, ry = _centroid(red())
        return math.hypot(rx - gx, ry - gy) / UNIT_PX
    raise ValueError(f"task {task!r} has no image")


def _centroid(weight: np.ndarray) -> tuple[float, float]:
    w = np.where(weight >= 0.5 * weight.max(), weight, 0.0)
    # the index grids broadcast (the same products, summed in the same order as full grids)
    xx, yy = np.arange(w.shape[1]), np.arange(w.shape[0])[:, None]
    return float((w * xx).sum() / w.sum()), float((w * yy).sum() / w.sum())


@lru_cache(maxsize=4096)
def _image_percept(task: str, png: bytes) -> tuple[float, float]:
    img = from_png(png)
    return measure_image(task, img), estimate_blur(img)


@lru_cache(maxsize=4096)
def _blur(png: bytes) -> float:
    """The blur sigma an observer reads off an image (:func:`estimate_blur`)."""
    return estimate_blur(from_png(png))


def _previous_answer(turns) -> float | None:
    """The number in the last assistant turn of the history, or None (no history, no number)."""
    for t in reversed(turns):
        if t.role == "assistant":
            try:
                return float(t.text)
            except (TypeError, ValueError):
                return None
    return None


class SimSubject:
    """A simulated magnitude observer."""

    def __init__(self, kind: str, seed: int = 0):
        if kind not in KINDS:
            raise ValueError(
                f"unknown simulated subject sim:{kind}; choose from {', '.join('sim:' + k for k in KINDS)}"
            )
        self.kind = kind
        self.seed = seed
        self.name = f"sim:{kind}"
        # perceive() is a pure function of its inputs: a trial re-perceives its whole context,
        # so the percepts of the turns of the runs in flight are kept (least recently used out)
        self._percepts: OrderedDict[tuple, tuple[float, float]] = OrderedDict()

    def perceive(self, task: str, turn: Turn, salt, truth=None) -> tuple[float, float]:
        """Percept and its noise variance for one user turn (``truth``: a table's (value, scale))."""
        key = (self.seed, task, turn.text, turn.png, salt, truth)
        hit = self._percepts.get(key)
        if hit is not None:
            self._percepts.move_to_end(key)
            return hit
        hit = self._percepts[key] = self._perceive(task, turn, salt, truth)
        if len(self._percepts) > PERCEPT_CACHE:
            self._percepts.popitem(last=False)
        return hit

    def _perceive(self, task: str, turn: Turn, salt, truth=None) -> tuple[float, float]:
        scale = SCALE[task] if truth is None else truth[1]
        est, var = [], []
        if turn.text is not None:
            v = read_text(task, turn.text) if truth is None else truth[0]
            sd = TEXT_SD * (v if task in WEBER else scale)
            if truth is None:  # noise_text: two jittered lengths (or moves) of relative SD ~ s
                sd = math.hypot(sd, math.sqrt(2.0) * text_noise_level(turn.text) * abs(v))
            est.append(v + sd * stable_rng((self.seed, "text", turn.text, salt)).standard_normal())
            var.append(sd * sd)
        if turn.png is not None:
            # a table's image: its true value, seen through the blur the image shows
            v, sigma = (
                _image_percept(task, turn.png) if truth is None else (truth[0], _blur(turn.png))
            )
            # estimate_blur reads about 2-4x the true sigma off thin lines: sd grows ~1.3x at
            # sigma 3 px and ~2-3x at sigma 6 px
            sd = IMAGE_SD * (v if task in WEBER else scale) * math.sqrt(1.0 + (sigma / 8.0) ** 2)
            est.append(v + sd * stable_rng((self.seed, "image", turn.png, salt)).standard_normal())
            var.append(sd * sd)
        prec = [1 / v for v in var]
        fused = sum(p * e for p, e in zip(prec, est, strict=True)) / sum(prec)
        return fused, 1.0 / sum(prec)

    def answer(self, request: Request) -> float:
        """The observer's numerical answer to one trial (seeded by the trial)."""
        meta = request.meta
        task = meta["task"]
        users = [t for t in request.turns if t.role == "user"]
        ident = (meta["session"], meta["run"], meta["condition"], meta["modality"])
        truths = [None] * len(users)
        if "scale" in meta:  # a table task: the percept is the true value plus the usual noise
            truths = [(v, meta["scale"]) for v in meta["magnitudes"][-len(users) :]]
        # context percepts: the same stimulus is always perceived the same way within a run
        context = [
            self.perceive(task, t, ident, x)[0] for t, x in zip(users[:-1], truths, strict=False)
        ]
        m, v_m = self.perceive(task, users[-1], ident, truths[-1])
        scale = meta.get("scale") or SCALE[task]
        rng = stable_rng((self.seed, "decision", ident, meta["trial"]))
        if self.kind == "linear":
            anchor = (
                meta.get("anchor")
                or {
                    "line_ratio": 0.5,
                    "marker_location": 0.5,
                    "maze_distance": 10.0,
                    "duration": 10.0,
                    "numerosity": 30.0,
                }[task]
            )
            y = 0.8 * m + 0.2 * anchor
            return y + 0.2 * math.sqrt(v_m) * rng.standard_normal()
        if self.kind == "anchor":
            previous = _previous_answer(request.turns)
            y = m if previous is None else (1 - ANCHOR_WEIGHT) * m + ANCHOR_WEIGHT * previous
            return y + 0.2 * math.sqrt(v_m) * rng.standard_normal()
        if self.kind == "kalman":
            mu, p = (context[0], v_m) if context else (m, math.inf)
            q = 0.05 * scale**2
            for c in [*context[1:], m] if context else []:
                p += q
                k = p / (p + v_m)
                mu += k * (c - mu)
                p *= 1 - k
            return mu + 0.2 * math.sqrt(v_m) * rng.standard_normal()
        # static Bayes over the context window
        prior_prec, prior_sum = 0.0, 0.0
        k = len(context)
        if k >= 2:
            # less sure with a short window; a table's rows recur, so equal percepts can fill it
            var_p = max(float(np.var(context, ddof=1)), 1e-6 * scale**2) * (1.0 + 10.0 / k)
            if "Bayesian observer" in request.system:
                var_p *= 0.5  # told the data are noisy: trust the prior more
            if COT_SENTENCE in request.system:
                var_p *= COT_PRIOR_VARIANCE  # reasoning over the stimulus: trust the prior less
            # a non-uniform session tells its true prior mean (request.meta["prior_mean"]);
            # otherwise the context's mean stands for it
            centre = float(meta.get("prior_mean", np.mean(context)))
            prior_prec += 1 / var_p
            prior_sum += centre / var_p
        num = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
        rng_match = re.search(rf"range of {num} to {num}", request.system)
        if rng_match:
            lo, hi = float(rng_match.group(1)), float(rng_match.group(2))
            var_r = max((hi - lo) ** 2 / 12, 1e-6 * scale**2)
            prior_prec += 1 / var_r
            prior_sum += (lo + hi) / 2 / var_r
        if prior_prec == 0:
            y = m
        else:
            w = prior_prec / (prior_prec + 1 / v_m)  # weight on the prior
            if self.kind == "antibayes":
                w = min(max(0.7 - w, 0.0), 1.0)
            y = (1 - w) * m + w * prior_sum / prior_prec
        return y + 0.2 * math.sqrt(v_m) * rng.standard_normal()

    async def complete(self, request: Request) -> Reply:
        """Answer one trial (refused for tasks that are not magnitude estimation)."""
        if request.meta["task"] not in SCALE and "scale" not in request.meta:
            raise FatalSubjectError(
                f"{self.name} is a magnitude observer ({', '.join(SCALE)}); task "
                f"{request.meta['task']} needs a searcher such as sim:parallel"
            )
        value = self.answer(request)
        if COT_SENTENCE in request.system:  # cot: reasoning, then the labelled answer
            users = [t for t in request.turns if t.role == "user"]
            ident = (request.meta["session"], request.meta["run"], request.meta["condition"])
            truth = (
                (request.meta["magnitudes"][-1], request.meta["scale"])
                if "scale" in request.meta
                else None
            )
            seen, _ = self.perceive(request.meta["task"], users[-1], (*ident, "cot"), truth)
            return Reply(
                text=(
                    f"Step 1: the stimulus looks like about {seen:.3g}.\n"
                    f"Step 2: I weigh it against the {len(users) - 1} earlier stimuli.\n"
                    f"Answer: {value:.4g}"
                )
            )
        return Reply(text=f"{value:.4g}")
