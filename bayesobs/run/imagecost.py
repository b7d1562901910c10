"""Input tokens of one image, as the APIs document their accounting (for ``--dry-run``)."""

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
    """Width and height of a PNG, from its IHDR chunk."""
    if len(png) < 24 or png[:8] != b"\x89PNG\r\n\x1a\n" or png[12:16] != b"IHDR":
        raise ValueError("not a PNG image")
    return struct.unpack(">II", png[16:24])


def openai_image_tokens(width: int, height: int, detail: str = "auto") -> int:
    """Tokens of one ``width`` x ``height`` image at OpenAI's ``detail`` (``auto`` as ``high``)."""
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
    """Tokens of one ``width`` x ``height`` image in Anthropic's Messages API."""
    w, h = float(width), float(height)
    if max(w, h) > ANTHROPIC_LONG_EDGE_PX:
        scale = ANTHROPIC_LONG_EDGE_PX / max(w, h)
        w, h = w * scale, h * scale
    return math.ceil(round(w, 6) / ANTHROPIC_PATCH_PX) * math.ceil(round(h, 6) / ANTHROPIC_PATCH_PX)


def image_tokens(subject: str, width: int, height: int, detail: str = "auto") -> int:
    """Tokens of one image for a subject: Anthropic's accounting for ``anthropic:``, else OpenAI's."""
    if subject.startswith("anthropic:"):
        return anthropic_image_tokens(width, height)
    return openai_image_tokens(width, height, detail)
