"""bayesobs: Bayesian psychophysics of language models and people."""

from importlib.metadata import PackageNotFoundError, version

from .api import evidence_table, fit
from .errors import BayesobsInputError
from .evidence import factor_evidence
from .fitting import FitBatch, fit_batch, fits_table
from .rescore import rescore_folder
from .runner import sweep
from .scores import Scores, score
from .trials import normalize_trials, read_trials, write_trials

try:
    __version__ = version("bayesobs")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+unknown"

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
