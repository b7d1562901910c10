"""Simulated subjects for the HVSBench-style task (``hvs``): ``sim:center``, ``sim:saliency``, ``sim:largest``.

They answer through :func:`bayesobs.hvs.answer` (its docstring describes each
strategy), looking at the image in the request (the rendered PNG, so a
blurred image is what they see) and reading the question record the runner
passes in ``meta["question"]`` (the task's :meth:`request_meta`; an
API subject never gets it).  ``sim:random`` answers HVS questions
through :func:`random_reply`, drawing counts and scanpaths from
``meta["hvs_context"]`` (the question set's :func:`bayesobs.hvs.sim_context`),
so its expected scores are :func:`bayesobs.hvs.random_baseline_scores`.

Draws are seeded by the subject seed and the trial identity (a resumed run
answers as an uninterrupted one).
"""

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
    """Whether the request is an HVS trial (the runner passed the question record).

    Parameters
    ----------
    request : Request
        The trial's request.

    Returns
    -------
    bool
        True when ``request.meta`` holds a ``question``.
    """
    return "question" in request.meta


def reply(kind: str, request: Request, seed: int = 0) -> str:
    """A simulated subject's reply to the HVS question of ``request``.

    Parameters
    ----------
    kind : str
        The strategy: one of :data:`HVS_KINDS`, or ``"random"`` (which draws
        from ``meta["hvs_context"]`` and does not look at the image).
    request : Request
        An HVS trial's request: its last turn's PNG is the image, its meta
        holds the ``question`` and the trial identity.
    seed : int
        The subject seed; the draw is seeded by it, ``kind`` and the trial
        identity.

    Returns
    -------
    str
        The reply text, as :func:`bayesobs.hvs.answer` words it.
    """
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
    """``sim:random``'s reply to an HVS question (the paradigm's ``random`` hook).

    Parameters
    ----------
    request : Request
        An HVS trial's request.
    seed : int
        The subject seed.

    Returns
    -------
    str
        :func:`reply` of kind ``"random"``.
    """
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
        """Answer one HVS question from the image in the request.

        Parameters
        ----------
        request : Request
            The trial's request.

        Returns
        -------
        Reply
            The reply text (no usage, no latency).

        Raises
        ------
        FatalSubjectError
            When the request is not an HVS trial.
        """
        if not is_hvs_request(request):
            raise FatalSubjectError(
                f"{self.name} answers HVSBench-style questions (task hvs) only; task "
                f"{request.meta.get('task')} needs another subject (e.g. sim:bayesian, sim:parallel)"
            )
        return Reply(text=reply(self.kind, request, self.seed))
