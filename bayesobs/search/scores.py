"""Visual-search analyses (pop-out vs conjunction): accuracy, set-size effect, response bias.

Input: a trial table of search trials with, per trial, ``set_size`` (number
of distractors), ``correct`` (1/0), and ``target_cell`` and
``response_cell`` (``"i,j"``, row and column from 1 as in ``Cell (i,j)``;
``"invalid"`` for a reply that names no cell of the 2 x 2 grid); optionally
``error_px`` (Euclidean error of an ``(x, y)`` answer) and ``answer``
(``cell`` or ``coords``).  The runner writes all of these.

The search condition of a row is ``search_condition`` when the table has it
(the runner's tables: there ``condition`` is the ablation, e.g.
``noise_constant``, reported as ``ablation``); otherwise the table's
``condition`` is the search condition (as in a human data file).

* Accuracy by condition and set size (optionally binned) with 95% Wilson
  intervals, and mean coordinate error with a 95% t interval.
* The set-size effect per subject x task x condition: the point-biserial
  correlation of correctness with set size, its p-value Bonferroni-corrected
  across the table, and the slope of a logistic regression of correctness on
  set size (maximum likelihood, no penalty).
* Response bias per subject x task (x answer mode): precision, recall and
  selection rate of each cell, and the rate of invalid answers.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import BayesobsInputError
from ..intervals import wilson
from ..seeds import stable_seed
from ..trials import paradigm_rows

CELLS = ("1,1", "1,2", "2,1", "2,2")
KEYS = ["subject", "task", "condition", "ablation", "answer", "modality"]
SEARCH_COLUMNS = [
    "subject",
    "task",
    "condition",
    "n",
    "accuracy",
    "r",
    "p_bonferroni",
    "logistic_slope",
]
BIAS_COLUMNS = ["subject", "task", "cell", "precision", "recall", "selected", "invalid"]


def is_search(trials: pd.DataFrame) -> pd.Series:
    """Which rows are search trials.

    A ``paradigm`` column (written by the runner) decides where it is filled
    in; rows without it (human CSVs, older logs) are search trials when they
    have ``set_size`` and ``correct``.

    Parameters
    ----------
    trials : DataFrame
        A trial table.

    Returns
    -------
    pandas.Series
        One bool per row (the table's index).
    """
    return paradigm_rows(trials, "search")


def search_table(trials: pd.DataFrame) -> pd.DataFrame:
    """Search trials with the analysis keys filled in (see the module docstring).

    Parameters
    ----------
    trials : DataFrame
        A trial table; only its search rows (:func:`is_search`) are kept.

    Returns
    -------
    DataFrame
        A copy of the search rows with ``subject``, ``task``, ``condition``,
        ``modality`` (default ``image``) and ``answer`` (default ``cell``) as
        text, ``ablation`` added, and ``set_size`` and ``correct`` as float.

    Raises
    ------
    BayesobsInputError
        When there is no search trial, or ``correct`` holds other than 0 or 1.
    """
    t = trials[is_search(trials)].copy()
    if t.empty:
        raise BayesobsInputError("no visual-search trials (columns set_size and correct)")
    for col, default in (
        ("subject", "subject"),
        ("task", "task"),
        ("condition", "base"),
        ("modality", "image"),
        ("answer", "cell"),
    ):
        if col not in t.columns:
            t[col] = default
        t[col] = t[col].fillna(default).astype(str)
    if "search_condition" in t.columns:
        t["ablation"] = t["condition"]
        t["condition"] = t["search_condition"].astype(str)
    else:
        t["ablation"] = "base"
    t["set_size"] = pd.to_numeric(t["set_size"], errors="raise").astype(float)
    t["correct"] = pd.to_numeric(t["correct"], errors="raise").astype(float)
    if not t["correct"].isin([0.0, 1.0]).all():
        raise BayesobsInputError("search column 'correct' must hold 0 or 1")
    return t


ERROR_RESAMPLES = 2000


def mean_interval(values: np.ndarray, key=(), reps: int = ERROR_RESAMPLES) -> tuple[float, float]:
    """95% percentile-bootstrap interval of the mean of ``values`` (NaN below 2 values).

    A resampled mean lies between the smallest and largest value, so the
    interval respects the data's bounds (a coordinate error never runs below
    0 or past the image diagonal, as a t interval on a few trials does).
    Seeded by ``key`` (the group), so each group's interval is reproducible
    on its own.

    Parameters
    ----------
    values : array_like
        The values (e.g. one group's ``error_px``).
    key : object
        The group's key; its ``repr`` seeds the resampling.
    reps : int
        Number of bootstrap resamples.

    Returns
    -------
    lo : float
        The 2.5% percentile of the resampled means.
    hi : float
        The 97.5% percentile of the resampled means.
    """
    values = np.asarray(values, float)
    if len(values) < 2:
        return np.nan, np.nan
    seed = stable_seed(key)
    idx = np.random.default_rng(seed).integers(0, len(values), (reps, len(values)))
    lo, hi = np.percentile(values[idx].mean(axis=1), [2.5, 97.5])
    return float(lo), float(hi)


def search_accuracy(trials: pd.DataFrame, bins: int | None = None) -> pd.DataFrame:
    """Accuracy and coordinate error by condition x set size.

    Accuracy with its 95% Wilson interval; coordinate error (``error_px``,
    the mean) with a 95% percentile-bootstrap interval of the mean
    (:func:`mean_interval`), which stays within the data's bounds.

    With ``bins``, set sizes are pooled into that many equal-width bins per
    task (``set_size`` is then the mean set size in the bin, with the bin's
    ``set_size_lo`` and ``set_size_hi``).

    Parameters
    ----------
    trials : DataFrame
        A trial table with search trials.
    bins : int, optional
        Number of set-size bins per task; None keeps every set size.

    Returns
    -------
    DataFrame
        One row per ``subject, task, condition, ablation, answer, modality``
        and set size (or bin): those keys, ``set_size``, ``n``, ``accuracy``,
        ``acc_lo``, ``acc_hi`` and, with ``error_px`` in the trials,
        ``error_px``, ``error_lo``, ``error_hi``.

    Raises
    ------
    BayesobsInputError
        As :func:`search_table`.
    """
    return _search_accuracy(search_table(trials), bins)


def _search_accuracy(t: pd.DataFrame, bins: int | None) -> pd.DataFrame:
    if bins:
        lo_hi = t.groupby("task")["set_size"].agg(["min", "max"])
        parts = []
        for task, g in t.groupby("task", sort=False):
            lo, hi = lo_hi.loc[task]
            edges = np.linspace(lo, hi + 1, int(bins) + 1)
            b = np.clip(np.searchsorted(edges, g["set_size"], side="right") - 1, 0, int(bins) - 1)
            parts.append(
                g.assign(set_size_lo=np.ceil(edges[b]), set_size_hi=np.ceil(edges[b + 1]) - 1)
            )
        t = pd.concat(parts)
        by = [*KEYS, "set_size_lo", "set_size_hi"]
    else:
        by = [*KEYS, "set_size"]
    g = t.groupby(by, sort=True)
    out = g["correct"].agg(n="size", k="sum").reset_index()
    if bins:
        out.insert(len(KEYS), "set_size", g["set_size"].mean().to_numpy())
    out["accuracy"] = out["k"] / out["n"]
    out["acc_lo"], out["acc_hi"] = wilson(out["k"], out["n"])
    if "error_px" in t.columns:
        t["error_px"] = pd.to_numeric(t["error_px"], errors="coerce")
        rows = [(key, g.dropna().to_numpy()) for key, g in t.groupby(by, sort=True)["error_px"]]
        out["error_px"] = [e.mean() if len(e) else np.nan for _, e in rows]
        bounds = np.array([mean_interval(e, key) for key, e in rows]).reshape(-1, 2)
        out["error_lo"], out["error_hi"] = bounds[:, 0], bounds[:, 1]
    return out.drop(columns="k")


def logistic_slope(x: np.ndarray, y: np.ndarray) -> float:
    """Maximum-likelihood slope ``b`` of ``logit P(y = 1) = a + b x`` (NaN if not identified).

    Parameters
    ----------
    x : array_like
        The predictor (set size).
    y : array_like
        The outcome, 0 or 1.

    Returns
    -------
    float
        The slope per unit of ``x``; NaN without variation in ``x`` or ``y``,
        or under (quasi-)separation.
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    if np.ptp(x) == 0 or y.min() == y.max():
        return np.nan  # no variation, or perfect accuracy: the slope is not identified
    X = np.column_stack([np.ones_like(x), (x - x.mean()) / x.std()])
    beta = np.zeros(2)
    for _ in range(100):  # Newton-Raphson (IRLS): the log-likelihood is concave
        p = 1 / (1 + np.exp(-X @ beta))
        try:
            step = np.linalg.solve(X.T @ (X * (p * (1 - p))[:, None]), X.T @ (y - p))
        except np.linalg.LinAlgError:  # fitted probabilities all 0 or 1: (quasi-)separation
            return np.nan
        beta += step
        if np.abs(step).max() < 1e-12:
            break
        if np.abs(beta).max() > 50:  # separation: the maximum is at infinity
            return np.nan
    return float(beta[1] / x.std())


def set_size_effect(trials: pd.DataFrame) -> pd.DataFrame:
    """``search.csv``: one row per subject x task x condition (x ablation, answer mode, modality).

    Columns: subject, task, condition, n, accuracy, r, p_bonferroni,
    logistic_slope, then p (uncorrected), ablation, answer, modality and
    (coordinate answers) the mean error_px.  ``r`` is the point-biserial
    correlation of correctness with set size; Bonferroni multiplies ``p`` by
    the number of tests in the table.

    Parameters
    ----------
    trials : DataFrame
        A trial table with search trials.

    Returns
    -------
    DataFrame
        The columns above, one row per group.

    Raises
    ------
    BayesobsInputError
        As :func:`search_table`.
    """
    return _set_size_effect(search_table(trials))


def _set_size_effect(t: pd.DataFrame) -> pd.DataFrame:
    from scipy import stats  # start-up time: `bayesobs score` of magnitude trials never needs it

    rows = []
    for key, g in t.groupby(KEYS, sort=True):
        y = g["correct"].to_numpy(float)
        x = g["set_size"].to_numpy(float)
        if np.ptp(x) > 0 and 0 < y.mean() < 1:
            r, p = stats.pointbiserialr(y, x)
        else:
            r, p = np.nan, np.nan  # no variation: no correlation
        err = pd.to_numeric(g["error_px"], errors="coerce").mean() if "error_px" in g else np.nan
        rows.append(
            {
                **dict(zip(KEYS, key, strict=True)),
                "n": len(g),
                "accuracy": y.mean(),
                "r": r,
                "p": p,
                "logistic_slope": logistic_slope(x, y),
                "error_px": err,
            }
        )
    out = pd.DataFrame(rows)
    tests = out["p"].notna().sum()
    out["p_bonferroni"] = np.minimum(out["p"] * tests, 1.0)
    return out[[*SEARCH_COLUMNS, "p", "ablation", "answer", "modality", "error_px"]]


def response_bias(trials: pd.DataFrame, cells=CELLS) -> pd.DataFrame:
    """``search_bias.csv``: per subject x task (x answer mode) and cell, precision, recall, selection rate.

    ``invalid`` is the rate of answers that name no cell of the grid (for
    coordinate answers: no point, or a point outside the image); it repeats
    on the four rows of a subject x task.

    Parameters
    ----------
    trials : DataFrame
        A trial table with search trials, ``target_cell`` and ``response_cell``.
    cells : sequence of str
        The grid's cells (default :data:`CELLS`).

    Returns
    -------
    DataFrame
        ``subject, task, cell, precision, recall, selected, invalid, answer``;
        precision (recall) is NaN for a cell never chosen (never the target).

    Raises
    ------
    BayesobsInputError
        As :func:`search_table`, or without ``target_cell`` and ``response_cell``.
    """
    return _response_bias(search_table(trials), cells)


def _response_bias(t: pd.DataFrame, cells=CELLS) -> pd.DataFrame:
    if "response_cell" not in t.columns or "target_cell" not in t.columns:
        raise BayesobsInputError("response bias needs columns target_cell and response_cell")
    rows = []
    for (subject, task, answer), g in t.groupby(["subject", "task", "answer"], sort=True):
        resp = g["response_cell"].astype(str)
        target = g["target_cell"].astype(str)
        invalid = float((~resp.isin(cells)).mean())
        for c in cells:
            chosen, true = resp == c, target == c
            hit = (chosen & true).sum()
            rows.append(
                {
                    "subject": subject,
                    "task": task,
                    "cell": c,
                    "precision": hit / chosen.sum() if chosen.any() else np.nan,
                    "recall": hit / true.sum() if true.any() else np.nan,
                    "selected": float(chosen.mean()),
                    "invalid": invalid,
                    "answer": answer,
                }
            )
    return pd.DataFrame(rows, columns=[*BIAS_COLUMNS, "answer"])


def search_scores(trials: pd.DataFrame, bins: int = 6) -> dict[str, pd.DataFrame]:
    """The three search tables: ``search``, ``search_accuracy`` (binned set sizes), ``search_bias``.

    Parameters
    ----------
    trials : DataFrame
        A trial table with search trials.
    bins : int
        Number of set-size bins of ``search_accuracy``.

    Returns
    -------
    dict of str to DataFrame
        :func:`set_size_effect`, :func:`search_accuracy` and
        :func:`response_bias` of the trials, under those three names.

    Raises
    ------
    BayesobsInputError
        As :func:`response_bias`.
    """
    t = search_table(trials)  # validated and keyed once for the three tables
    return {
        "search": _set_size_effect(t),
        "search_accuracy": _search_accuracy(t, bins),
        "search_bias": _response_bias(t),
    }


def prefer(table: pd.DataFrame, column: str, value: str) -> pd.DataFrame:
    """The rows where ``column == value`` if there are any, else the whole table (for digests).

    Parameters
    ----------
    table : DataFrame
        Any table.
    column : str
        The column compared.
    value : str
        The preferred value.

    Returns
    -------
    DataFrame
        The matching rows, or ``table`` itself when none match.
    """
    sel = table[column] == value
    return table[sel] if sel.any() else table
