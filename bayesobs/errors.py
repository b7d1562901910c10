"""Exceptions: bad user input, and a subject that cannot answer.

The CLI turns a :class:`BayesobsInputError` into a one-line message and exit
status 2; library users can catch it like any ``ValueError``.  The subject
errors live here (re-exported by :mod:`bayesobs.run.subjects`) so that the CLI can
catch them without importing every simulated subject.
"""


class BayesobsInputError(ValueError):
    """Bad input: a file, column, value or option the user can fix."""


class SubjectError(RuntimeError):
    """A subject could not answer (after retries); the trial is not logged."""


class FatalSubjectError(SubjectError):
    """An error no retry can fix (bad key, unknown model): stop the run."""


# pyproject.toml's extras and the top-level modules each brings: a command that imports one of
# them without its extra installed gets one line naming the extra (the CLI's main)
EXTRAS = {
    "posterior": ("jax", "jaxlib", "numpyro", "arviz", "xarray", "netCDF4"),
    "web": ("starlette", "uvicorn"),
    "llm": ("openai", "anthropic", "httpx2", "httpx"),
    "distributed": ("dask", "distributed", "dask_jobqueue"),
    "inspect": ("inspect_ai",),
}


def missing_extra(exc: ImportError, command: str) -> str | None:
    """The line naming the extra that ``exc``'s missing module belongs to.

    Parameters
    ----------
    exc : ImportError
        The error raised where an optional module was imported.
    command : str
        The CLI command that needed it (named in the line).

    Returns
    -------
    str or None
        ``bayesobs COMMAND needs the [EXTRA] extra ...: pip install ...``, or None when the
        missing module belongs to no extra (the error is then not a missing extra).
    """
    top = (exc.name or getattr(exc.__cause__, "name", None) or "").partition(".")[0]
    extra = next((e for e, modules in EXTRAS.items() if top in modules), None)
    if extra is None:
        return None
    return (
        f"bayesobs {command} needs the [{extra}] extra ({top} is not installed): "
        f"pip install 'bayesobs[{extra}]'"
    )
