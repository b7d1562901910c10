"""Shared pieces of the Tunnel Vision generators: the trial record, demonstrations, palette labels.

Seed streams, the font and crisp text are every paradigm's
(:mod:`bayesobs.stimuli.drawing`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from PIL import Image


class Demo(NamedTuple):
    """One few-shot demonstration: the user turn (prompt and images) and the assistant's answer."""

    prompt: str
    images: tuple[Image.Image, ...]
    answer: str
    text: str | None = None  # a text rendering of the images (scavenger hunt; an extension)


@dataclass(frozen=True)
class Trial:
    """One generated trial: what is shown, what is asked, the gold answer and analysis metadata.

    Attributes
    ----------
    task : str
        ``"object_reid"``, ``"scavenger_hunt"`` or ``"circuits"``.
    variant : str
        The task variant (see each generator).
    images : tuple of PIL.Image.Image
        The images of the test turn, in order.
    prompt : str
        The test turn's text (the paper's wording, appendix A).
    demos : tuple of Demo
        Few-shot demonstrations shown before the trial, in order.
    answer : str
        The gold answer value (``"yes"``/``"no"``, a colour name, a component label).
    answer_format : str
        Name of the parser in :mod:`bayesobs.tunnel.parse` that reads replies.
    max_tokens : int
        The reply budget the paper's code uses for this task.
    meta : dict
        Per-trial metadata for the analyses (JSON-friendly values).
    text : str or None
        A text rendering of the image (scavenger hunt only; an extension).
    """

    task: str
    variant: str
    images: tuple[Image.Image, ...]
    prompt: str
    demos: tuple[Demo, ...]
    answer: str
    answer_format: str
    max_tokens: int
    meta: dict[str, Any] = field(default_factory=dict)
    text: str | None = None


def palette_labels(arr: np.ndarray, palette: dict[str, tuple[int, int, int]]) -> np.ndarray:
    """Index map of an RGB array: ``k + 1`` where a pixel equals palette colour ``k``, else 0.

    Parameters
    ----------
    arr : numpy.ndarray
        RGB image, shape ``(height, width, 3)`` (or more channels; the first
        three are used), integer values 0..255.
    palette : dict of str to tuple of int
        Colour name -> ``(r, g, b)``; ``k`` counts the entries in order.

    Returns
    -------
    numpy.ndarray
        ``int16`` array of shape ``(height, width)``: ``k + 1`` where the pixel
        is exactly palette colour ``k``, 0 elsewhere.
    """
    packed = (
        (arr[..., 0].astype(np.int64) << 16) | (arr[..., 1].astype(np.int64) << 8) | arr[..., 2]
    )
    out = np.zeros(arr.shape[:2], np.int16)
    for k, c in enumerate(palette.values()):
        out[packed == ((c[0] << 16) | (c[1] << 8) | c[2])] = k + 1
    return out
