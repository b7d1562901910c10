"""What ``serve`` and the jsPsych export share: block order, counterbalancing, duration."""

from __future__ import annotations

import math

import numpy as np

from ..errors import BayesobsInputError

ORDERS = ("counterbalanced", "fixed")
# Seconds per answer assumed before any participant has answered, when the task
# states none (``Task.seconds_per_answer``: 8 s for a typed estimate after one
# look, 6 s for a tap, 15-30 s for a perception question).  Once 3 participants
# (not pilots) have finished, ``serve`` uses their median answer time instead;
# ``--minutes`` states the duration.
SECONDS_PER_TRIAL_GUESS = 8.0
# Catch trials (``--catch-every N``).  A typed-answer task's catch trial states
# its answer ("please type 0.3"): ``correct`` when the typed number is within
# CATCH_TOLERANCE of the answer range's width of it.  A tapped task's catch
# trial shows one item alone: ``correct`` when the tap is within
# CATCH_TAP_RADII of the item's radius of its centre.
CATCH_TOLERANCE = 0.01
CATCH_TAP_RADII = 2.0
CATCH_RANGE = (0.0, 10.0)  # answers of a catch trial on a task whose answers are not numbers
# a worded task's catch trial asks for one of these words (never an answer of a task)
CATCH_WORDS = ("orange", "river", "pencil", "garden", "window", "ladder", "violin", "carpet")
CATCH_SEED = 104729  # added to the spec's seed: the catch trials' own random stream


def _rotate(items: list, k: int) -> list:
    k %= max(1, len(items))
    return items[k:] + items[:k]


def _unique(values) -> list:
    return list(dict.fromkeys(values))


def latin_rows(sessions) -> int:
    """Rows of the Latin square of a plan: modalities x session types."""
    return len(_unique(s.modality for s in sessions)) * len(_unique(s.session for s in sessions))


def block_order(sessions: list, row: int) -> tuple[list, dict]:
    """The plan's session runs in Latin-square row ``row`` and a record of that order."""
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


def minutes_text(minutes: int) -> str:
    """``"about 1 minute"``, ``"about 5 minutes"``: the consent page's duration."""
    return f"about {minutes} minute{'' if minutes == 1 else 's'}"


def check_catch_every(n) -> int | None:
    """``--catch-every N``: None (no catch trials) or a whole number of at least 1."""
    if n is None:
        return None
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise BayesobsInputError(f"--catch-every must be a whole number of at least 1, not {n!r}")
    return n


def catch_plan(n_trials: int, every: int | None) -> list[tuple[str, int]]:
    """A participant's answers in order: ``("trial", i)``, with ``("catch", k)`` after every ``every``."""
    out: list[tuple[str, int]] = []
    k = 0
    for i in range(n_trials):
        out.append(("trial", i))
        if every and (i + 1) % every == 0 and i + 1 < n_trials:
            out.append(("catch", k))
            k += 1
    return out


def tap_catch(task, seed: int, k: int):
    """Catch trial ``k`` of a tapped task: the task's own display with one item alone."""
    rng = np.random.default_rng([int(seed) + CATCH_SEED, int(k)])
    return task.generate(rng, 0.0, 0.0, 1, {"answer": "coords"})[0]


def catch_value(seed: int, k: int, answer_range) -> tuple[float, float]:
    """The number catch trial ``k`` asks a person to type, and the tolerance of a right answer."""
    lo, hi = map(float, answer_range or CATCH_RANGE)
    rng = np.random.default_rng([int(seed) + CATCH_SEED, int(k)])
    value = lo + (hi - lo) * int(rng.integers(1, 10)) / 10
    value = round(value, 1) if hi - lo <= 1 else float(round(value))
    return value, CATCH_TOLERANCE * (hi - lo)


def check_minutes(minutes) -> float | None:
    """A stated study duration in minutes (``None``: estimate it), checked to be in (0, 1440]."""
    if minutes is None:
        return None
    if not (math.isfinite(minutes) and 0 < minutes <= 24 * 60):
        raise BayesobsInputError(f"--minutes must be between 0 and 1440, not {minutes}")
    return minutes
