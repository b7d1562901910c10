"""Percept-V (:mod:`bayesobs.perceptv`) as a runner task: ``percept_v``.

The variant is the domain (all 30, :data:`bayesobs.perceptv.ALL_DOMAINS`);
problem sizes 1..20.  A trial is identified by one integer seed and its size
is recoverable from it: ``size = 1 + seed % 20``, so :meth:`PerceptV.questions`
regenerates a logged trial from ``(variant, seed)``.  Prompts, answer formats,
parsers and ``max_tokens`` are the library's.  A reply is right when its parsed
value is in the trial's ``accept`` set (any safe cell in ``cross_and_knots``).
Two-image domains send both images.  Logged per trial besides the perception
columns: ``domain``, ``answer_type``, ``skills`` (``;``-joined) and ``valid``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .. import perceptv
from ..perceptv import parse as pparse
from .base import Stimulus
from .perception import PerceptionTask, Question, png_bytes

N_SIZES = 20


def size_of_seed(seed: int) -> int:
    """The problem size a trial seed encodes: ``1 + seed % 20``."""
    return 1 + int(seed) % N_SIZES


class PerceptV(PerceptionTask):
    """Percept-V: 30 program-generated perception domains, one per variant, sizes 1..20."""

    name = "percept_v"
    variants: ClassVar[tuple[str, ...]] = tuple(perceptv.ALL_DOMAINS)
    default_variant = "counting_circles"
    max_tokens = perceptv.MAX_TOKENS

    def sizes(self, variant):
        """The problem sizes (1..20) of every domain."""
        return tuple(range(1, N_SIZES + 1))

    def parse(self, answer_format, reply):
        """The library's parser for ``answer_format`` (:mod:`bayesobs.perceptv.parse`)."""
        return pparse.parse(answer_format, reply)

    def trial(self, variant: str, seed: int):
        """The library trial of ``variant`` generated from ``seed`` (size from the seed)."""
        return perceptv.make_trial(variant, size_of_seed(seed), int(seed))

    def questions(self, variant, seed):
        """The one question of the trial generated from ``seed``."""
        t = self.trial(variant, seed)
        images = tuple(png_bytes(i) for i in t.images)
        stim = self.stimulus(
            t.size,
            "",
            t.prompt,
            variant=variant,
            seed=int(seed),
            gold=t.answer,
            accept=sorted(t.accept or {t.answer}),
            format=t.answer_format,
            chance=float(perceptv.chance(variant, t.size)),
            columns={
                "domain": variant,
                "answer_type": t.answer_type,
                "skills": ";".join(t.skills),
            },
            n_images=len(images),
            n_demos=0,
        )
        return [Question(stim, images, ())]

    def human_replies(self, stim: Stimulus, text: str) -> tuple[str, ...]:
        """As typed, then in the domain's answer format (``4`` -> ``COUNT:4``)."""
        from ..perceptv.parse import FORMATTERS

        try:
            formatted = FORMATTERS[stim.params["format"]](text.strip())
        except (KeyError, ValueError):  # e.g. too few values for a keyed format
            return (text,)
        return (text, formatted)

    def record(self, stim: Stimulus, reply: str | None, truncated: bool = False) -> dict[str, Any]:
        """Score a reply: right when its parsed value is in the trial's accept set."""
        row = super().record(stim, reply, truncated)
        if row["valid"]:
            correct = int(row["response_value"] in set(stim.params["accept"]))
            row["correct"] = correct
            row["response"] = float(correct)
        return row

    def request_meta(self, stim: Stimulus) -> dict[str, Any]:
        """The trial identity for simulated subjects (domain and seed; never logged or sent)."""
        return {
            "perceptv_domain": stim.params["variant"],
            "perceptv_seed": int(stim.params["seed"]),
        }
