"""bayesobs: Bayesian psychophysics of language models and people."""

from importlib import import_module

from .errors import BayesobsInputError

# public name -> (module, attribute), imported on first use
_LAZY = {
    "evidence_table": ("api", "evidence_table"),
    "fit": ("api", "fit"),
    "factor_evidence": ("scores.evidence", "factor_evidence"),
    "FitBatch": ("fits.fitresults", "FitBatch"),
    "fit_batch": ("fits.fitting", "fit_batch"),
    "fits_table": ("fits.fitresults", "fits_table"),
    "Scores": ("scores", "Scores"),
    "score": ("scores", "score"),
    "normalize_trials": ("trials", "normalize_trials"),
    "read_trials": ("trials", "read_trials"),
    "write_trials": ("trials", "write_trials"),
    "sweep": ("run.runner", "sweep"),
    "rescore_folder": ("run.rescore", "rescore_folder"),
}
# attribute -> module, loaded on first use (runner, posterior ... keep their short names)
_SUBMODULES = {
    "api": "api",
    "report": "report",
    "posterior": "fits.posterior",
    "hvs": "hvs",
    "tunnel": "tunnel",
    "runner": "run.runner",
    "observers": "fits.observers",
    "search": "search",
    "rescore": "run.rescore",
}


def _version() -> str:
    # importlib.metadata is imported here: it costs ~0.1 s of start-up, wanted only by --version
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bayesobs")
    except PackageNotFoundError:  # running from a source tree without install
        return "0.0.0+unknown"


def __getattr__(name: str):
    """Load the public names and the heavy parts on first use (PEP 562)."""
    if name == "__version__":
        value = globals()["__version__"] = _version()
        return value
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(import_module(f".{module}", __name__), attr)
        globals()[name] = value  # later look-ups skip this function
        return value
    if name in _SUBMODULES:
        return import_module(f".{_SUBMODULES[name]}", __name__)
    raise AttributeError(f"module 'bayesobs' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names, loaded or not."""
    return sorted({*globals(), *_LAZY, *_SUBMODULES, "__version__"})


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
