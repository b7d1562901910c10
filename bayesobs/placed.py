"""Right/wrong cells of an adaptive sweep (issue 53): their threshold question, and runs at placed levels.

A right/wrong cell (a paradigm with a level: visual search, Tunnel Vision,
Percept-V, choice tables) asks one question per session: is its threshold's
95% interval, the one ``bayesobs psychometric`` reports, wider than
``place_width`` of the session's level range?  Where its trials are
independent (no rolling context, steering or reversal: ``base`` or a blur
condition with ``context = 0``) and its task makes a trial at any level of the
range (visual search, the perception tasks) or draws table rows by level (a
choice table not kept in its order), a round's new runs ask the levels
:func:`bayesobs.placement.choose_levels` places from the rows of the earlier
rounds (logged with distribution ``placed``); the other right/wrong cells keep
the protocol's stimuli and only their runs are adapted.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .errors import BayesobsInputError
from .paradigms import levels
from .placement import choose_levels, posterior, threshold_interval
from .run.ablations import blur_schedule
from .run.plan import session_options
from .scores.psychometric import psychometric_levels
from .seeds import stable_seed
from .trials import CELL_KEYS

RULE = (
    "right/wrong cells: asked again while a session's threshold 95% interval (bayesobs "
    "psychometric) is wider than place_width of its level range; independent trials ask "
    "QUEST+ levels (the expected entropy of the posterior's threshold and width, the lapse a "
    "nuisance: psi-marginal; a batch greedy with sampled outcomes)"
)


def cell(sess) -> tuple:
    """A session run's cell key."""
    return (sess.subject, sess.task.name, sess.modality, sess.cond.name)


def right_wrong(sess) -> bool:
    """Whether a session run's trials are right/wrong trials at a level."""
    return sess.task.paradigm in levels()


def _makes_levels(task) -> bool:
    """Whether a task makes a trial at a level it is asked: set or problem sizes, or table rows by level."""
    if hasattr(task, "row_levels"):
        return not task.in_table_order
    return hasattr(task, "sizes") or hasattr(task, "set_sizes")


def placeable(sess) -> bool:
    """Whether its levels may be placed: independent trials of a task that makes any level."""
    c = sess.cond
    independent = not c.context and c.steering is None and not c.reverse
    return right_wrong(sess) and _makes_levels(sess.task) and independent


def _counts(rows, key: tuple, session: str):
    """``x, k, n, guess`` of one cell's session in the rows (the score's group), or None."""
    mine = np.ones(len(rows), bool)
    for col, value in zip((*CELL_KEYS, "session"), (*key, session), strict=True):
        mine &= rows[col].astype(str).to_numpy() == str(value)
    t = psychometric_levels(rows[mine]) if mine.any() else None
    if t is None or t["x"].nunique() < 3 or len(t) != t["x"].nunique():
        return None
    return t["x"].to_numpy(), t["k"].to_numpy(), t["n"].to_numpy(), t["guess"].to_numpy()


def threshold_questions(rows, sessions, place_width: float) -> dict[tuple, list[str]]:
    """Open threshold questions of every right/wrong cell among ``sessions``, from ``rows``."""
    ranges = {(cell(s), s.session): s.range for s in sessions if right_wrong(s)}
    out: dict[tuple, list[str]] = {}
    for (key, session), (low, high) in sorted(ranges.items(), key=str):
        why = out.setdefault(tuple(map(str, key)), [])
        data = _counts(rows, key, session)
        if data is None:
            why.append(f"threshold of {session} (fewer than 3 levels)")
            continue
        lo, hi = threshold_interval(*posterior(data[0], data[1], data[3], data[2]))
        if hi - lo > place_width * (high - low):
            why.append(f"threshold of {session} ({hi - lo:.3g} wide)")
    return out


def candidates(sess, options: dict) -> np.ndarray:
    """The levels a trial of the session may ask: its table's or task's sizes, or the whole numbers, in its range."""
    low, high = sess.range
    if hasattr(sess.task, "row_levels"):
        return sess.task.row_levels(low, high, options)
    if hasattr(sess.task, "sizes"):
        sizes = sess.task.sizes(sess.task.check_options(options)[0])
        return np.array([s for s in sizes if low <= s <= high], float)
    return np.arange(math.ceil(low), math.floor(high) + 1, dtype=float)


def _rng(sess, key: tuple, trial: int) -> np.random.Generator:
    """The generator of a placed trial: from the run's seed, the cell, the run and the trial."""
    return np.random.default_rng(stable_seed((sess.seed, *key, sess.run, trial)))


def place_runs(todo, before: dict, rows, specs: list[dict]) -> list:
    """``todo`` with the new runs (``run >= before[cell]``) of placeable cells asking placed levels."""
    spec_of = {spec["task"]: spec for spec in specs}
    new: dict[tuple, list] = {}
    for s in todo:
        if before[cell(s)] and s.run >= before[cell(s)] and placeable(s):
            new.setdefault((cell(s), s.session), []).append(s)
    placed = {}
    for (key, session), runs in new.items():
        spec = spec_of[key[1]]
        options = session_options(spec, next(e for e in spec["sessions"] if e["name"] == session))
        data, cand = _counts(rows, key, session), candidates(runs[0], options)
        if data is None or len(cand) < 2:
            continue  # fewer than 3 levels so far, or one level to ask: the protocol's stimuli
        sizes = [sum(not s.task.follows(x) for x in s.stimuli) for s in runs]
        seed = stable_seed((runs[0].seed, *key, "placement"))
        chosen = choose_levels(data[0], data[1], data[3], cand, sum(sizes), data[2], seed=seed)
        for s, part in zip(runs, np.split(chosen, np.cumsum(sizes)[:-1]), strict=True):
            try:
                stimuli = [
                    x
                    for j, level in enumerate(part)
                    for x in s.task.generate(_rng(s, key, j), level, level, 1, options)
                ]
            except BayesobsInputError:  # a level its generator did not reach: the protocol's run
                continue
            blur = blur_schedule(s.cond, len(stimuli), s.options)
            placed[id(s)] = dataclasses.replace(
                s, stimuli=stimuli, blur=blur, distribution="placed"
            )
    return [placed.get(id(s), s) for s in todo]
