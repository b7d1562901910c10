"""What the generators of every paradigm share: seed streams, the font, colours and crisp text.

Text is drawn with matplotlib's bundled DejaVu Sans (``ImageFont.truetype``),
without antialiasing (``fontmode = "1"``: every text pixel is pure black), so
images are identical on every machine with the same Pillow/FreeType and ink
is told from any background exactly; the simulated subjects read text by
matching glyphs rendered the same way (:func:`render_text`).  Each part of a
trial draws from its own stream (:func:`streams`), so a change to one part's
draws leaves the others' as they were.
"""

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
    """A :class:`numpy.random.SeedSequence` from a seed, a generator (one draw) or a sequence.

    Parameters
    ----------
    rng_or_seed : int, numpy.random.Generator or numpy.random.SeedSequence
        A seed (any integer but a bool), a generator to draw one integer seed
        from (advancing it), or a sequence, returned as it is.

    Returns
    -------
    numpy.random.SeedSequence
        The sequence to spawn streams from.

    Raises
    ------
    TypeError
        If ``rng_or_seed`` is none of these (a bool or a float, say).
    """
    if isinstance(rng_or_seed, np.random.SeedSequence):
        return rng_or_seed
    if isinstance(rng_or_seed, np.random.Generator):
        return np.random.SeedSequence(int(rng_or_seed.integers(0, 2**63 - 1)))
    if isinstance(rng_or_seed, int | np.integer) and not isinstance(rng_or_seed, bool):
        return np.random.SeedSequence(int(rng_or_seed))
    raise TypeError(f"expected an int seed or a numpy Generator, got {type(rng_or_seed).__name__}")


def streams(rng_or_seed: int | np.random.Generator, n: int) -> list[np.random.Generator]:
    """``n`` independent generators spawned from one seed (separate streams per trial part).

    Parameters
    ----------
    rng_or_seed : int or numpy.random.Generator
        Seed, or a generator to draw one from (see :func:`as_seed_sequence`).
    n : int
        Number of streams.

    Returns
    -------
    list of numpy.random.Generator
        ``n`` generators, each from its own spawned child sequence.
    """
    return [np.random.default_rng(s) for s in as_seed_sequence(rng_or_seed).spawn(n)]


@lru_cache(maxsize=16)
def font(size: int) -> ImageFont.FreeTypeFont:
    """DejaVu Sans (matplotlib's bundled TTF) at ``size`` px.

    Parameters
    ----------
    size : int
        Font size in pixels.

    Returns
    -------
    PIL.ImageFont.FreeTypeFont
        The font (cached: 16 sizes at most are kept).
    """
    return ImageFont.truetype(str(FONT_PATH), size)


def rgb(colour: str) -> tuple[int, int, int]:
    """RGB triple of a Pillow colour name or ``#rrggbb`` string.

    Parameters
    ----------
    colour : str
        Any colour string Pillow's ``ImageColor.getrgb`` reads (alpha dropped).

    Returns
    -------
    tuple of int
        ``(r, g, b)``, each 0..255.
    """
    r, g, b = ImageColor.getrgb(colour)[:3]
    return int(r), int(g), int(b)


def draw_centred_text(
    draw: ImageDraw.ImageDraw, xy: tuple[float, float], text: str, size: int, fill="black"
) -> None:
    """Draw ``text`` centred on ``xy`` (anchor ``mm``), crisp (no antialiasing).

    Parameters
    ----------
    draw : PIL.ImageDraw.ImageDraw
        Where to draw; its ``fontmode`` is set to ``"1"`` (no antialiasing).
    xy : tuple of float
        ``(x, y)`` of the text's centre, in pixels.
    text : str
        The text.
    size : int
        Font size in pixels (:func:`font`).
    fill : colour, default "black"
        Text colour, anything Pillow accepts.
    """
    draw.fontmode = "1"
    draw.text(xy, text, fill=fill, font=font(size), anchor="mm")


def draw_left_text(
    draw: ImageDraw.ImageDraw, xy: tuple[float, float], text: str, size: int, fill="black"
) -> None:
    """Draw ``text`` with its left edge at ``x``, vertically centred on ``y`` (anchor ``lm``), crisp.

    Parameters
    ----------
    draw : PIL.ImageDraw.ImageDraw
        Where to draw; its ``fontmode`` is set to ``"1"`` (no antialiasing).
    xy : tuple of float
        ``(x, y)``: the left edge and the vertical middle of the text, in pixels.
    text : str
        The text.
    size : int
        Font size in pixels (:func:`font`).
    fill : colour, default "black"
        Text colour, anything Pillow accepts.
    """
    draw.fontmode = "1"
    draw.text(xy, text, fill=fill, font=font(size), anchor="lm")


@lru_cache(maxsize=4096)
def render_text(text: str, size: int, box: tuple[int, int], anchor: str = "mm") -> np.ndarray:
    """Grey image (0 ink .. 255 white) of ``text`` drawn black in a white ``box`` = (width, height).

    The text is placed at the box centre (``anchor="mm"``) or at its left
    middle (``anchor="lm"``), as the generators draw it; the simulated
    subjects compare image crops with these renderings (template matching).

    Parameters
    ----------
    text : str
        The text.
    size : int
        Font size in pixels (:func:`font`).
    box : tuple of int
        ``(width, height)`` of the image in pixels.
    anchor : str, default "mm"
        ``"mm"`` (centred); any other value places the text's left edge at
        ``x = 0``, vertically centred, with Pillow anchor ``anchor``
        (the generators use ``"lm"``).

    Returns
    -------
    numpy.ndarray
        ``uint8`` array of shape ``(height, width)``, read-only (results are
        cached, 4096 at most).
    """
    w, h = box
    img = Image.new("L", (w, h), 255)
    xy = (w / 2, h / 2) if anchor == "mm" else (0, h / 2)
    draw = ImageDraw.Draw(img)
    draw.fontmode = "1"
    draw.text(xy, text, fill=0, font=font(size), anchor=anchor)
    out = np.asarray(img)
    out.setflags(write=False)
    return out
