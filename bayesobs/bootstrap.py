"""Session-run bootstrap (METHOD §7).

Session runs are resampled with replacement within each cell; trial order
inside a run is never touched.  Draws are made per ``(subject, task,
condition)`` group over the sorted union of that group's ``(session, run)``
keys, so every modality of the group gets the *same* runs (paired analyses),
while base and ablation cells are drawn independently.  Each group's random
stream is derived from ``seed`` and the group's key alone, so the draws for a
group do not depend on which other cells are in the table.
"""

from __future__ import annotations

import hashlib
import warnings

import numpy as np
import pandas as pd

GROUP_KEYS: tuple[str, ...] = ("subject", "task", "condition")


def group_rng(seed: int, key: tuple) -> np.random.Generator:
    """A generator seeded by ``seed`` and a stable hash of ``key``."""
    digest = hashlib.sha256(repr(tuple(str(k) for k in key)).encode()).digest()
    words = np.frombuffer(digest[:16], dtype=np.uint32).tolist()
    return np.random.default_rng(np.random.SeedSequence([int(seed), *words]))


def draw_runs(n_runs: int, B: int, seed: int, key: tuple) -> np.ndarray:
    """``(B, n_runs)`` indices of the runs drawn in each replicate."""
    if B <= 0:
        return np.empty((0, n_runs), dtype=np.int64)
    return group_rng(seed, key).integers(0, n_runs, size=(B, n_runs))


def run_draws(trials: pd.DataFrame, B: int, seed: int = 0) -> dict[tuple, tuple[list, np.ndarray]]:
    """Draws for every ``(subject, task, condition)`` group of a trial table.

    Returns
    -------
    dict
        ``{(subject, task, condition): (run_keys, draws)}`` where ``run_keys``
        is the sorted list of ``(session, run)`` keys and ``draws`` is a
        ``(B, len(run_keys))`` array of indices into it.
    """
    keys = trials[list(GROUP_KEYS) + ["session", "run"]].drop_duplicates()
    out = {}
    for gkey, g in keys.groupby(list(GROUP_KEYS), sort=True):
        run_keys = sorted(
            set(zip(g["session"], g["run"], strict=True)), key=lambda k: (str(k[0]), k[1])
        )
        out[tuple(gkey)] = (run_keys, draw_runs(len(run_keys), B, seed, tuple(gkey)))
    return out


def percentile_interval(
    values: np.ndarray, axis: int = -1
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bootstrap mean and 68% percentile interval (16th, 84th), ignoring NaN.

    Where every replicate is NaN the three results are NaN (no warning).
    """
    values = np.asarray(values, dtype=float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices -> NaN
        mean = np.nanmean(values, axis=axis)
        lo, hi = np.nanpercentile(values, [16, 84], axis=axis)
    return mean, lo, hi
