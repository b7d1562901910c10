"""Line ratio and marker location: ASCII and PNG renderings of the same lengths."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..stimuli.base import Stimulus, Task, canvas, hline
from ..stimuli.distributions import draw_value

PX_PER_CHAR = 6


def _chars(rng, options: dict, lo: int, hi: int) -> int:
    """A line length in characters, uniform in the spec's ``[min_chars, max_chars]``."""
    return int(rng.integers(options.get("min_chars", lo), options.get("max_chars", hi) + 1))


def quantised(
    rng, low: float, high: float, denom: int, smallest: int = 0, options: dict | None = None
) -> int:
    """An integer ``k`` with ``k / denom`` drawn in ``[low, high]`` and rounded."""
    lo = max(smallest, int(np.ceil(low * denom)))
    hi = min(denom, int(np.floor(high * denom)))
    value = draw_value(rng, low, high, options or {})
    return int(np.clip(round(value * denom), lo, max(lo, hi)))


class LineRatio(Task):
    """Two lines; the value is the length of the shorter over the longer."""

    name = "line_ratio"
    role = "line-length ratio estimator"
    instruction = "Estimate the ratio of the shorter line to the longer line as a decimal number between 0 and 1."
    person_task = (
        "see two lines and estimate how long the shorter one is compared with the longer one "
        "(a number between 0 and 1)"
    )
    fraction = True
    answer_range = (0.0, 1.0)
    value_range = (0.0, 1.0)
    width, height = 420, 180
    # lines are drawn PX_PER_CHAR px per character from x = 15: 67 characters reach the edge
    option_bounds: ClassVar[dict[str, tuple[float, float]]] = {
        "min_chars": (2, 67),
        "max_chars": (2, 67),
    }
    option_notes: ClassVar[dict[str, str]] = dict.fromkeys(
        option_bounds, "the longest line the 420-px image holds is 67 characters"
    )

    def generate(self, rng, low, high, n, options):
        """``n`` line pairs whose short/long length ratio lies in ``[low, high]`` (whole characters)."""
        out = []
        for _ in range(n):
            long_chars = _chars(rng, options, 30, 60)
            short = quantised(rng, low, high, long_chars, smallest=1, options=options)
            top_is_long = bool(rng.integers(2))
            lengths = (long_chars, short) if top_is_long else (short, long_chars)
            margin = self.width - 2 * 15 - long_chars * PX_PER_CHAR
            offsets = [int(rng.integers(0, max(1, margin) + 1)) for _ in range(2)]
            text = "\n".join(f"{lab}: {'-' * k}" for lab, k in zip("AB", lengths, strict=True))
            out.append(
                Stimulus(
                    self.name,
                    short / long_chars,
                    text,
                    {"chars": list(lengths), "offsets": offsets},
                )
            )
        return out

    def draw(self, stim):
        """The two lines drawn one above the other, a fixed number of pixels per character."""
        img = canvas(self.width, self.height)
        for i, (k, off) in enumerate(
            zip(stim.params["chars"], stim.params["offsets"], strict=True)
        ):
            x0 = 15 + off
            hline(img, x0, x0 + k * PX_PER_CHAR, 60 + 60 * i, 4)
        return img


class MarkerLocation(Task):
    """A line with a red marker; the value is the marker's position from 0 to 1."""

    name = "marker_location"
    role = "marker location estimator"
    person_task = (
        "see a line with a marker on it and estimate where along the line the marker is "
        "(0 at the left end, 1 at the right end)"
    )
    instruction = (
        "Estimate the position of the marker along the line as a decimal number between "
        "0 (left end) and 1 (right end)."
    )
    fraction = True
    answer_range = (0.0, 1.0)
    value_range = (0.0, 1.0)
    width, height = 440, 120
    # the line is drawn PX_PER_CHAR px per character from x = 20: 71 characters reach the edge
    option_bounds: ClassVar[dict[str, tuple[float, float]]] = {
        "min_chars": (2, 71),
        "max_chars": (2, 71),
    }
    option_notes: ClassVar[dict[str, str]] = dict.fromkeys(
        option_bounds, "the longest line the 440-px image holds is 71 characters"
    )

    def generate(self, rng, low, high, n, options):
        """``n`` lines with a marker whose relative position lies in ``[low, high]`` (whole characters)."""
        out = []
        for _ in range(n):
            chars = _chars(rng, options, 41, 71)
            pos = quantised(rng, low, high, chars - 1, options=options)
            text = "-" * pos + "0" + "-" * (chars - 1 - pos)
            margin = self.width - 40 - (chars - 1) * PX_PER_CHAR
            off = int(rng.integers(0, max(1, margin) + 1))
            out.append(
                Stimulus(
                    self.name, pos / (chars - 1), text, {"chars": chars, "pos": pos, "offset": off}
                )
            )
        return out

    def draw(self, stim):
        """The line with its marker drawn at the character's pixel position."""
        img = canvas(self.width, self.height)
        x0 = 20 + stim.params["offset"]
        x1 = x0 + (stim.params["chars"] - 1) * PX_PER_CHAR
        hline(img, x0, x1 + 1, 60, 3)
        xm = x0 + stim.params["pos"] * PX_PER_CHAR
        # a red tick across the line, 3 px wide, never beyond the line's ends
        img[47:74, max(x0, xm - 1) : min(x1, xm + 1) + 1] = (220, 0, 0)
        return img
