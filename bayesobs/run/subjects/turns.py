"""A request's turns: its images as data URLs, and the turns as inspect_ai messages (no provider SDK imported)."""

from __future__ import annotations

import base64
from functools import lru_cache

from ...chat import Request
from ..imagecost import DEFAULT_IMAGE_DETAIL


@lru_cache(maxsize=8192)
def data_url(png: bytes) -> str:
    """``data:image/png;base64,...`` (cached: history images recur in every request)."""
    return "data:image/png;base64," + base64.b64encode(png).decode()


def inspect_messages(request: Request, detail: str = DEFAULT_IMAGE_DETAIL) -> list:
    """The inspect_ai messages of a request, as :func:`openai_chat.to_messages` builds OpenAI's."""
    from inspect_ai.model import (  # inspect_ai (1.5 s) loads only for an inspect: subject
        ChatMessageAssistant,
        ChatMessageSystem,
        ChatMessageUser,
        ContentImage,
        ContentText,
    )

    msgs: list = [ChatMessageSystem(content=request.system)]
    for t in request.turns:
        if t.role == "assistant":
            msgs.append(ChatMessageAssistant(content=t.text or ""))
            continue
        parts = [ContentText(text=t.text)] if t.text is not None and t.pngs else []
        parts += [ContentImage(image=data_url(p), detail=detail) for p in t.pngs]
        msgs.append(ChatMessageUser(content=parts or t.text or ""))
    return msgs
