"""What the generators of every paradigm share: seed streams, the font, colours and crisp text."""

from __future__ import annotations

from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path

import numpy as np
from PIL import Image, ImageColor, ImageDraw, ImageFont

# matplotlib.get_data_path(), found without importing matplotlib (~0.5 s of start-up)
FONT_PATH = (
    Path(find_spec("matplotlib").origin).parent / "mpl-data" / "fonts" / "ttf" / "DejaVuSans.ttf"
)


def as_seed_sequence(
    rng_or_seed: int | np.random.Generator | np.random.SeedSequence,
) -> np.random.SeedSequence:
    """A :class:`numpy.random.SeedSequence` from a seed, a generator (one draw) or a sequence."""
    if isinstance(rng_or_seed, np.random.SeedSequence):
        return rng_or_seed
    if isinstance(rng_or_seed, np.random.Generator):
        return np.random.SeedSequence(int(rng_or_seed.integers(0, 2**63 - 1)))
    if isinstance(rng_or_seed, int | np.integer) and not isinstance(rng_or_seed, bool):
        return np.random.SeedSequence(int(rng_or_seed))
    raise TypeError(f"expected an int seed or a numpy Generator, got {type(rng_or_seed).__name__}")


def streams(rng_or_seed: int | np.random.Generator, n: int) -> list[np.random.Generator]:
    """``n`` independent generators spawned from one seed (separate streams per trial part)."""
    return [np.random.default_rng(s) for s in as_seed_sequence(rng_or_seed).spawn(n)]


@lru_cache(maxsize=16)
def font(size: int) -> ImageFont.FreeTypeFont:
    """DejaVu Sans (matplotlib's bundled TTF) at ``size`` px."""
    return ImageFont.truetype(str(FONT_PATH), size)


def rgb(colour: str) -> tuple[int, int, int]:
    """RGB triple of a Pillow colour name or ``#rrggbb`` string."""
    r, g, b = ImageColor.getrgb(colour)[:3]
    return int(r), int(g), int(b)


def draw_centred_text(
    draw: ImageDraw.ImageDraw, xy: tuple[float, float], text: str, size: int, fill="black"
) -> None:
    """Draw ``text`` centred on ``xy`` (anchor ``mm``), crisp (no antialiasing)."""
    draw.fontmode = "1"
    draw.text(xy, text, fill=fill, font=font(size), anchor="mm")


def draw_left_text(
    draw: ImageDraw.ImageDraw, xy: tuple[float, float], text: str, size: int, fill="black"
) -> None:
    """Draw ``text`` with its left edge at ``x``, vertically centred on ``y`` (anchor ``lm``), crisp."""
    draw.fontmode = "1"
    draw.text(xy, text, fill=fill, font=font(size), anchor="lm")


@lru_cache(maxsize=4096)
def render_text(text: str, size: int, box: tuple[int, int], anchor: str = "mm") -> np.ndarray:
    """Grey image (0 ink .. 255 white) of ``text`` drawn black in a white ``box`` = (width, height)."""
    w, h = box
    img = Image.new("L", (w, h), 255)
    xy = (w / 2, h / 2) if anchor == "mm" else (0, h / 2)
    draw = ImageDraw.Draw(img)
    draw.fontmode = "1"
    draw.text(xy, text, fill=0, font=font(size), anchor=anchor)
    out = np.asarray(img)
    out.setflags(write=False)
    return out
