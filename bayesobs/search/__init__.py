"""Visual search (paradigm ``search``): its tasks, simulated searchers and analysis in one folder.

:mod:`bayesobs.search.tasks` draws the three search tasks (circle sizes, a 2
among 5s, lighting priors); :mod:`bayesobs.search.subject` holds the simulated
searchers; :mod:`bayesobs.search.scores` scores their trials
(``search.csv``, ``search_accuracy.csv``, ``search_bias.csv``).  The terminal
summary and the report section sit where their layer's helpers are
(``bayesobs.leaderboard.search_text``, ``bayesobs.report.html.search_sections``);
the registry (:mod:`bayesobs.paradigms`) names each part.

The analysis' names are also reached from here (``bayesobs.search.search_scores``),
loaded on first use.
"""

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
