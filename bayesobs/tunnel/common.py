"""Shared pieces of the Tunnel Vision generators: the trial record, demonstrations, palette labels."""

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
    """One generated trial: what is shown, what is asked, the gold answer and analysis metadata."""

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
    """Index map of an RGB array: ``k + 1`` where a pixel equals palette colour ``k``, else 0."""
    packed = (
        (arr[..., 0].astype(np.int64) << 16) | (arr[..., 1].astype(np.int64) << 8) | arr[..., 2]
    )
    out = np.zeros(arr.shape[:2], np.int16)
    for k, c in enumerate(palette.values()):
        out[packed == ((c[0] << 16) | (c[1] << 8) | c[2])] = k + 1
    return out
