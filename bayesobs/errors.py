"""Exceptions raised for bad user input.

The CLI turns a :class:`BayesobsInputError` into a one-line message and exit
status 2; library users can catch it like any ``ValueError``.
"""


class BayesobsInputError(ValueError):
    """Bad input: a file, column, value or option the user can fix."""
