"""Simulated Percept-V subjects as runner subjects: ``sim:perceiver``, ``sim:guesser``, ``sim:sloppy``."""

from __future__ import annotations

import numpy as np

from .. import perceptv
from ..chat import FatalSubjectError, Reply, Request
from ..perceptv import sims
from ..perceptv.tasks import size_of_seed
from ..seeds import stable_rng

PERCEPTV_KINDS = tuple(sims.SIMS)


def _rng(seed: int, kind: str, meta: dict) -> np.random.Generator:
    ident = (
        seed,
        kind,
        meta.get("session"),
        meta.get("run"),
        meta.get("condition"),
        meta.get("modality"),
        meta.get("trial"),
        meta.get("perceptv_seed"),
    )
    return stable_rng(ident)


def is_perceptv_request(request: Request) -> bool:
    """Whether the request is a ``percept_v`` trial."""
    return request.meta.get("task") == "percept_v" and "perceptv_seed" in request.meta


def reply(kind: str, request: Request, seed: int) -> str:
    """The reply of the library sim ``kind`` to the request's regenerated trial."""
    meta = request.meta
    s = int(meta["perceptv_seed"])
    trial = perceptv.make_trial(meta["perceptv_domain"], size_of_seed(s), s)
    return sims.answer(kind, trial, _rng(seed, kind, meta))


def random_reply(request: Request, seed: int = 0) -> str:
    """``sim:random``'s reply to a ``percept_v`` trial: the guesser's (the paradigm's ``random`` hook)."""
    return reply("guesser", request, seed)


class PerceptVSubject:
    """``sim:<kind>`` for a Percept-V sim (``perceiver``, ``guesser``, ``sloppy``)."""

    def __init__(self, kind: str, seed: int = 0):
        if kind not in sims.SIMS:
            raise ValueError(f"unknown Percept-V subject sim:{kind}")
        self.kind, self.seed = kind, seed
        self.name = f"sim:{kind}"

    def answer(self, request: Request) -> str:
        """The reply to one ``percept_v`` trial."""
        if not is_perceptv_request(request):
            raise FatalSubjectError(
                f"{self.name} answers the percept_v task only; task {request.meta.get('task')} "
                "needs another subject"
            )
        return reply(self.kind, request, self.seed)

    async def complete(self, request: Request) -> Reply:
        """The subject interface: :meth:`answer` as a :class:`Reply`."""
        return Reply(text=self.answer(request))
