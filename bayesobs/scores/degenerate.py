"""Degenerate data: cells of constant responses, cells with too few runs (METHOD §8)."""

from __future__ import annotations

import pandas as pd

from ..bootstrap import MIN_RUNS_STRATIFIED
from ..trials import CELL_KEYS

# Reasons in missing.csv that the leaderboard and the report turn into flags.
CONSTANT_REASON = "constant responses"
FEW_RUNS_REASON = f"fewer than {MIN_RUNS_STRATIFIED} runs per session type"


def constant_cells(trials: pd.DataFrame) -> pd.DataFrame:
    """Cells whose observed responses are all equal (METHOD §8).

    Parameters
    ----------
    trials : DataFrame
        Normalised magnitude trials (the cell keys and ``response``, NaN
        where missing).

    Returns
    -------
    DataFrame
        ``subject, task, modality, condition, n`` (observed responses) of every
        cell with at least one observed response and no two different ones.
    """
    obs = trials.dropna(subset=["response"])
    g = obs.groupby(list(CELL_KEYS), sort=True)["response"]
    stats = pd.DataFrame({"lo": g.min(), "hi": g.max(), "n": g.size()}).reset_index()
    const = stats[stats["lo"] == stats["hi"]]
    return const[[*CELL_KEYS, "n"]].reset_index(drop=True)


def few_runs_cells(trials: pd.DataFrame, minimum: int = MIN_RUNS_STRATIFIED) -> pd.DataFrame:
    """Cells with fewer than ``minimum`` runs of some session type.

    Parameters
    ----------
    trials : DataFrame
        Normalised magnitude trials (the cell keys, ``session``, ``run``).
    minimum : int
        The fewest runs per session type a cell needs; default
        :data:`bayesobs.bootstrap.MIN_RUNS_STRATIFIED` (2), what the
        stratified bootstrap needs.

    Returns
    -------
    DataFrame
        ``subject, task, modality, condition, min_runs`` (the smallest number of
        runs of any session type in the cell), only for cells below ``minimum``.
    """
    runs = trials[[*CELL_KEYS, "session", "run"]].drop_duplicates()
    per = runs.groupby([*CELL_KEYS, "session"], sort=True).size()
    least = per.groupby(level=list(range(len(CELL_KEYS))), sort=True).min().rename("min_runs")
    least = least.reset_index()
    return least[least["min_runs"] < minimum].reset_index(drop=True)
