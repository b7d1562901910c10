"""Visual search (paradigm ``search``): its tasks, simulated searchers and analysis in one folder."""

from __future__ import annotations

from importlib import import_module


def __getattr__(name: str):
    """The public names of :mod:`bayesobs.search.scores`, loaded on first use (PEP 562)."""
    if name.startswith("_"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    scores = import_module(".scores", __name__)  # start-up time: scipy.stats only when asked
    try:
        return getattr(scores, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
