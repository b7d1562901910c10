"""What every task provides: stimulus generation, text and image renderings.

A :class:`Stimulus` carries its true value, its text rendering and the
parameters its image renderer needs.  Values are quantised so that the text
and the image show *exactly* the same magnitude (line lengths in characters
times a fixed number of pixels per character, marker indices, integer-grid
paths), and the logged ``stimulus`` is that exact value.
"""

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
        """A short content hash (identifies the stimulus in logs).

        Returns
        -------
        str
            The first 16 hex digits of the sha256 of the task, value, text
            and params as JSON (sorted keys).
        """
        blob = json.dumps([self.task, self.value, self.text, self.params], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


class Demo(NamedTuple):
    """A few-shot demonstration: the user turn's text and PNG images, and the correct answer."""

    text: str | None
    images: tuple[bytes, ...]
    answer: str


class Task:
    """Base class of the magnitude-estimation tasks.

    Subclasses set the class attributes and implement :meth:`generate`, and
    (visual tasks) :meth:`draw`.
    """

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
        """``n`` stimuli with values drawn uniformly in ``[low, high]``.

        Parameters
        ----------
        rng : numpy.random.Generator
            The session's random stream.
        low, high : float
            The session's stimulus range, in the task's unit.
        n : int
            Stimuli to make.
        options : dict
            The task's options from the spec (the subclass says which it
            reads).

        Returns
        -------
        list of Stimulus
            ``n`` stimuli in presentation order.

        Raises
        ------
        NotImplementedError
            Here: every task implements it.
        """
        raise NotImplementedError

    def record(self, stim: Stimulus, reply: str | None, truncated: bool = False) -> dict[str, Any]:
        """Score a reply: ``response`` (float or None), ``valid`` and any extra trial columns.

        Magnitude tasks read one number (:func:`bayesobs.parse.read_answer`);
        an invalid reading adds ``invalid_reason``.  ``truncated`` says the
        reply was cut off by ``max_tokens``.  Tasks whose answers are cells
        or points override this.

        Parameters
        ----------
        stim : Stimulus
            The trial's stimulus.
        reply : str or None
            The subject's reply.
        truncated : bool
            The reply was cut off by ``max_tokens``.

        Returns
        -------
        dict
            ``response`` (the number, or None when invalid), ``valid`` and,
            when invalid, ``invalid_reason``.
        """
        value, reason = read_answer(reply, self.fraction, self.answer_range, truncated)
        ok = math.isfinite(value)
        out: dict[str, Any] = {"response": value if ok else None, "valid": ok}
        if not ok:
            out["invalid_reason"] = reason
        return out

    @classmethod
    def worded(cls) -> bool:
        """Whether answers are words, cells or lists read by the task's own :meth:`record`, not a plain number.

        Returns
        -------
        bool
            True when the class overrides :meth:`Task.record`.
        """
        return cls.record is not Task.record

    def human_question(self, stim: Stimulus) -> str | None:
        """The question a person reads with the stimulus (the web app shows no few-shot demos).

        Default: the model's question (``stim.prompt``).  A task whose
        question answers its demonstrations (object re-identification's
        "Yes, that is correct.") drops that part for a person.

        Parameters
        ----------
        stim : Stimulus
            The trial's stimulus.

        Returns
        -------
        str or None
            The question; ``None`` when the stimulus has no prompt.
        """
        return stim.prompt or None

    @classmethod
    def person_text(cls) -> str:
        """The task's instruction as a person reads it (``person_instruction``, else ``instruction``).

        Returns
        -------
        str
            The instruction a person is shown.
        """
        return cls.person_instruction or cls.instruction

    def human_answer(self, stim: Stimulus) -> str:
        """The correct answer as a person reads it (the practice trial's feedback).

        Default: the true value, to three decimals, with the unit.

        Parameters
        ----------
        stim : Stimulus
            The trial's stimulus.

        Returns
        -------
        str
            The answer as text (``"0.35"``, ``"12 s"``).
        """
        value = f"{round(float(stim.value), 3):g}"
        return f"{value} {self.unit}" if self.unit else value

    def tap_area(self, stim: Stimulus) -> tuple[int, int] | None:
        """``(width, height)`` in pixels of the image a person taps to answer; None: answers are typed.

        Parameters
        ----------
        stim : Stimulus
            The trial's stimulus.

        Returns
        -------
        tuple of (int, int) or None
            Here ``None``: answers are typed unless a task overrides this.
        """
        return None

    def human_replies(self, stim: Stimulus, text: str) -> tuple[str, ...]:
        """Readings of a person's typed answer, tried in order by :meth:`record`.

        A person types the bare answer (``yes``, ``C3``); the format a model
        is asked for (braces, ``COUNT:x``, ``Cell (i,j)``) is optional.  The
        web app logs the first reading :meth:`record` accepts.  Default: as
        typed, then in braces.

        Parameters
        ----------
        stim : Stimulus
            The trial's stimulus.
        text : str
            What the person typed.

        Returns
        -------
        tuple of str
            The readings to try, in order.
        """
        return (text, "{" + text + "}")

    def demos(self, stim: Stimulus, modality: str) -> tuple[Demo, ...]:
        """Few-shot demonstrations shown before the trial, with their correct answers.

        Distinct from the rolling context (the subject's own past answers):
        fixed (prompt, images, answer) triples the task declares.  None by default.

        Parameters
        ----------
        stim : Stimulus
            The trial's stimulus.
        modality : {"text", "image", "multimodal"}
            The trial's modality.

        Returns
        -------
        tuple of Demo
            The demonstrations in order; here empty.
        """
        return ()

    def render_pngs(self, stim: Stimulus, blur_sigma: float = 0.0) -> tuple[bytes, ...]:
        """Every image of the trial, in order (one for the magnitude and search tasks).

        Parameters
        ----------
        stim : Stimulus
            The trial's stimulus.
        blur_sigma : float
            Gaussian blur in pixels (0: none).

        Returns
        -------
        tuple of bytes
            PNG images; here the one of :meth:`render_png`.
        """
        return (self.render_png(stim, blur_sigma),)

    def draw(self, stim: Stimulus) -> np.ndarray:
        """The image as an ``(H, W, 3)`` float array in [0, 255].

        Parameters
        ----------
        stim : Stimulus
            The stimulus to draw.

        Returns
        -------
        ndarray of float, shape (H, W, 3)
            RGB pixel values in [0, 255].

        Raises
        ------
        NotImplementedError
            Here: a task without an image rendering.
        """
        raise NotImplementedError(f"{self.name} has no image rendering")

    def render_png(self, stim: Stimulus, blur_sigma: float = 0.0) -> bytes:
        """PNG bytes of the stimulus with a true Gaussian blur of ``blur_sigma`` pixels.

        Parameters
        ----------
        stim : Stimulus
            The stimulus to render.
        blur_sigma : float
            Standard deviation of the blur in pixels (0: none).

        Returns
        -------
        bytes
            The PNG of :meth:`draw`'s image after :func:`blur`.
        """
        return to_png(blur(self.draw(stim), blur_sigma))

    hints: ClassVar[bool] = False  # the task has a ``hint`` condition (see system_extra)

    def system_extra(self, stim: Stimulus, cond) -> str:
        """Text the runner appends to a trial's system prompt (default none; hvs: a field hint).

        Parameters
        ----------
        stim : Stimulus
            The trial's stimulus.
        cond : Condition
            The trial's condition (:class:`bayesobs.run.ablations.Condition`).

        Returns
        -------
        str
            Text to append; here empty.
        """
        return ""

    def request_meta(self, stim: Stimulus) -> dict[str, Any]:
        """Extra request ``meta`` for simulated subjects (default none; never logged or sent).

        Parameters
        ----------
        stim : Stimulus
            The trial's stimulus.

        Returns
        -------
        dict
            Extra fields of the request's ``meta``; here empty.
        """
        return {}

    # ---- dependent questions: a trial asked from the subject's answer to the trial before it
    def follows(self, stim: Stimulus) -> bool:
        """Whether ``stim`` is asked from the subject's own answer to the trial just before it.

        Default False.  The runner then builds the question with
        :meth:`follow_up` from that trial's logged record (also on resume,
        from the log), and keeps such a trial right after the one it follows
        when a condition reverses the order (``context_reversed``).

        Parameters
        ----------
        stim : Stimulus
            A planned stimulus.

        Returns
        -------
        bool
            Here False.
        """
        return False

    def follow_up(self, stim: Stimulus, previous: Stimulus, record: dict[str, Any]) -> Stimulus:
        """The stimulus actually asked for planned ``stim``, given the trial before it.

        ``previous`` is that trial's stimulus as asked and ``record`` its
        logged row (``valid``, ``response_value`` ...).  A returned stimulus
        whose ``params`` hold ``not_asked`` (a reason) is logged as an
        invalid trial without calling the subject.  Default: ``stim`` as planned.

        Parameters
        ----------
        stim : Stimulus
            The planned stimulus.
        previous : Stimulus
            The stimulus of the trial before, as asked.
        record : dict
            That trial's logged row.

        Returns
        -------
        Stimulus
            The stimulus to ask; here ``stim``.
        """
        return stim


def blur(img: np.ndarray, sigma: float) -> np.ndarray:
    """Gaussian blur with standard deviation ``sigma`` pixels (per colour channel).

    Parameters
    ----------
    img : ndarray, shape (H, W, 3)
        The image.
    sigma : float
        Standard deviation in pixels; at most 0 returns ``img`` itself.

    Returns
    -------
    ndarray of float, shape (H, W, 3)
        The blurred image (edges extended by their nearest pixel).
    """
    if sigma <= 0:
        return img
    return gaussian_filter(np.asarray(img, dtype=float), sigma=(sigma, sigma, 0), mode="nearest")


def to_png(img: np.ndarray) -> bytes:
    """Encode an ``(H, W, 3)`` array in [0, 255] as PNG.

    Parameters
    ----------
    img : ndarray, shape (H, W, 3)
        RGB values; they are rounded and clipped to [0, 255].

    Returns
    -------
    bytes
        The PNG file (8-bit RGB).
    """
    arr = np.rint(img)  # rounded, then clipped in place (the same values, ten times faster)
    np.clip(arr, 0, 255, out=arr)
    arr = arr.astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr, mode="RGB").save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def from_png(data: bytes, dtype=float) -> np.ndarray:
    """Decode PNG bytes to an ``(H, W, 3)`` array.

    Parameters
    ----------
    data : bytes
        A PNG (any image format Pillow reads works too).
    dtype : dtype
        The array's type: float (default) or ``numpy.uint8``.

    Returns
    -------
    ndarray, shape (H, W, 3)
        RGB values in [0, 255].
    """
    with Image.open(io.BytesIO(data)) as im:
        return np.asarray(im.convert("RGB"), dtype=dtype)


def channel_mean(img: np.ndarray) -> np.ndarray:
    """The mean of the three channels per pixel: ``img.mean(axis=2)``, faster.

    The same sums in the same order (``(r + g + b) / 3``), so the same
    values, without numpy's slow reduction over a short last axis.

    Parameters
    ----------
    img : ndarray, shape (H, W, 3)
        An RGB image.

    Returns
    -------
    ndarray of float, shape (H, W)
        Per pixel, the mean of its three channels.
    """
    img = np.asarray(img, dtype=float)
    return (img[..., 0] + img[..., 1] + img[..., 2]) / 3


def canvas(width: int, height: int) -> np.ndarray:
    """A white ``(height, width, 3)`` image in [0, 255].

    Parameters
    ----------
    width, height : int
        The image's size in pixels.

    Returns
    -------
    ndarray of float, shape (height, width, 3)
        All 255.
    """
    return np.full((height, width, 3), 255.0)


def hline(img: np.ndarray, x0: int, x1: int, y: int, thickness: int, color=(0, 0, 0)) -> None:
    """Draw a horizontal bar covering pixel columns ``x0 .. x1 - 1``.

    Parameters
    ----------
    img : ndarray, shape (H, W, 3)
        The image, changed in place.
    x0, x1 : int
        First column and one past the last.
    y : int
        The bar's middle row.
    thickness : int
        Rows covered, from ``y - thickness // 2``.
    color : tuple of 3 numbers
        RGB in [0, 255] (black by default).
    """
    h = thickness // 2
    img[y - h : y - h + thickness, x0:x1] = color


def box_grid(
    img: np.ndarray, x0: float, y0: float, x1: float, y1: float, pad: float, sparse: bool = False
):
    """The part of ``img`` within a padded bounding box, and its pixels' index grids.

    Parameters
    ----------
    img : ndarray, shape (H, W, ...)
        The image.
    x0, y0, x1, y1 : float
        Two corners of the box in pixels (x: column, y: row), in any order.
    pad : float
        Pixels added on every side; the box is clipped to the image.
    sparse : bool
        Give open grids (``xx`` one row, ``yy`` one column) that broadcast to
        the box: elementwise arithmetic gives the same values as on the full
        grids, with less work.

    Returns
    -------
    region : tuple of slice
        ``(rows, columns)`` of the box in ``img``.
    xx, yy : ndarray of int, shape (rows, columns)
        The column and row of every pixel of the box (shapes ``(1, columns)``
        and ``(rows, 1)`` with ``sparse``).
    """
    h, w = img.shape[:2]
    xa, xb = max(0, int(np.floor(min(x0, x1) - pad))), min(w, int(np.ceil(max(x0, x1) + pad)) + 1)
    ya, yb = max(0, int(np.floor(min(y0, y1) - pad))), min(h, int(np.ceil(max(y0, y1) + pad)) + 1)
    yy, xx = (np.ogrid if sparse else np.mgrid)[ya:yb, xa:xb]
    return (slice(ya, yb), slice(xa, xb)), xx, yy


def disc(img: np.ndarray, cx: float, cy: float, r: float, color) -> None:
    """Fill the pixels whose centres lie within ``r`` of ``(cx, cy)``.

    Parameters
    ----------
    img : ndarray, shape (H, W, 3)
        The image, changed in place.
    cx, cy : float
        The centre in pixels (x: column, y: row).
    r : float
        The radius in pixels.
    color : tuple of 3 numbers
        RGB in [0, 255].
    """
    sl, xx, yy = box_grid(img, cx, cy, cx, cy, r + 1, sparse=True)
    view = img[sl]
    view[(xx - cx) ** 2 + (yy - cy) ** 2 <= r * r] = color


def segment(
    img: np.ndarray, x0: float, y0: float, x1: float, y1: float, width: float, color=(0, 0, 0)
) -> None:
    """Draw a thick straight segment (axis-aligned or not).

    Parameters
    ----------
    img : ndarray, shape (H, W, 3)
        The image, changed in place.
    x0, y0, x1, y1 : float
        The end points in pixels (x: column, y: row).
    width : float
        The stroke width in pixels: pixels within ``width / 2`` of the
        segment are filled (round caps).
    color : tuple of 3 numbers
        RGB in [0, 255] (black by default).
    """
    sl, xx, yy = box_grid(img, x0, y0, x1, y1, width)
    dx, dy = x1 - x0, y1 - y0
    length2 = dx * dx + dy * dy
    t = np.clip(((xx - x0) * dx + (yy - y0) * dy) / length2, 0, 1) if length2 else 0.0
    px, py = x0 + t * dx, y0 + t * dy
    view = img[sl]
    view[(xx - px) ** 2 + (yy - py) ** 2 <= (width / 2) ** 2] = color
