"""Simulated subjects of right/wrong tables: a psychometric observer and a random chooser."""

from __future__ import annotations

import math

from ..chat import FatalSubjectError, Reply, Request
from ..seeds import stable_rng

LAPSE = 0.02  # sim:chooser's lapse rate
SPREAD = 2 * math.log(19)  # a logistic's z from F = 0.05 to F = 0.95


def p_right(level: float, levels: tuple[float, float], guess: float) -> float:
    """sim:chooser's chance of a right answer: threshold mid-levels, width the levels' span."""
    lo, hi = levels
    width = (hi - lo) or 1.0
    f = 1 / (1 + math.exp(SPREAD * (level - (lo + hi) / 2) / width))  # falls as levels rise
    return guess + (1 - guess - LAPSE) * f


class ChoiceSubject:
    """``sim:chooser``: right with :func:`p_right` of the trial's level, else a wrong choice."""

    def __init__(self, kind: str, seed: int = 0):
        self.kind, self.seed, self.name = kind, seed, f"sim:{kind}"

    async def complete(self, request: Request) -> Reply:
        """Answer one trial of a right/wrong table."""
        m = request.meta
        if "choices" not in m or "levels" not in m:
            raise FatalSubjectError(f"{self.name} answers right/wrong tables (task table_choice)")
        rng = stable_rng(
            (self.seed, m["session"], m["run"], m["condition"], m["modality"], m["trial"])
        )
        if rng.random() < p_right(m["level"], tuple(m["levels"]), m["chance"]):
            return Reply(text=m["gold"])
        wrong = [c for c in m["choices"] if c != m["gold"]]
        return Reply(text=wrong[int(rng.integers(len(wrong)))])


def random_reply(request: Request, seed: int = 0) -> str:
    """``sim:random``'s reply to a right/wrong table's trial: one of the choices at random."""
    m = request.meta
    rng = stable_rng((seed, "random", m["session"], m["run"], m["trial"]))
    return m["choices"][int(rng.integers(len(m["choices"])))]
