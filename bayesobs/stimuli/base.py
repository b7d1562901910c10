"""What every task provides: stimulus generation, text and image renderings."""

from __future__ import annotations

import hashlib
import io
import json
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

import numpy as np
from PIL import Image
from scipy.ndimage import gaussian_filter

from ..parse import read_answer


@dataclass(frozen=True)
class Stimulus:
    """One stimulus: true value, text rendering and image parameters."""

    task: str
    value: float
    text: str
    params: dict[str, Any] = field(default_factory=dict)
    prompt: str = ""  # shown beside the stimulus in every modality (e.g. a search question)

    def key(self) -> str:
        """A short content hash (identifies the stimulus in logs)."""
        blob = json.dumps([self.task, self.value, self.text, self.params], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


class Demo(NamedTuple):
    """A few-shot demonstration: the user turn's text and PNG images, and the correct answer."""

    text: str | None
    images: tuple[bytes, ...]
    answer: str


class Task:
    """Base class of the magnitude-estimation tasks."""

    name: ClassVar[str]
    role: ClassVar[str]  # "line-length ratio estimator"
    instruction: ClassVar[str]  # what to estimate and in which format
    unit: ClassVar[str] = ""
    fraction: ClassVar[bool] = False  # answers are in [0, 1]: percentages are read as fractions
    answer_range: ClassVar[tuple[float, float] | None] = (
        None  # plausible answers; others are invalid
    )
    # the stimulus values the task can show: a spec's session ranges must lie within (None: any)
    value_range: ClassVar[tuple[float, float] | None] = None
    # bounds of numeric options (e.g. line lengths the image holds), and why, for messages
    option_bounds: ClassVar[dict[str, tuple[float, float]]] = {}
    option_notes: ClassVar[dict[str, str]] = {}
    modalities: ClassVar[tuple[str, ...]] = ("text", "image", "multimodal")
    paradigm: ClassVar[str] = "magnitude"  # routes the analyses (trial column ``paradigm``)
    # reasoning allowed: the system prompt leaves out "Do not explain or reason ..." and the
    # reply budget is ``max_tokens`` (None: the subject's own, e.g. ``--max-tokens``)
    allow_reasoning: ClassVar[bool] = False
    max_tokens: ClassVar[int | None] = None
    # What a person is told (``serve`` and the jsPsych export); a model's prompts never use these.
    # ``person_task`` completes "In this study you will ..." on the consent page;
    # ``person_instruction`` replaces ``instruction`` for a person (None: it suits a person as is);
    # ``seconds_per_answer`` is the assumed time a person takes per answer before any is measured.
    person_task: ClassVar[str] = "answer questions about pictures and short texts"
    person_instruction: ClassVar[str | None] = None
    seconds_per_answer: ClassVar[float] = 8.0

    def generate(
        self, rng: np.random.Generator, low: float, high: float, n: int, options: dict
    ) -> list[Stimulus]:
        """``n`` stimuli with values drawn uniformly in ``[low, high]``."""
        raise NotImplementedError

    def record(self, stim: Stimulus, reply: str | None, truncated: bool = False) -> dict[str, Any]:
        """Score a reply: ``response`` (float or None), ``valid`` and any extra trial columns."""
        value, reason = read_answer(reply, self.fraction, self.answer_range, truncated)
        ok = math.isfinite(value)
        out: dict[str, Any] = {"response": value if ok else None, "valid": ok}
        if not ok:
            out["invalid_reason"] = reason
        return out

    @classmethod
    def worded(cls) -> bool:
        """Whether answers are words, cells or lists read by the task's own :meth:`record`, not a plain number."""
        return cls.record is not Task.record

    def human_question(self, stim: Stimulus) -> str | None:
        """The question a person reads with the stimulus (the web app shows no few-shot demos)."""
        return stim.prompt or None

    @classmethod
    def person_text(cls) -> str:
        """The task's instruction as a person reads it (``person_instruction``, else ``instruction``)."""
        return cls.person_instruction or cls.instruction

    def human_answer(self, stim: Stimulus) -> str:
        """The correct answer as a person reads it (the practice trial's feedback)."""
        value = f"{round(float(stim.value), 3):g}"
        return f"{value} {self.unit}" if self.unit else value

    def tap_area(self, stim: Stimulus) -> tuple[int, int] | None:
        """``(width, height)`` in pixels of the image a person taps to answer; None: answers are typed."""
        return None

    def human_replies(self, stim: Stimulus, text: str) -> tuple[str, ...]:
        """Readings of a person's typed answer, tried in order by :meth:`record`."""
        return (text, "{" + text + "}")

    def answer_choices(self, stim: Stimulus) -> tuple[str, ...] | None:
        """The few answers a person may type, as :func:`choice_key` reads them; None: any text."""
        return None

    def person_row(self, stim: Stimulus | dict, answer: dict) -> dict[str, Any]:
        """A person's answer (``{x, y, display_w, display_h}`` tapped, else ``{response}``) as log columns."""
        stim = stim if isinstance(stim, Stimulus) else Stimulus(**stim)
        if self.tap_area(stim) is not None:
            names = ("tap_x", "x"), ("tap_y", "y"), ("display_w",) * 2, ("display_h",) * 2
            tap = {k: round(float(answer[a]), 2) for k, a in names}
            reply = self.tap_reply(stim, tap["tap_x"], tap["tap_y"])
            return {**self.record(stim, reply), **tap, "raw_response": reply}
        text = str(answer.get("response", "")).strip()
        rows = [self.record(stim, reply) for reply in self.human_replies(stim, text)]
        row = next((r for r in rows if r.get("valid")), rows[0])
        return {**row, "raw_response": str(answer.get("response"))}

    def demos(self, stim: Stimulus, modality: str) -> tuple[Demo, ...]:
        """Few-shot demonstrations shown before the trial, with their correct answers."""
        return ()

    def render_pngs(self, stim: Stimulus, blur_sigma: float = 0.0) -> tuple[bytes, ...]:
        """Every image of the trial, in order (one for the magnitude and search tasks)."""
        return (self.render_png(stim, blur_sigma),)

    def draw(self, stim: Stimulus) -> np.ndarray:
        """The image as an ``(H, W, 3)`` float array in [0, 255]."""
        raise NotImplementedError(f"{self.name} has no image rendering")

    def render_png(self, stim: Stimulus, blur_sigma: float = 0.0) -> bytes:
        """PNG bytes of the stimulus with a true Gaussian blur of ``blur_sigma`` pixels."""
        return to_png(blur(self.draw(stim), blur_sigma))

    hints: ClassVar[bool] = False  # the task has a ``hint`` condition (see system_extra)

    def system_extra(self, stim: Stimulus, cond) -> str:
        """Text the runner appends to a trial's system prompt (default none; hvs: a field hint)."""
        return ""

    def request_meta(self, stim: Stimulus) -> dict[str, Any]:
        """Extra request ``meta`` for simulated subjects (default none; never logged or sent)."""
        return {}

    # ---- dependent questions: a trial asked from the subject's answer to the trial before it
    def follows(self, stim: Stimulus) -> bool:
        """Whether ``stim`` is asked from the subject's own answer to the trial just before it."""
        return False

    def follow_up(self, stim: Stimulus, previous: Stimulus, record: dict[str, Any]) -> Stimulus:
        """The stimulus actually asked for planned ``stim``, given the trial before it."""
        return stim


def choice_key(text: str) -> str:
    """A typed answer as it is matched against :meth:`Task.answer_choices`: no braces, one case."""
    return " ".join(str(text).replace("{", " ").replace("}", " ").lower().split())


def blur(img: np.ndarray, sigma: float) -> np.ndarray:
    """Gaussian blur with standard deviation ``sigma`` pixels (per colour channel)."""
    if sigma <= 0:
        return img
    return gaussian_filter(np.asarray(img, dtype=float), sigma=(sigma, sigma, 0), mode="nearest")


def to_png(img: np.ndarray) -> bytes:
    """Encode an ``(H, W, 3)`` array in [0, 255] as PNG."""
    arr = np.rint(img)  # rounded, then clipped in place (the same values, ten times faster)
    np.clip(arr, 0, 255, out=arr)
    arr = arr.astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr, mode="RGB").save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def from_png(data: bytes, dtype=float) -> np.ndarray:
    """Decode PNG bytes to an ``(H, W, 3)`` array."""
    with Image.open(io.BytesIO(data)) as im:
        return np.asarray(im.convert("RGB"), dtype=dtype)


def channel_mean(img: np.ndarray) -> np.ndarray:
    """The mean of the three channels per pixel: ``img.mean(axis=2)``, faster."""
    img = np.asarray(img, dtype=float)
    return (img[..., 0] + img[..., 1] + img[..., 2]) / 3


def canvas(width: int, height: int) -> np.ndarray:
    """A white ``(height, width, 3)`` image in [0, 255]."""
    return np.full((height, width, 3), 255.0)


def hline(img: np.ndarray, x0: int, x1: int, y: int, thickness: int, color=(0, 0, 0)) -> None:
    """Draw a horizontal bar covering pixel columns ``x0 .. x1 - 1``."""
    h = thickness // 2
    img[y - h : y - h + thickness, x0:x1] = color


def box_grid(
    img: np.ndarray, x0: float, y0: float, x1: float, y1: float, pad: float, sparse: bool = False
):
    """The part of ``img`` within a padded bounding box, and its pixels' index grids."""
    h, w = img.shape[:2]
    xa, xb = max(0, int(np.floor(min(x0, x1) - pad))), min(w, int(np.ceil(max(x0, x1) + pad)) + 1)
    ya, yb = max(0, int(np.floor(min(y0, y1) - pad))), min(h, int(np.ceil(max(y0, y1) + pad)) + 1)
    yy, xx = (np.ogrid if sparse else np.mgrid)[ya:yb, xa:xb]
    return (slice(ya, yb), slice(xa, xb)), xx, yy


def disc(img: np.ndarray, cx: float, cy: float, r: float, color) -> None:
    """Fill the pixels whose centres lie within ``r`` of ``(cx, cy)``."""
    sl, xx, yy = box_grid(img, cx, cy, cx, cy, r + 1, sparse=True)
    view = img[sl]
    view[(xx - cx) ** 2 + (yy - cy) ** 2 <= r * r] = color


def segment(
    img: np.ndarray, x0: float, y0: float, x1: float, y1: float, width: float, color=(0, 0, 0)
) -> None:
    """Draw a thick straight segment (axis-aligned or not)."""
    sl, xx, yy = box_grid(img, x0, y0, x1, y1, width)
    dx, dy = x1 - x0, y1 - y0
    length2 = dx * dx + dy * dy
    t = np.clip(((xx - x0) * dx + (yy - y0) * dy) / length2, 0, 1) if length2 else 0.0
    px, py = x0 + t * dx, y0 + t * dy
    view = img[sl]
    view[(xx - px) ** 2 + (yy - py) ** 2 <= (width / 2) ** 2] = color
