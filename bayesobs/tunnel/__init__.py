"""Tunnel Vision (Berman et al. 2025, princeton-vl/vlmtunnel) as a self-contained library.

Three nonlocal visual-reasoning tasks, each a pure seeded generator
returning a :class:`~bayesobs.tunnel.common.Trial` (images, the paper's
prompt, few-shot demonstrations, gold answer, answer format, max_tokens and
per-trial metadata):

* :mod:`.reid` -- Object Re-Identification (``standard`` / ``unconnected`` /
  ``pixel_perfect``), with the authors' two generator bugs fixed;
* :mod:`.hunt` -- Visual Scavenger Hunt (``L2`` / ``L3`` / ``L4`` /
  ``decomposed``), plus a text rendering of the grid (extension);
* :mod:`.circuits` -- Circuit Connections (``standard`` / ``single`` /
  ``unique`` wire colours).

:mod:`.parse` reads replies with the paper's extraction rules, :mod:`.sims`
holds simulated subjects that look at the pixels, and :mod:`.published`
the paper's reference numbers with their sources.  Runner, CLI and score
integration are not part of this package.
"""

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
    """Generate one trial of ``task`` (``object_reid``, ``scavenger_hunt``, ``circuits``).

    Parameters
    ----------
    task : str
        ``"object_reid"``, ``"scavenger_hunt"`` or ``"circuits"`` (a key of
        :data:`GENERATORS`).
    variant : str
        The task's variant (see :data:`VARIANTS`).
    rng_or_seed : int or numpy.random.Generator
        Seed, or a generator to draw one from.
    **kwargs
        Passed on to the task's generator (``with_demos`` for every task,
        ``positive`` for ``object_reid``).

    Returns
    -------
    Trial
        The generated trial.

    Raises
    ------
    ValueError
        If ``task`` is not one of the three tasks (the generator raises it too
        for an unknown ``variant``).
    """
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
