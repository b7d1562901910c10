"""bayesobs: Bayesian psychophysics of language models and people.

``import bayesobs`` loads the analysis half only (trial table, fits,
evidence, scores).  The task runner (:func:`sweep`), the report, the
posterior fits and the perception libraries are loaded on first use:
``bayesobs.sweep(...)``, ``bayesobs.report.build_report(...)``,
``bayesobs.hvs.standardise(...)`` work without importing them first.
"""

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version

from .api import evidence_table, fit
from .errors import BayesobsInputError
from .fits.fitresults import FitBatch, fits_table
from .fits.fitting import fit_batch
from .scores import Scores, score
from .scores.evidence import factor_evidence
from .trials import normalize_trials, read_trials, write_trials

try:
    __version__ = version("bayesobs")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+unknown"

_LAZY = {"sweep": ("run.runner", "sweep"), "rescore_folder": ("run.rescore", "rescore_folder")}
# attribute -> module, loaded on first use (runner, posterior ... keep their short names)
_SUBMODULES = {
    "report": "report",
    "posterior": "fits.posterior",
    "hvs": "hvs",
    "tunnel": "tunnel",
    "runner": "run.runner",
    "observers": "fits.observers",
    "search": "scores.search",
    "rescore": "run.rescore",
}


def __getattr__(name: str):
    """Load the runner, the report and the other heavy parts on first use (PEP 562)."""
    if name in _LAZY:
        module, attr = _LAZY[name]
        return getattr(import_module(f".{module}", __name__), attr)
    if name in _SUBMODULES:
        return import_module(f".{_SUBMODULES[name]}", __name__)
    raise AttributeError(f"module 'bayesobs' has no attribute {name!r}")


__all__ = [
    "BayesobsInputError",
    "FitBatch",
    "Scores",
    "__version__",
    "evidence_table",
    "factor_evidence",
    "fit",
    "fit_batch",
    "fits_table",
    "normalize_trials",
    "read_trials",
    "rescore_folder",
    "score",
    "sweep",
    "write_trials",
]
