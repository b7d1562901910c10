"""The run table: a normalised trial table as padded ``(runs, T)`` arrays.

Every fit starts here (METHOD §2): cells and their unique session runs
(:func:`build_runs`), the levels of an interleaved column (METHOD §10), the
response quantum of each cell (METHOD §8), and the sparse matrix of run
counts per dataset (:func:`dataset_matrix`: a cell, or one bootstrap
replicate of it).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..bootstrap import run_draws, unit_draws
from ..errors import BayesobsInputError
from ..trials import CELL_KEYS
from .observers.models import LOG_EPS_FRACTION


class RunTable(NamedTuple):
    """Trials as a padded ``(runs, T)`` array; each run is one session run."""

    x: np.ndarray  # stimuli, 0 where absent
    y: np.ndarray  # responses, NaN where missing or absent
    present: np.ndarray  # a trial exists at this position
    cell: np.ndarray  # (runs,) cell index
    session: np.ndarray  # (runs,) session key
    run: np.ndarray  # (runs,) run key
    level: np.ndarray | None = None  # (runs, T) level code of an interleaved column, or None


# ----------------------------------------------------------------- tables
def build_runs(
    trials: pd.DataFrame, interleaved: str | None = None
) -> tuple[pd.DataFrame, RunTable]:
    """Cells and the padded run table of a normalised trial table.

    With ``interleaved`` (a column name), ``RunTable.level`` holds each
    trial's level code (the index into ``cells.attrs["levels"]``); runs keep
    every trial in order whatever its level (METHOD §10).

    Parameters
    ----------
    trials : DataFrame
        A normalised trial table (cell keys, ``session``, ``run``, ``trial``,
        ``stimulus``, ``response``; NaN for a missing response).
    interleaved : str, optional
        A column whose level changes trial by trial inside a run.

    Returns
    -------
    cells : DataFrame
        One row per cell, sorted by the cell keys, with ``n_runs``,
        ``n_trials``, ``n_missing``, ``eps`` (log offset), ``log_skipped``
        (reason or ""), ``constant`` (a constant responder), ``delta``
        (response quantum) and ``y_median``; ``attrs["levels"]`` lists the
        ``COL=value`` labels of ``interleaved`` (empty without one).
    runs : RunTable
        The trials as padded ``(runs, T)`` arrays, trials in ``trial`` order.

    Raises
    ------
    BayesobsInputError
        For an ``interleaved`` column that cannot be used (see
        :func:`interleaved_levels`).
    """
    cell_id = trials.groupby(list(CELL_KEYS), sort=True).ngroup().to_numpy()
    run_id = trials.groupby(list(CELL_KEYS) + ["session", "run"], sort=True).ngroup().to_numpy()
    order = np.lexsort((trials["trial"].to_numpy(), run_id))
    run_id, cell_id = run_id[order], cell_id[order]
    x_all = trials["stimulus"].to_numpy(float)[order]
    y_all = trials["response"].to_numpy(float)[order]
    n_runs = run_id.max() + 1
    lengths = np.bincount(run_id, minlength=n_runs)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    pos = np.arange(len(run_id)) - starts[run_id]
    T = int(lengths.max())
    x = np.zeros((n_runs, T))
    y = np.full((n_runs, T), np.nan)
    present = np.zeros((n_runs, T), dtype=bool)
    x[run_id, pos] = x_all
    y[run_id, pos] = y_all
    present[run_id, pos] = True
    first = starts
    sess = trials["session"].to_numpy()[order][first]
    runk = trials["run"].to_numpy()[order][first]
    level = None
    levels: list[str] = []
    if interleaved is not None:
        codes, uniques = interleaved_levels(trials, interleaved)
        levels = [f"{interleaved}={u}" for u in uniques]
        level = np.zeros((n_runs, T), dtype=np.int64)
        level[run_id, pos] = codes[order]
    runs = RunTable(x, y, present, cell_id[first], sess, runk, level)
    cells = (
        trials[list(CELL_KEYS)]
        .drop_duplicates()
        .sort_values(list(CELL_KEYS))
        .reset_index(drop=True)
    )
    obs = present & ~np.isnan(y)
    cells["n_runs"] = np.bincount(runs.cell, minlength=len(cells))
    cells["n_trials"] = np.bincount(runs.cell, weights=lengths, minlength=len(cells)).astype(int)
    cells["n_missing"] = cells["n_trials"] - np.bincount(
        runs.cell, weights=obs.sum(1), minlength=len(cells)
    ).astype(int)
    xmax = np.full(len(cells), -np.inf)
    xmin = np.full(len(cells), np.inf)
    np.maximum.at(xmax, runs.cell, np.where(present, x, -np.inf).max(1))
    np.minimum.at(xmin, runs.cell, np.where(present, x, np.inf).min(1))
    eps = LOG_EPS_FRACTION * xmax
    ymin = np.full(len(cells), np.inf)
    np.minimum.at(ymin, runs.cell, np.where(obs, y, np.inf).min(1))
    cells["eps"] = eps
    reason = np.where(
        xmin <= 0,
        "log variants skipped: a stimulus <= 0",
        np.where(ymin <= -eps, "log variants skipped: a response <= -eps", ""),
    )
    cells["log_skipped"] = reason
    # METHOD §8: constant responders and the response quantum
    obs_flat = ~np.isnan(y_all)
    cell_obs = cell_id[obs_flat]
    y_obs = y_all[obs_flat]
    ymax = np.full(len(cells), -np.inf)
    np.maximum.at(ymax, cell_obs, y_obs)
    n_obs = np.bincount(cell_obs, minlength=len(cells))
    cells["constant"] = (n_obs >= 2) & (ymax == ymin)
    cells["delta"] = response_quantum(y_obs, cell_obs, len(cells))
    median = pd.Series(y_obs).groupby(cell_obs).median()
    cells["y_median"] = median.reindex(np.arange(len(cells))).to_numpy()
    cells.attrs["levels"] = levels
    return cells, runs


def interleaved_levels(trials: pd.DataFrame, column: str) -> tuple[np.ndarray, list[str]]:
    """Level code of every trial and the sorted level labels of ``column``.

    Parameters
    ----------
    trials : DataFrame
        The trial table.
    column : str
        The interleaved column.

    Returns
    -------
    codes : ndarray of int64
        Each trial's index into ``labels``.
    labels : list of str
        The distinct values as text (floats in ``g`` format), numbers in
        numeric order before other text.

    Raises
    ------
    BayesobsInputError
        When the column is absent, has missing values, or is a cell key.
    """
    if column in CELL_KEYS or column in ("session", "run", "trial", "stimulus", "response"):
        raise BayesobsInputError(
            f"--interleaved {column}: a cell or order key cannot be interleaved; name the "
            "column whose level changes from trial to trial inside a run (e.g. Coherence1)"
        )
    if column not in trials.columns:
        cols = ", ".join(str(c) for c in trials.columns)
        raise BayesobsInputError(f"--interleaved {column}: no such column (columns: {cols})")
    col = trials[column]
    if col.isna().any():
        i = int(np.flatnonzero(col.isna().to_numpy())[0])
        raise BayesobsInputError(
            f"--interleaved {column}: value missing in row {i + 1} of the trial table "
            "(filter it out with --where)"
        )
    labels = col.map(lambda v: format(v, "g") if isinstance(v, float) else str(v))
    uniques = sorted(labels.unique(), key=_natural)
    codes = labels.map({u: i for i, u in enumerate(uniques)}).to_numpy(np.int64)
    return codes, uniques


def _natural(label: str):
    """Numbers in numeric order, then text."""
    try:
        return (0, float(label), "")
    except ValueError:
        return (1, 0.0, label)


QUANTUM_EXPONENTS = np.arange(9, -10, -1)  # k = 9 .. -9, largest first


QUANTUM_TOLERANCE = 1e-6


def response_quantum(y: np.ndarray, group: np.ndarray, n_groups: int) -> np.ndarray:
    """Response quantum ``delta`` of each group of observed responses (METHOD §8).

    The largest ``10**k``, integer ``k`` in [-9, 9], such that every ``y`` of
    the group is a multiple of it: ``|y / 10**k - round(y / 10**k)| < 1e-6``
    with a non-zero ``round(y / 10**k)`` for a non-zero ``y`` (read literally,
    the absolute tolerance would let every answer below ``1e-6 * 10**k`` pass
    for large ``k``); 0 where no such ``k`` exists (answers not rounded to a
    power of ten) or the group is empty.

    Parameters
    ----------
    y : ndarray
        Observed responses.
    group : ndarray of int
        Each response's group (cell) index, in ``[0, n_groups)``.
    n_groups : int
        How many groups.

    Returns
    -------
    ndarray, shape (n_groups,)
        The quantum of each group, 0 where there is none.
    """
    y = np.asarray(y, dtype=float)
    scale = 10.0 ** QUANTUM_EXPONENTS.astype(float)  # (K,)
    ok = np.empty((n_groups, len(scale)), dtype=bool)
    for j, s in enumerate(scale):  # one exponent at a time: memory stays O(n)
        q = y / s
        m = np.round(q)
        # y not on the 10**k grid; a non-zero answer must be a non-zero multiple
        off = (np.abs(q - m) >= QUANTUM_TOLERANCE) | ((m == 0) & (y != 0))
        ok[:, j] = np.bincount(group, weights=off, minlength=n_groups) == 0
    first = np.argmax(ok, axis=1)
    has = ok.any(axis=1) & (np.bincount(group, minlength=n_groups) > 0)
    return np.where(has, scale[first], 0.0)


def dataset_matrix(
    trials: pd.DataFrame,
    cells: pd.DataFrame,
    runs: RunTable,
    B: int,
    seed: int,
    resample: str = "pooled",
) -> sp.csr_matrix:
    """Sparse ``(cells * (1 + B), runs)`` matrix of run counts per dataset.

    Row ``c * (1 + B) + b`` is replicate ``b`` of cell ``c`` (``b = 0``: the
    full data, every run once).

    Parameters
    ----------
    trials : DataFrame
        The trial table the runs were built from (the bootstrap draws its units from it).
    cells : DataFrame
        Cells of :func:`build_runs`.
    runs : RunTable
        Run table of :func:`build_runs`.
    B : int
        Bootstrap replicates, 0 or more.
    seed : int
        Seed of the bootstrap draws.
    resample : {"pooled", "stratified"}, default "pooled"
        Bootstrap scheme (:func:`bayesobs.bootstrap.run_draws`).

    Returns
    -------
    scipy.sparse.csr_matrix
        Shape ``(len(cells) * (1 + B), n_runs)``: how often each run enters each dataset.
    """
    draws = run_draws(trials, B, seed, resample) if B > 0 else {}
    return unit_draws(cells, runs.cell, runs.session, runs.run, draws, B)
