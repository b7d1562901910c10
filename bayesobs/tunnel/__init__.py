"""Tunnel Vision (Berman et al. 2025, princeton-vl/vlmtunnel) as a self-contained library."""

from . import circuits, hunt, parse, reid
from .common import Demo, Trial
from .parse import PARSERS
from .published import REFERENCES, TABLE2, Reference, chance, references
from .sims import SIMS, answer

GENERATORS = {
    "object_reid": reid.make_trial,
    "scavenger_hunt": hunt.make_trial,
    "circuits": circuits.make_trial,
}
VARIANTS = {
    "object_reid": reid.VARIANTS,
    "scavenger_hunt": hunt.VARIANTS,
    "circuits": circuits.COLOUR_MODES,
}
# trials per variant in the paper (decomposed hunt: Table 1)
PROTOCOL = {
    "object_reid": {"standard": 200, "unconnected": 125, "pixel_perfect": 125},
    "scavenger_hunt": {"L2": 125, "L3": 200, "L4": 125, "decomposed": 75},
    "circuits": {"standard": 200, "single": 125, "unique": 125},
}


def make_trial(task: str, variant: str, rng_or_seed, **kwargs) -> Trial:
    """Generate one trial of ``task`` (``object_reid``, ``scavenger_hunt``, ``circuits``)."""
    try:
        gen = GENERATORS[task]
    except KeyError:
        raise ValueError(f"unknown task {task!r}; expected one of {sorted(GENERATORS)}") from None
    return gen(variant, rng_or_seed, **kwargs)


__all__ = [
    "GENERATORS",
    "PARSERS",
    "PROTOCOL",
    "REFERENCES",
    "SIMS",
    "TABLE2",
    "VARIANTS",
    "Demo",
    "Reference",
    "Trial",
    "answer",
    "chance",
    "circuits",
    "hunt",
    "make_trial",
    "parse",
    "references",
    "reid",
]
