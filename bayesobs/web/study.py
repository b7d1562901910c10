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
    """Rows of the Latin square of a plan: modalities x session types.

    Parameters
    ----------
    sessions : list of Session
        The planned session runs.

    Returns
    -------
    int
        The number of distinct modalities times distinct session types.
    """
    return len(_unique(s.modality for s in sessions)) * len(_unique(s.session for s in sessions))


def block_order(sessions: list, row: int) -> tuple[list, dict]:
    """The plan's session runs in Latin-square row ``row`` and a record of that order.

    Blocks keep the plan's nesting (session type, run, condition, modality);
    only the order of session types and of modalities changes.  Row 0 keeps
    the plan's order.

    Parameters
    ----------
    sessions : list of Session
        The planned session runs, in the plan's order.
    row : int
        The Latin-square row (taken modulo :func:`latin_rows`).

    Returns
    -------
    ordered : list of Session
        The session runs in the row's order.
    record : dict
        ``counterbalance`` (the row), ``session_order`` and
        ``modality_order``.
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
    """``order`` if it is one of :data:`ORDERS`, else a one-line error.

    Parameters
    ----------
    order : str
        The ``--order`` option.

    Returns
    -------
    str
        ``order``.

    Raises
    ------
    BayesobsInputError
        When it is not one of :data:`ORDERS`.
    """
    if order not in ORDERS:
        raise BayesobsInputError(f"--order must be one of {', '.join(ORDERS)}, not {order!r}")
    return order


def estimate_minutes(n_trials: int, seconds_per_trial: float | None = None) -> int:
    """Minutes a participant needs for ``n_trials`` answers (rounded up to 5 above 10).

    Parameters
    ----------
    n_trials : int
        Answers a participant gives (catch trials included).
    seconds_per_trial : float, optional
        Seconds per answer (default :data:`SECONDS_PER_TRIAL_GUESS`).

    Returns
    -------
    int
        Whole minutes, at least 1; above 10 rounded up to a multiple of 5.
    """
    s = SECONDS_PER_TRIAL_GUESS if seconds_per_trial is None else float(seconds_per_trial)
    minutes = max(1, math.ceil(n_trials * s / 60))
    return minutes if minutes <= 10 else 5 * math.ceil(minutes / 5)


def minutes_text(minutes: int) -> str:
    """``"about 1 minute"``, ``"about 5 minutes"``: the consent page's duration.

    Parameters
    ----------
    minutes : int
        The duration.

    Returns
    -------
    str
        ``about N minute(s)``.
    """
    return f"about {minutes} minute{'' if minutes == 1 else 's'}"


def check_catch_every(n) -> int | None:
    """``--catch-every N``: None (no catch trials) or a whole number of at least 1.

    Parameters
    ----------
    n : int or None
        The option's value.

    Returns
    -------
    int or None
        ``n``.

    Raises
    ------
    BayesobsInputError
        When ``n`` is not a whole number >= 1 (a bool is not).
    """
    if n is None:
        return None
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise BayesobsInputError(f"--catch-every must be a whole number of at least 1, not {n!r}")
    return n


def catch_plan(n_trials: int, every: int | None) -> list[tuple[str, int]]:
    """A participant's answers in order: ``("trial", i)``, with ``("catch", k)`` after every ``every``.

    A catch trial follows trials ``every``, ``2 every``, ... but never the
    last trial (the study ends on a trial of the task).

    Parameters
    ----------
    n_trials : int
        The participant's task trials.
    every : int or None
        A catch trial after every ``every`` trials; None or 0: none.

    Returns
    -------
    list of tuple
        ``("trial", i)`` for each task trial and ``("catch", k)`` for each
        catch trial, numbered from 0, in the order asked.
    """
    out: list[tuple[str, int]] = []
    k = 0
    for i in range(n_trials):
        out.append(("trial", i))
        if every and (i + 1) % every == 0 and i + 1 < n_trials:
            out.append(("catch", k))
            k += 1
    return out


def catch_value(seed: int, k: int, answer_range) -> tuple[float, float]:
    """The number catch trial ``k`` asks a person to type, and the tolerance of a right answer.

    A round value (a tenth of the range, or a whole number on wider ranges)
    between 10 % and 90 % of ``answer_range`` (:data:`CATCH_RANGE` for tasks
    whose answers are not numbers), drawn from the spec's ``seed``; the
    tolerance is :data:`CATCH_TOLERANCE` of the range's width.

    Parameters
    ----------
    seed : int
        The spec's seed (:data:`CATCH_SEED` is added).
    k : int
        The catch trial's number.
    answer_range : tuple of float or None
        The task's answer range, (low, high); None for tasks whose answers
        are not numbers.

    Returns
    -------
    value : float
        The number to type.
    tolerance : float
        How far from it a typed answer is still right.
    """
    lo, hi = map(float, answer_range or CATCH_RANGE)
    rng = np.random.default_rng([int(seed) + CATCH_SEED, int(k)])
    value = lo + (hi - lo) * int(rng.integers(1, 10)) / 10
    value = round(value, 1) if hi - lo <= 1 else float(round(value))
    return value, CATCH_TOLERANCE * (hi - lo)


def check_minutes(minutes) -> float | None:
    """A stated study duration in minutes (``None``: estimate it), checked to be in (0, 1440].

    Parameters
    ----------
    minutes : float or None
        The ``--minutes`` option.

    Returns
    -------
    float or None
        ``minutes``.

    Raises
    ------
    BayesobsInputError
        When it is not finite or not in (0, 1440].
    """
    if minutes is None:
        return None
    if not (math.isfinite(minutes) and 0 < minutes <= 24 * 60):
        raise BayesobsInputError(f"--minutes must be between 0 and 1440, not {minutes}")
    return minutes
