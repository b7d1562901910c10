"""Simulated subjects of the Tunnel Vision tasks, as runner subjects (``sim:matcher`` ...)."""

from __future__ import annotations

import io
import re

import numpy as np
from PIL import Image

from ..chat import FatalSubjectError, Reply, Request
from ..seeds import stable_rng
from ..tunnel import hunt, sims
from ..tunnel.common import Trial

TUNNEL_TASKS = ("object_reid", "scavenger_hunt", "circuits")
# kind -> (its task, the library function's name in sims.SIMS)
SPECIALISTS = {
    "matcher": ("object_reid", "matcher"),
    "gist": ("object_reid", "gist"),
    "yes": ("object_reid", "yes"),
    "chainer": ("scavenger_hunt", "chainer"),
    "frequent": ("scavenger_hunt", "frequent"),
    "tracer": ("circuits", "tracer"),
    "colourcue": ("circuits", "colourcue"),
    "nearest": ("circuits", "nearest"),
}
TUNNEL_KINDS = tuple(SPECIALISTS)
_ROW = re.compile(r"^(\d+) \| (\d+) \| (\w+) \| (\w+) \| (\w+ \w+)$", re.M)


def _rng(seed: int, kind: str, meta: dict) -> np.random.Generator:
    ident = (
        seed,
        kind,
        meta.get("task"),
        meta.get("session"),
        meta.get("run"),
        meta.get("condition"),
        meta.get("modality"),
        meta.get("trial"),
    )
    return stable_rng(ident)


def grid_from_text(text: str) -> list[dict] | None:
    """The scavenger-hunt cells of a text table (:func:`bayesobs.tunnel.hunt.grid_text`), or None."""
    cells = [
        {"row": int(r) - 1, "col": int(c) - 1, "shape": s, "colour": col, "label": lab}
        for r, c, s, col, lab in _ROW.findall(text)
    ]
    return cells if len(cells) == hunt.GRID * hunt.GRID else None


def trial_of(request: Request) -> Trial:
    """The trial as the subject sees it: the last turn's images and text (no gold answer)."""
    meta = request.meta
    turn = request.turns[-1]
    text = turn.text or ""
    images = tuple(Image.open(io.BytesIO(p)).convert("RGB") for p in turn.pngs)
    if not images and meta["task"] == "scavenger_hunt":  # text modality: draw the table's grid
        cells = grid_from_text(text)
        if cells is not None:
            images = (hunt.render(cells),)
    return Trial(
        task=meta["task"],
        variant="",
        images=images,
        prompt=text,
        demos=(),
        answer="",
        answer_format="",
        max_tokens=0,
    )


class TunnelSubject:
    """``sim:<kind>`` for a Tunnel Vision specialist (see :data:`SPECIALISTS`)."""

    def __init__(self, kind: str, seed: int = 0):
        if kind not in SPECIALISTS and kind != "random":
            raise ValueError(f"unknown Tunnel Vision subject sim:{kind}")
        self.kind, self.seed = kind, seed
        self.name = f"sim:{kind}"

    def answer(self, request: Request) -> str:
        """The reply to one trial (its own task; a random valid answer on another)."""
        task = request.meta["task"]
        if task not in TUNNEL_TASKS:
            raise FatalSubjectError(
                f"{self.name} answers the Tunnel Vision tasks ({', '.join(TUNNEL_TASKS)}); "
                f"task {task} needs another subject"
            )
        trial = trial_of(request)
        rng = _rng(self.seed, self.kind, request.meta)
        if not trial.images:  # nothing to look at (a text turn it cannot read)
            return sims.random_reply(trial, rng) if task != "circuits" else "{C1}"
        own = SPECIALISTS.get(self.kind)
        if own is None or own[0] != task:  # not its task: a uniformly random valid answer
            return sims.random_reply(trial, rng)
        return sims.SIMS[task][own[1]](trial, rng)

    async def complete(self, request: Request) -> Reply:
        """The subject interface: :meth:`answer` as a :class:`Reply`."""
        return Reply(text=self.answer(request))


def random_reply(request: Request, seed: int = 0) -> str:
    """``sim:random``'s reply to a Tunnel Vision trial (the paradigm's ``random`` hook)."""
    return TunnelSubject("random", seed=seed).answer(request)
