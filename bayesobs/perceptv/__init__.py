"""Percept-V (seed 004; dair-iitd/Percept-V) as a self-contained library."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from . import domains, parse, published
from .common import SIZES, Trial, prompt
from .domains import GENERATORS, PRIORS
from .published import COUNTING_DOMAINS, SKILL_DOMAINS, SKILLS

# answer type and parser of every domain (Table 2 types, Appendix A.1 output formats)
_FORMATS: dict[str, tuple[str, str]] = {
    "change_colour": ("single", "count"),
    "circle_boxes": ("single", "count"),
    "circle_location": ("fixed", "quadrant"),
    "circle_right_triangle": ("single", "yes_no_line"),
    "colours_present": ("fixed", "yes_no_list"),
    "comparing_size": ("list", "colour_words"),
    "count_coloured_circles": ("single", "count"),
    "counting_circles": ("single", "count"),
    "counting_locations": ("fixed", "above_below"),
    "counting_shapes": ("fixed", "shape_counts"),
    "cross_and_knots": ("fixed", "cell_or_none"),
    "graph_counting": ("fixed", "nodes_edges"),
    "grid_path": ("list", "shape_list"),
    "identifying_shapes": ("list", "shape_words"),
    "inside_circles": ("single", "answer_yes_no"),
    "layered_colours": ("list", "colour_list"),
    "layered_shapes": ("list", "shape_list"),
    "list_colours": ("set", "colour_set"),
    "list_shapes": ("set", "shape_set"),
    "locate_circles_colour": ("set", "coords"),
    "locate_circles_shape": ("set", "coords"),
    "match_outline": ("single", "answer_number"),
    "match_shadow": ("single", "answer_number"),
    "maze_solving": ("list", "cell_path"),
    "mirror_image": ("single", "count"),
    "numbered_shapes": ("set", "circle_labels"),
    "sort_circles": ("list", "labels"),
    "sort_lines": ("list", "labels"),
    "vanishing_objects": ("single", "count"),
    "water_image": ("single", "count"),
}
ALL_DOMAINS: tuple[str, ...] = tuple(sorted(_FORMATS))
TWO_IMAGE = frozenset(
    {
        "change_colour",
        "vanishing_objects",
        "match_outline",
        "match_shadow",
        "mirror_image",
        "water_image",
    }
)
# Reply budget: the paper states none (reasoning models, default limits).  Ours: room to reason.
MAX_TOKENS = 4096
IMAGES_PER_SIZE = 10  # Sec. 3: 10 instances per size and domain


@dataclass(frozen=True)
class Domain:
    """Registry entry of one domain."""

    name: str
    generate: Callable  # (size, rng, **options) -> domains.Drawn
    answer_type: str  # single | fixed | list | set
    answer_format: str  # parser name in .parse
    skills: tuple[str, ...]  # Table 1
    n_images: int
    counting: bool  # Sec. 4.3 counting domains
    guess: Callable  # (rng, **options) -> a normalised answer drawn from the answer prior
    chance: Callable  # (size, **options) -> probability that a guess is right

    @property
    def prompt(self) -> str:
        """The domain's prompt."""
        return prompt(self.name)


def _skills(name: str) -> tuple[str, ...]:
    return tuple(s for s in SKILLS if name in SKILL_DOMAINS[s])


DOMAINS: dict[str, Domain] = {
    name: Domain(
        name=name,
        generate=GENERATORS[name],
        answer_type=_FORMATS[name][0],
        answer_format=_FORMATS[name][1],
        skills=_skills(name),
        n_images=2 if name in TWO_IMAGE else 1,
        counting=name in COUNTING_DOMAINS,
        guess=PRIORS[name][0],
        chance=PRIORS[name][1],
    )
    for name in ALL_DOMAINS
    if name in GENERATORS
}
# the 14 domains the spec lists first (all 7 skills, all 4 answer types)
FIRST_14 = (
    "counting_circles",
    "count_coloured_circles",
    "counting_shapes",
    "counting_locations",
    "circle_location",
    "inside_circles",
    "circle_right_triangle",
    "comparing_size",
    "sort_lines",
    "change_colour",
    "vanishing_objects",
    "mirror_image",
    "match_outline",
    "locate_circles_colour",
)


def trial_seed(seed: int, domain: str, size: int, index: int) -> np.random.SeedSequence:
    """The seed of item ``index`` of ``domain`` at ``size`` in a protocol seeded ``seed``."""
    return np.random.SeedSequence([int(seed), ALL_DOMAINS.index(domain), int(size), int(index)])


def make_trial(domain: str, size: int, seed, **options) -> Trial:
    """Generate one trial."""
    try:
        dom = DOMAINS[domain]
    except KeyError:
        raise ValueError(
            f"unknown or unimplemented domain {domain!r}; have {sorted(DOMAINS)}"
        ) from None
    if not 1 <= int(size) <= 20:
        raise ValueError(f"size must be 1..20, got {size}")
    if isinstance(seed, np.random.Generator):
        seed = int(seed.integers(0, 2**63 - 1))
    rng = np.random.default_rng(seed)
    drawn = dom.generate(int(size), rng, **options)
    meta = dict(drawn.meta)
    meta["options"] = dict(options)
    return Trial(
        domain=domain,
        size=int(size),
        images=drawn.images,
        prompt=dom.prompt,
        answer=drawn.answer,
        answer_type=dom.answer_type,
        answer_format=dom.answer_format,
        skills=dom.skills,
        max_tokens=MAX_TOKENS,
        meta=meta,
        accept=drawn.accept,
    )


def protocol(
    domains_: Sequence[str] | None = None,
    sizes: Sequence[int] = tuple(SIZES),
    per_size: int = IMAGES_PER_SIZE,
    seed: int = 0,
) -> Iterator[tuple[str, int, np.random.SeedSequence]]:
    """The items of a stratified protocol."""
    for d in domains_ or tuple(DOMAINS):
        for s in sizes:
            for i in range(per_size):
                yield d, int(s), trial_seed(seed, d, s, i)


def chance(domain: str, size: int, **options) -> float:
    """Probability that the answer-prior guesser is right on ``domain`` at ``size``."""
    return DOMAINS[domain].chance(int(size), **options)


__all__ = [
    "ALL_DOMAINS",
    "DOMAINS",
    "FIRST_14",
    "IMAGES_PER_SIZE",
    "MAX_TOKENS",
    "SIZES",
    "Domain",
    "Trial",
    "chance",
    "domains",
    "make_trial",
    "parse",
    "protocol",
    "published",
    "trial_seed",
]
