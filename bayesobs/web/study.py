"""What ``serve`` and the jsPsych export share: block order, counterbalancing, duration.

A participant's trials come in blocks, one per session run of the plan
(session type x run x condition x modality).  Giving everyone the same block
order confounds modality and session range with time on task, so by default
the order is counterbalanced with a Latin square: participant ``k`` gets row
``k mod (M x S)``, whose modality order is the spec's rotated by ``row mod M``
and whose session-type order is rotated by ``(row // M) mod S`` (M modalities,
S session types).  Across every ``M x S`` consecutive participants each
modality and each session type is in each position equally often.  Row 0 is
the spec's order (``--order fixed`` gives it to everyone).
"""

from __future__ import annotations

import math

from ..errors import BayesobsInputError

ORDERS = ("counterbalanced", "fixed")
# Seconds per answer assumed before any participant has answered: a typed
# estimate after looking at one stimulus.  Once 20 answers are logged, ``serve``
# uses their median instead; ``--minutes`` states the duration outright.
SECONDS_PER_TRIAL_GUESS = 8.0


def _rotate(items: list, k: int) -> list:
    k %= max(1, len(items))
    return items[k:] + items[:k]


def _unique(values) -> list:
    return list(dict.fromkeys(values))


def latin_rows(sessions) -> int:
    """Rows of the Latin square of a plan: modalities x session types."""
    return len(_unique(s.modality for s in sessions)) * len(_unique(s.session for s in sessions))


def block_order(sessions: list, row: int) -> tuple[list, dict]:
    """The plan's session runs in Latin-square row ``row`` and a record of that order.

    Blocks keep the plan's nesting (session type, run, condition, modality);
    only the order of session types and of modalities changes.  Row 0 keeps
    the plan's order.
    """
    mods = _unique(s.modality for s in sessions)
    types = _unique(s.session for s in sessions)
    row = int(row) % (len(mods) * len(types))
    mod_order = _rotate(mods, row % len(mods))
    type_order = _rotate(types, row // len(mods))
    plan_index = {id(s): i for i, s in enumerate(sessions)}

    def key(s):
        return (
            type_order.index(s.session),
            s.run,
            plan_index[id(s)] // len(mods),
            mod_order.index(s.modality),
        )

    ordered = sorted(sessions, key=key)
    record = {"counterbalance": row, "session_order": type_order, "modality_order": mod_order}
    return ordered, record


def check_order(order: str) -> str:
    """``order`` if it is one of :data:`ORDERS`, else a one-line error."""
    if order not in ORDERS:
        raise BayesobsInputError(f"--order must be one of {', '.join(ORDERS)}, not {order!r}")
    return order


def estimate_minutes(n_trials: int, seconds_per_trial: float | None = None) -> int:
    """Minutes a participant needs for ``n_trials`` answers (rounded up to 5 above 10)."""
    s = SECONDS_PER_TRIAL_GUESS if seconds_per_trial is None else float(seconds_per_trial)
    minutes = max(1, math.ceil(n_trials * s / 60))
    return minutes if minutes <= 10 else 5 * math.ceil(minutes / 5)


def check_minutes(minutes) -> float | None:
    """A stated study duration in minutes (``None``: estimate it), checked to be in (0, 1440]."""
    if minutes is None:
        return None
    if not (math.isfinite(minutes) and 0 < minutes <= 24 * 60):
        raise BayesobsInputError(f"--minutes must be between 0 and 1440, not {minutes}")
    return minutes
