"""Session-run bootstrap (METHOD §7).

Session runs are resampled with replacement within each cell; trial order
inside a run is never touched.  Draws are made per ``(subject, task,
condition)`` group over the sorted union of that group's ``(session, run)``
keys, so every modality of the group gets the *same* runs (paired analyses),
while base and ablation cells are drawn independently.  Each group's random
stream is derived from ``seed`` and the group's key alone, so the draws for a
group do not depend on which other cells are in the table.

Two resampling schemes (``resample``):

``"pooled"`` (default, the paper's)
    every replicate draws as many runs as the group has, with replacement,
    from all of its runs whatever their session type.
``"stratified"``
    runs are drawn within each session type: a session type with ``n_s`` runs
    contributes ``n_s`` runs drawn from its own runs, so every replicate keeps
    the design's mix of session types.  It needs at least 2 runs of every
    session type in every group (with one run there is nothing to resample).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import scipy.sparse as sp

from .errors import BayesobsInputError
from .seeds import key_digest

GROUP_KEYS: tuple[str, ...] = ("subject", "task", "condition")
RESAMPLE: tuple[str, ...] = ("pooled", "stratified")
MIN_RUNS_STRATIFIED = 2


def check_resample(resample: str) -> str:
    """Return ``resample`` if it names a resampling scheme, else raise.

    Parameters
    ----------
    resample : str
        The scheme a caller asked for.

    Returns
    -------
    str
        ``resample`` itself.

    Raises
    ------
    BayesobsInputError
        Unless ``resample`` is ``"pooled"`` or ``"stratified"``.
    """
    if resample not in RESAMPLE:
        raise BayesobsInputError(f"resample must be 'pooled' or 'stratified', not {resample!r}")
    return resample


def group_rng(seed: int, key: tuple) -> np.random.Generator:
    """A generator seeded by ``seed`` and a stable hash of ``key``.

    Parameters
    ----------
    seed : int
        The bootstrap seed.
    key : tuple
        The group's key; its items are hashed as text (sha256), so the stream
        is the same in every process and on every machine.

    Returns
    -------
    numpy.random.Generator
        The group's own random stream.
    """
    digest = key_digest(tuple(str(k) for k in key))
    words = np.frombuffer(digest[:16], dtype=np.uint32).tolist()
    return np.random.default_rng(np.random.SeedSequence([int(seed), *words]))


def draw_runs(
    n_runs: int,
    B: int,
    seed: int,
    key: tuple,
    resample: str = "pooled",
    strata: np.ndarray | None = None,
) -> np.ndarray:
    """``(B, n_runs)`` indices of the runs drawn in each replicate.

    Parameters
    ----------
    n_runs : int
        Runs in the group.
    B : int
        Replicates.
    seed : int
        Bootstrap seed.
    key : tuple
        The group's key (its random stream depends on it and ``seed`` only).
    resample : {"pooled", "stratified"}
        ``"pooled"`` draws from all runs; ``"stratified"`` draws the runs at
        the positions of each stratum from that stratum only.
    strata : array, shape (n_runs,), optional
        Stratum (session type) of each run; required with ``"stratified"``.

    Returns
    -------
    ndarray of int, shape (B, n_runs)
    """
    check_resample(resample)
    if B <= 0:
        return np.empty((0, n_runs), dtype=np.int64)
    rng = group_rng(seed, key)
    if resample == "pooled":
        return rng.integers(0, n_runs, size=(B, n_runs))
    if strata is None or len(strata) != n_runs:
        raise ValueError("stratified resampling needs the stratum of every run")
    labels = [str(v) for v in strata]
    out = np.empty((B, n_runs), dtype=np.int64)
    for label in sorted(set(labels)):
        idx = np.array([i for i, v in enumerate(labels) if v == label], dtype=np.int64)
        if len(idx) < MIN_RUNS_STRATIFIED:
            raise BayesobsInputError(
                f"stratified resampling needs at least {MIN_RUNS_STRATIFIED} runs of every "
                f"session type; {'/'.join(map(str, key))} has {len(idx)} run of {label!r}"
            )
        out[:, idx] = idx[rng.integers(0, len(idx), size=(B, len(idx)))]
    return out


def run_draws(
    trials: pd.DataFrame, B: int, seed: int = 0, resample: str = "pooled"
) -> dict[tuple, tuple[list, np.ndarray]]:
    """Draws for every ``(subject, task, condition)`` group of a trial table.

    Parameters
    ----------
    trials : DataFrame
        A normalised trial table.
    B : int
        Replicates.
    seed : int
        Bootstrap seed.
    resample : {"pooled", "stratified"}
        See the module docstring.  ``"stratified"`` refuses (with
        :class:`~bayesobs.errors.BayesobsInputError`) a table where some
        group has fewer than 2 runs of a session type, naming the groups.

    Returns
    -------
    dict
        ``{(subject, task, condition): (run_keys, draws)}`` where ``run_keys``
        is the sorted list of ``(session, run)`` keys and ``draws`` is a
        ``(B, len(run_keys))`` array of indices into it.
    """
    check_resample(resample)
    keys = trials[list(GROUP_KEYS) + ["session", "run"]].drop_duplicates()
    groups = {}
    for gkey, g in keys.groupby(list(GROUP_KEYS), sort=True):
        groups[tuple(gkey)] = sorted(
            set(zip(g["session"], g["run"], strict=True)), key=lambda k: (str(k[0]), k[1])
        )
    if resample == "stratified" and B > 0:
        short = {}
        for gkey, run_keys in groups.items():
            counts = pd.Series([str(k[0]) for k in run_keys]).value_counts()
            few = counts[counts < MIN_RUNS_STRATIFIED]
            if len(few):
                short[gkey] = ", ".join(f"{s!r}: {n}" for s, n in sorted(few.items()))
        if short:
            example = ", ".join(
                f"{'/'.join(map(str, k))} ({v})" for k, v in list(short.items())[:3]
            )
            raise BayesobsInputError(
                f"--resample stratified needs at least {MIN_RUNS_STRATIFIED} runs of every "
                f"session type, but {len(short)} of {len(groups)} (subject, task, condition) "
                f"group(s) have fewer, e.g. {example}; collect more runs (e.g. `run --runs 2`) "
                "or use the default --resample pooled"
            )
    out = {}
    for gkey, run_keys in groups.items():
        strata = np.array([str(k[0]) for k in run_keys], dtype=object)
        out[gkey] = (run_keys, draw_runs(len(run_keys), B, seed, gkey, resample, strata))
    return out


def count_matrix(
    unit_cell: np.ndarray,
    unit_key: np.ndarray,
    cell_draws: list[np.ndarray],
    B: int,
) -> sp.csr_matrix:
    """Sparse ``(cells * (1 + B), units)`` matrix: how often each unit is drawn.

    Parameters
    ----------
    unit_cell : array of int, shape (U,)
        The cell each unit (a session run) belongs to.
    unit_key : array of int, shape (U,)
        The unit's index in its cell's list of run keys (the list the draws
        index into).
    cell_draws : list of arrays
        Per cell, the ``(B, n_keys)`` draws (indices into its key list).
    B : int
        Number of replicates.

    Returns
    -------
    csr_matrix
        Row ``c * (1 + B)`` counts every unit of cell ``c`` once (the full
        data); row ``c * (1 + B) + b`` counts the units drawn in replicate ``b``.
        A drawn key with no unit in that cell contributes nothing.
    """
    unit_cell = np.asarray(unit_cell)
    unit_key = np.asarray(unit_key)
    n_cells = len(cell_draws)
    rows = [unit_cell * (1 + B)]
    cols = [np.arange(len(unit_cell))]
    if B > 0:
        order = np.lexsort((unit_key, unit_cell))
        for c in range(n_cells):
            draws = cell_draws[c]
            units = order[unit_cell[order] == c]
            lookup = np.full(draws.shape[1] if draws.size else 0, -1)
            lookup[unit_key[units]] = units
            chosen = lookup[draws] if draws.size else draws
            b_rows = np.broadcast_to(np.arange(1, B + 1)[:, None], chosen.shape)
            keep = chosen >= 0
            rows.append(c * (1 + B) + b_rows[keep])
            cols.append(chosen[keep])
    r = np.concatenate(rows)
    k = np.concatenate(cols)
    W = sp.coo_matrix((np.ones(len(r)), (r, k)), shape=(n_cells * (1 + B), len(unit_cell)))
    return W.tocsr()  # duplicate entries are summed: counts


def unit_draws(
    cells: pd.DataFrame, unit_cell: np.ndarray, unit_session, unit_run, draws: dict, B: int
) -> sp.csr_matrix:
    """:func:`count_matrix` for units keyed by ``(session, run)`` in cells of a table.

    Parameters
    ----------
    cells : DataFrame
        One row per cell, with the :data:`GROUP_KEYS` columns.
    unit_cell : array of int, shape (U,)
        The cell (row of ``cells``) each unit belongs to.
    unit_session, unit_run : arrays, shape (U,)
        Each unit's session and run.
    draws : dict
        :func:`run_draws` of the same trials.
    B : int
        Number of replicates.

    Returns
    -------
    csr_matrix
        As :func:`count_matrix`.
    """
    gcols = [cells[k].to_numpy() for k in GROUP_KEYS]
    cell_draws, key_pos = [], []
    for c in range(len(cells)):
        run_keys, idx = draws[tuple(g[c] for g in gcols)] if B > 0 else ([], None)
        key_pos.append({k: i for i, k in enumerate(run_keys)})
        cell_draws.append(idx if idx is not None else np.empty((0, 0), dtype=np.int64))
    if B > 0:
        unit_key = np.array(
            [key_pos[c][(s, r)] for c, s, r in zip(unit_cell, unit_session, unit_run, strict=True)]
        )
    else:
        unit_key = np.zeros(len(unit_cell), dtype=np.int64)
    return count_matrix(unit_cell, unit_key, cell_draws, B)


def percentile_interval(
    values: np.ndarray, axis: int = -1
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bootstrap mean and 68% percentile interval (16th, 84th), ignoring NaN.

    Where every replicate is NaN the three results are NaN (no warning).

    Parameters
    ----------
    values : array
        Replicates along ``axis``.
    axis : int
        The replicate axis.

    Returns
    -------
    mean, lo, hi : ndarray
        The mean and the 16th and 84th percentiles over ``axis``.
    """
    values = np.asarray(values, dtype=float)
    if values.size == 0:  # no rows (or no replicates): empty/NaN results of the right shape
        shape = np.delete(np.array(values.shape), axis).tolist()
        return np.full(shape, np.nan), np.full(shape, np.nan), np.full(shape, np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices -> NaN
        mean = np.nanmean(values, axis=axis)
        lo, hi = nan_percentiles(values, [16, 84], axis=axis)
    return mean, lo, hi


def nan_percentiles(values: np.ndarray, q, axis: int = -1) -> np.ndarray:
    """``numpy.nanpercentile(values, q, axis=axis)``, faster where most slices hold no NaN.

    numpy takes every slice alone (``apply_along_axis``) as soon as the array
    holds one NaN; here the slices without NaN go through
    ``numpy.percentile`` together (the same per-slice computation, so the
    same numbers) and only those with NaN one by one.

    Parameters
    ----------
    values : array
        The values, slices along ``axis``.
    q : sequence of float
        Percentiles in [0, 100].
    axis : int
        The axis of the slices.

    Returns
    -------
    ndarray, shape (len(q), *values.shape without axis)
        The percentiles of each slice, ignoring NaN (NaN for an all-NaN slice).
    """
    values = np.asarray(values, dtype=float)
    v = np.moveaxis(values, axis, -1)
    flat = v.reshape(-1, v.shape[-1])
    nan = np.isnan(flat).any(axis=1)
    out = np.empty((len(q), flat.shape[0]))
    if not nan.all():
        out[:, ~nan] = np.percentile(flat[~nan], q, axis=1)
    if nan.any():
        out[:, nan] = np.nanpercentile(flat[nan], q, axis=1)
    return out.reshape(len(q), *v.shape[:-1])


def add_interval(df: pd.DataFrame, name: str, replicates: np.ndarray) -> pd.DataFrame:
    """Write ``name_mean``, ``name_lo`` and ``name_hi`` of ``replicates`` (rows, B) into ``df``.

    The one writer of the bootstrap interval columns of every score table
    (see :func:`percentile_interval`).

    Parameters
    ----------
    df : DataFrame
        The table, one row per row of ``replicates``.
    name : str
        The column stem.
    replicates : array, shape (rows, B)
        The replicates of each row.

    Returns
    -------
    DataFrame
        ``df`` itself, with the three columns set.
    """
    mean, lo, hi = percentile_interval(replicates)
    df[f"{name}_mean"], df[f"{name}_lo"], df[f"{name}_hi"] = mean, lo, hi
    return df
