"""Input tokens of one image, as the APIs document their accounting (for ``--dry-run``).

OpenAI (GPT-4o-class models, ``detail`` of an image part): ``low`` is a
fixed 85 tokens; ``high`` scales the image to fit within 2048 x 2048, then
(when its shorter side is longer) to a shorter side of 768 px, and counts
85 tokens plus 170 for each 512 px tile it covers.  ``auto`` lets the model
choose; it is counted as ``high``, the most it may cost.  (Models that
count 32 px patches, such as the GPT-5 mini models, cost differently: the
estimate is a guide, not an invoice.)

Anthropic (Messages API): an image whose long edge exceeds 1568 px is
first scaled down to it, keeping its aspect ratio; it then costs one token
per 28 x 28 px patch, ``ceil(w / 28) * ceil(h / 28)`` (about ``w * h /
750``).  The API has no ``detail`` setting.
"""

from __future__ import annotations

import math
import struct

IMAGE_DETAILS = ("auto", "low", "high")  # OpenAI's ``detail`` of an image part (--image-detail)
DEFAULT_IMAGE_DETAIL = "auto"  # OpenAI's own default, sent explicitly and logged
# how `export dataset --images` treats image stimuli (bayesobs.dataset); here, in a module
# without pandas, so that the CLI's parser is built without importing pandas and pyarrow
IMAGE_MODES: tuple[str, ...] = ("paths", "copy", "omit")
OPENAI_LOW_TOKENS = 85
OPENAI_BASE_TOKENS = 85
OPENAI_TILE_TOKENS = 170
OPENAI_TILE_PX = 512
OPENAI_MAX_SIDE_PX = 2048
OPENAI_SHORT_SIDE_PX = 768
ANTHROPIC_LONG_EDGE_PX = 1568
ANTHROPIC_PATCH_PX = 28


def png_size(png: bytes) -> tuple[int, int]:
    """Width and height of a PNG, from its IHDR chunk.

    Parameters
    ----------
    png : bytes
        The encoded image (only its first 24 bytes are read).

    Returns
    -------
    tuple of (int, int)
        ``(width, height)`` in pixels.

    Raises
    ------
    ValueError
        When the bytes do not start with a PNG signature and IHDR chunk.
    """
    if len(png) < 24 or png[:8] != b"\x89PNG\r\n\x1a\n" or png[12:16] != b"IHDR":
        raise ValueError("not a PNG image")
    return struct.unpack(">II", png[16:24])


def openai_image_tokens(width: int, height: int, detail: str = "auto") -> int:
    """Tokens of one ``width`` x ``height`` image at OpenAI's ``detail`` (``auto`` as ``high``).

    Parameters
    ----------
    width, height : int
        The image's size in pixels.
    detail : {"auto", "low", "high"}
        OpenAI's ``detail`` of the image part; ``"low"`` is a flat 85 tokens,
        ``"auto"`` is counted as ``"high"`` (see the module docstring).

    Returns
    -------
    int
        Input tokens: 85 plus 170 per 512 px tile of the scaled image (85
        with ``"low"``).

    Raises
    ------
    ValueError
        When ``detail`` is none of the three.
    """
    if detail == "low":
        return OPENAI_LOW_TOKENS
    if detail not in IMAGE_DETAILS:
        raise ValueError(f"detail must be low, high or auto, not {detail!r}")
    w, h = float(width), float(height)
    if max(w, h) > OPENAI_MAX_SIDE_PX:
        scale = OPENAI_MAX_SIDE_PX / max(w, h)
        w, h = w * scale, h * scale
    if min(w, h) > OPENAI_SHORT_SIDE_PX:
        scale = OPENAI_SHORT_SIDE_PX / min(w, h)
        w, h = w * scale, h * scale
    tiles = math.ceil(w / OPENAI_TILE_PX) * math.ceil(h / OPENAI_TILE_PX)
    return OPENAI_BASE_TOKENS + OPENAI_TILE_TOKENS * tiles


def anthropic_image_tokens(width: int, height: int) -> int:
    """Tokens of one ``width`` x ``height`` image in Anthropic's Messages API.

    Parameters
    ----------
    width, height : int
        The image's size in pixels.

    Returns
    -------
    int
        One token per 28 x 28 px patch, after scaling the long edge down to
        1568 px when it is longer.
    """
    w, h = float(width), float(height)
    if max(w, h) > ANTHROPIC_LONG_EDGE_PX:
        scale = ANTHROPIC_LONG_EDGE_PX / max(w, h)
        w, h = w * scale, h * scale
    return math.ceil(round(w, 6) / ANTHROPIC_PATCH_PX) * math.ceil(round(h, 6) / ANTHROPIC_PATCH_PX)


def image_tokens(subject: str, width: int, height: int, detail: str = "auto") -> int:
    """Tokens of one image for a subject: Anthropic's accounting for ``anthropic:``, else OpenAI's.

    Parameters
    ----------
    subject : str
        The subject's spec (``"anthropic:..."``, ``"openai:..."``, ...).
    width, height : int
        The image's size in pixels.
    detail : {"auto", "low", "high"}
        OpenAI's ``detail``; ignored for Anthropic subjects.

    Returns
    -------
    int
        Estimated input tokens of the image.

    Raises
    ------
    ValueError
        For a non-Anthropic subject, when ``detail`` is none of the three.
    """
    if subject.startswith("anthropic:"):
        return anthropic_image_tokens(width, height)
    return openai_image_tokens(width, height, detail)
