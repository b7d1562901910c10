"""Caps on what one command may plan or read: trials, rows, columns, bootstrap replicates."""

from __future__ import annotations

import os

from .errors import BayesobsInputError

# cap -> (default, environment variable that replaces it, what it counts)
CAPS: dict[str, tuple[int, str, str]] = {
    "trials": (1_000_000, "BAYESOBS_MAX_TRIALS", "trials"),  # one plan: run, sweep job, simulate
    "rows": (10_000_000, "BAYESOBS_MAX_ROWS", "rows"),  # of the trial files one command reads
    "columns": (5_000, "BAYESOBS_MAX_COLUMNS", "columns"),  # of one trial file
    "bootstrap": (100_000, "BAYESOBS_MAX_BOOTSTRAP", "replicates"),  # bootstrap replicates
}


def cap(name: str) -> int:
    """The cap ``name`` of :data:`CAPS`: its environment variable when set, else its default."""
    default, env, _ = CAPS[name]
    text = os.environ.get(env, "").strip()
    if not text:
        return default
    if not text.isdigit():
        raise BayesobsInputError(f"{env} must be a whole number, not {text!r}")
    return int(text)


def check(name: str, value: int, what: str) -> int:
    """Refuse ``value`` above the cap ``name``; else return it."""
    limit = cap(name)
    if value > limit:
        _, env, unit = CAPS[name]
        raise BayesobsInputError(
            f"{what} {value:,} {unit}, over the cap of {limit:,} (set {env} to raise it)"
        )
    return value
