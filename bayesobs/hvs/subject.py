"""Simulated subjects for the HVSBench-style task (``hvs``): ``sim:center``, ``sim:saliency``, ``sim:largest``."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..chat import FatalSubjectError, Reply, Request
from ..hvs import answer
from ..seeds import stable_seed
from ..stimuli import from_png

HVS_KINDS = ("center", "saliency", "largest")


@lru_cache(maxsize=16)
def _image(png: bytes) -> np.ndarray:
    return from_png(png).astype(np.uint8)


def _seed(seed: int, kind: str, meta: dict) -> int:
    ident = (
        seed,
        kind,
        meta["session"],
        meta["run"],
        meta["condition"],
        meta["modality"],
        meta["trial"],
    )
    return stable_seed(ident, nbytes=4)


def is_hvs_request(request: Request) -> bool:
    """Whether the request is an HVS trial (the runner passed the question record)."""
    return "question" in request.meta


def reply(kind: str, request: Request, seed: int = 0) -> str:
    """A simulated subject's reply to the HVS question of ``request``."""
    meta = request.meta
    png = request.turns[-1].png
    image = _image(png) if png is not None and kind != "random" else None
    return answer(
        kind,
        meta["question"],
        image=image,
        seed=_seed(seed, kind, meta),
        context=meta.get("hvs_context"),
    )


def random_reply(request: Request, seed: int = 0) -> str:
    """``sim:random``'s reply to an HVS question (the paradigm's ``random`` hook)."""
    return reply("random", request, seed)


class HvsSubject:
    """``sim:center``, ``sim:saliency`` or ``sim:largest`` (HVS questions only)."""

    def __init__(self, kind: str, seed: int = 0):
        if kind not in HVS_KINDS:
            raise ValueError(
                f"unknown simulated HVS subject sim:{kind}; choose from "
                f"{', '.join('sim:' + k for k in HVS_KINDS)}"
            )
        self.kind, self.seed = kind, seed
        self.name = f"sim:{kind}"

    async def complete(self, request: Request) -> Reply:
        """Answer one HVS question from the image in the request."""
        if not is_hvs_request(request):
            raise FatalSubjectError(
                f"{self.name} answers HVSBench-style questions (task hvs) only; task "
                f"{request.meta.get('task')} needs another subject (e.g. sim:bayesian, sim:parallel)"
            )
        return Reply(text=reply(self.kind, request, self.seed))
