"""Who answers: simulated observers, OpenAI-compatible chat models and Claude (Messages API)."""

from __future__ import annotations

from ...chat import FatalSubjectError, Reply, Request, SubjectError, Turn
from ...errors import BayesobsInputError
from ...hvs.subject import HvsSubject
from ...magnitude.subject import SimSubject
from ...paradigms import sim_kinds
from ...perceptv.subject import PerceptVSubject
from ...search.subject import SearchSubject
from ...tunnel.subject import RandomSubject, TunnelSubject

# the registered paradigms' kinds (bayesobs.paradigms), and random, which answers every paradigm
SIM_KINDS = (*sim_kinds(), "random")


def parse_subject(spec: str) -> tuple[str, str]:
    """``"sim:bayesian"`` -> ``("sim", "bayesian")``, validating the form.

    Parameters
    ----------
    spec : str
        ``KIND:NAME``: ``sim:<kind>`` with a kind of :data:`SIM_KINDS` or of a registered
        paradigm (:mod:`bayesobs.paradigms`),
        ``openai:<model>`` or ``anthropic:<model>``.

    Returns
    -------
    kind, name : str
        The part before the first colon and the part after it.

    Raises
    ------
    BayesobsInputError
        When ``spec`` has no colon or no name, its kind is not ``sim``,
        ``openai`` or ``anthropic``, or a ``sim`` name is not a simulated kind.
    """
    kind, sep, name = spec.partition(":")
    known = (*sim_kinds(), "random")  # with paradigms registered since SIM_KINDS was made
    if not sep or not name or kind not in ("sim", "openai", "anthropic"):
        raise BayesobsInputError(
            f"unknown subject {spec!r}: use sim:<kind> ({', '.join(known)}), openai:<model> "
            "or anthropic:<model>"
        )
    if kind == "sim" and name not in known:
        raise BayesobsInputError(
            f"unknown simulated subject {spec!r}; choose from {', '.join('sim:' + k for k in known)}"
        )
    return kind, name


__all__ = [
    "SIM_KINDS",
    "FatalSubjectError",
    "HvsSubject",
    "PerceptVSubject",
    "RandomSubject",
    "Reply",
    "Request",
    "SearchSubject",
    "SimSubject",
    "SubjectError",
    "TunnelSubject",
    "Turn",
    "parse_subject",
]
