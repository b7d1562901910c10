"""Percept-V (:mod:`bayesobs.perceptv`) as a runner task: ``percept_v``."""

from __future__ import annotations

import re
from typing import Any, ClassVar

from .. import perceptv
from ..perceptv import parse as pparse
from ..perceptv.parse import FORMATTERS
from ..perceptv.prompts import BULLETS
from ..stimuli.base import Stimulus
from ..stimuli.perception import PerceptionTask, Question, png_bytes

N_SIZES = 20
# a prompt bullet about the model's output format (dropped for a person: HOW_TO_ANSWER instead)
_FORMAT_BULLET = re.compile(r"\b(output|ouput|format)\b|[A-Z]{3,}\s*:|for example", re.I)
# how a person types each answer format: the bare values the task's formatter wraps
HOW_TO_ANSWER = {
    "count": "Type the number, e.g. 3.",
    "answer_number": "Type the number, e.g. 2.",
    "answer_yes_no": "Type yes or no, e.g. yes.",
    "yes_no_line": "Type yes or no, e.g. no.",
    "quadrant": "Type the quadrant number, then the count, separated by a space, e.g. 2 5.",
    "above_below": "Type the number above, then the number below, separated by a space, e.g. 3 2.",
    "shape_counts": "Type the numbers of circles, triangles and squares, separated by spaces, e.g. 2 0 1.",
    "colour_words": "Type one colour per row, from the top row down, separated by spaces, e.g. blue green blue.",
    "labels": "Type the numbers in order, separated by spaces, e.g. 2 3 1.",
    "coords": "Type each cell as (row,column), separated by spaces, e.g. (2,4) (4,0).",
    "shape_words": "Type one shape per row, from the top row down, separated by spaces, e.g. circle triangle circle.",
    "cell_or_none": "Type one safe cell as (row,column), or none if there is no safe cell, e.g. (0,2).",
    "colour_list": "Type the colours from the inside out, separated by spaces, e.g. blue ivory red.",
    "yes_no_list": "Type yes or no for each colour of the list, in its order, separated by spaces, e.g. yes no no yes no no no no no no no no no no no no no no no no.",
    "shape_set": "Type the shape names, separated by spaces, e.g. circle square.",
    "colour_set": "Type the colour names, separated by spaces, e.g. red blue.",
    "nodes_edges": "Type the number of nodes, then the number of edges, separated by a space, e.g. 5 4.",
    "cell_path": "Type the cells in order, separated by spaces, from s to e, e.g. s 1 2 e.",
    "shape_list": "Type the shape names in order, separated by spaces, e.g. circle square square.",
    "circle_labels": "Type the numbers on the circles, separated by spaces, e.g. 2 3 5.",
}


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

    def seed_size(self, variant, seed):
        """The size a seed encodes (:func:`size_of_seed`): known before generating."""
        return size_of_seed(seed)

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

    person_task = (
        "answer short questions about simple pictures (counting, comparing, and naming shapes "
        "and colours)"
    )

    def human_question(self, stim: Stimulus) -> str:
        """The domain's question without the model's output format, then how to type the answer."""
        keep = [b.strip() for b in BULLETS[stim.params["variant"]] if not _FORMAT_BULLET.search(b)]
        said = " ".join(b if b.endswith((".", "?")) else b + "." for b in keep)
        return f"{said} {HOW_TO_ANSWER[stim.params['format']]}"

    def human_replies(self, stim: Stimulus, text: str) -> tuple[str, ...]:
        """As typed, then in the domain's answer format (``4`` -> ``COUNT:4``)."""
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
