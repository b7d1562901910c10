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
