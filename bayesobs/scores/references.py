"""Reference rows of the leaderboard: a random responder, the ideal observer, humans.

A score means little alone.  Beside the subjects, ``bayesobs score`` ranks
nothing but shows, set apart and marked in a ``reference`` column:

* ``random``: a responder that answers every trial uniformly over the
  session's response range (``range_low`` to ``range_high``, else the
  smallest to largest stimulus of that session type in the cell: the range
  the accuracy baseline uses), seeded;
* ``ideal``: the Bayes-optimal observer of the tasks' generative noise: it
  measures the stimulus with the noise of the simulated subjects
  (:mod:`bayesobs.magnitude.subject`: text, image growing with the logged blur,
  both in a multimodal trial) and answers the posterior mean under the
  session's stimulus distribution (the logged ``distribution``, uniform on
  the range by default).  That noise is not people's: it answers the cells of
  the prompted subjects only (rows with a ``prompt_id``, which ``bayesobs
  run`` logs, not ``--humans``), and is withheld (:data:`IDEAL_WITHHELD`)
  where there are none;
* ``humans`` (with ``--humans PATTERN``): the matching subjects' trials
  pooled into one observer, each participant's runs kept apart.

The reference trials are built from the subjects' own trials (the stimuli,
sessions, runs and conditions of the subject with the most trials of each
task; in a sweep every subject sees the same ones) and scored by the same
code as the subjects (:func:`bayesobs.scores.score`).  docs/method.md,
*Reference rows*, gives the formulas.
"""

from __future__ import annotations

import fnmatch
import re

import numpy as np
import pandas as pd

from ..bootstrap import group_rng
from ..trials import natural_key

#: the kinds of reference row, in the order the leaderboard shows them
KINDS: tuple[str, ...] = ("random", "ideal", "humans")
#: the subject id of each reference row in bayesbench.csv
PREFIX = "reference:"
#: reference kind of a subject named by ``--humans`` (kept in every table, never ranked)
HUMAN = "human"
GRID = 257  # points of the numerical posterior mean
CHUNK = 4096  # trials per block of the grid computation
BLUR_SCALE = 8.0  # sim: image noise grows as sqrt(1 + (blur / 8)^2)
#: why ``reference:ideal`` is missing where no subject was prompted (people's data; issue 47)
IDEAL_WITHHELD = (
    "reference:ideal withheld: no trial here was logged by bayesobs run (no prompt_id: people "
    "or another lab's data, or --humans), and the ideal observer measures with the simulated "
    "subjects' noise, not people's"
)


def prompted(trials: pd.DataFrame, humans=()) -> pd.Series:
    """The rows of prompted subjects: a ``prompt_id`` (``bayesobs run``) and not ``--humans``.

    Parameters
    ----------
    trials : DataFrame
        Normalised magnitude trials.
    humans : iterable of str
        Subject ids marked human (``--humans``).

    Returns
    -------
    Series of bool
        True where the row has a non-blank ``prompt_id`` and its subject is
        not in ``humans``; all False without the column.
    """
    if "prompt_id" not in trials:
        return pd.Series(False, index=trials.index)
    pid = trials["prompt_id"]
    ok = pid.notna() & ~pid.astype(str).str.strip().isin(["", "nan", "None"])
    return ok & ~trials["subject"].astype(str).isin(set(map(str, humans)))


def reference_name(kind: str) -> str:
    """The subject id of a reference row, e.g. ``reference:random``.

    Parameters
    ----------
    kind : str
        The reference kind (one of :data:`KINDS`).

    Returns
    -------
    str
        ``kind`` prefixed with :data:`PREFIX`.
    """
    return f"{PREFIX}{kind}"


def template(trials: pd.DataFrame) -> pd.DataFrame:
    """The cells a reference answers: per task, the trials of the subject with most of them.

    Ties go to the first subject in natural order.  Every column is kept
    (stimulus, range, blur, distribution...); ``subject`` and ``response`` are
    replaced by the reference.

    Parameters
    ----------
    trials : DataFrame
        Normalised magnitude trials of every subject.

    Returns
    -------
    DataFrame
        For each task (sorted), the rows of its chosen subject, unchanged
        (a fresh index); empty with the same columns for no trials.
    """
    parts = []
    for _task, g in trials.groupby("task", sort=True):
        counts = g.groupby("subject", sort=False).size()
        best = sorted(counts.index, key=lambda s: (-int(counts[s]), natural_key(s)))[0]
        parts.append(g[g["subject"] == best])
    if not parts:
        return trials.iloc[:0].copy()
    return pd.concat(parts, ignore_index=True)


def response_range(trials: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per trial, the session's response range: ``range_low, range_high`` where logged.

    Otherwise the smallest and largest stimulus of that session type in the
    cell (as the accuracy baseline, :func:`bayesobs.scores.with_baseline`).

    Parameters
    ----------
    trials : DataFrame
        Normalised magnitude trials (``subject``, ``task``, ``modality``,
        ``condition``, ``session``, ``stimulus``; ``range_low`` and
        ``range_high`` used where both are finite and ``high > low``).

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        The low and high ends of the range, one value per trial in row
        order.
    """
    keys = ["subject", "task", "modality", "condition", "session"]
    g = trials.groupby(keys, sort=False)["stimulus"]
    lo, hi = g.transform("min").to_numpy(float), g.transform("max").to_numpy(float)
    if "range_low" in trials and "range_high" in trials:
        rl = pd.to_numeric(trials["range_low"], errors="coerce").to_numpy(float)
        rh = pd.to_numeric(trials["range_high"], errors="coerce").to_numpy(float)
        ok = np.isfinite(rl) & np.isfinite(rh) & (rh > rl)
        lo, hi = np.where(ok, rl, lo), np.where(ok, rh, hi)
    return lo, hi


def random_responses(trials: pd.DataFrame, seed: int = 0) -> np.ndarray:
    """A uniform draw over :func:`response_range` for every trial (seeded per session run).

    Parameters
    ----------
    trials : DataFrame
        Normalised magnitude trials (a :func:`template`).
    seed : int
        Seed; each ``(task, modality, condition, session, run)`` draws from
        its own generator (:func:`bayesobs.bootstrap.group_rng`).

    Returns
    -------
    numpy.ndarray
        One response per trial in row order, uniform on its range.
    """
    lo, hi = response_range(trials)
    u = np.empty(len(trials))
    keys = ["task", "modality", "condition", "session", "run"]
    for key, idx in trials.groupby(keys, sort=True).indices.items():
        u[idx] = group_rng(seed, ("random", *key)).uniform(size=len(idx))
    return lo + u * (hi - lo)


_LABEL = re.compile(r"^\s*(\w+)\s*(?:\((.*)\))?\s*$")


def parse_distribution(label) -> dict:
    """The options of a logged ``distribution`` label, e.g. ``gaussian(mean=0.3, sd=0.05)``.

    The text is parsed, never evaluated.

    Parameters
    ----------
    label : object
        The logged ``distribution`` value (NaN, None or any non-string
        means uniform).

    Returns
    -------
    dict
        ``{"distribution": name, **parameters}`` (numbers as float, lists
        as lists of float) for a label of
        :func:`bayesobs.stimuli.distributions.label`; ``{}`` (uniform) for
        anything else: an unknown name, an unknown parameter or a value that
        is not a number.
    """
    # start-up time: the stimuli package (PIL, every task) loads only for reference rows
    from ..stimuli.distributions import DISTRIBUTIONS, PARAMETERS

    m = _LABEL.match(str(label)) if isinstance(label, str) else None
    if m is None or m.group(1) not in DISTRIBUTIONS:
        return {}
    name, body = m.group(1), m.group(2) or ""
    out: dict = {"distribution": name}
    for key, val in re.findall(r"(\w+)\s*=\s*(\[[^\]]*\]|[^,\s]+)", body):
        if key not in PARAMETERS[name]:
            return {}
        try:
            if val.startswith("["):
                out[key] = [float(v) for v in val.strip("[]").split(",")]
            else:
                out[key] = float(val)
        except ValueError:
            return {}
    return out


def noise_sd(trials: pd.DataFrame, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Text and image measurement SDs per trial (rows) and grid value (columns).

    The simulated subjects' noise (:mod:`bayesobs.magnitude.subject`): ``TEXT_SD``
    and ``IMAGE_SD`` times the task's scale (the value itself for the Weber
    tasks duration and numerosity; for a task sim does not know, the session's
    range midpoint); the image SD grows as ``sqrt(1 + (blur_sigma / 8)^2)``;
    ``text_noise`` ``s`` adds ``sqrt(2) s |x|`` in quadrature.

    Parameters
    ----------
    trials : DataFrame
        Normalised magnitude trials (``task`` and the range columns;
        ``blur_sigma`` and ``text_noise`` count as 0 where absent).
    grid : numpy.ndarray
        Stimulus values, one row per trial (or broadcastable against
        ``(n_trials, 1)``): the values at which the SD is taken.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        The text and image SDs, each shaped ``(n_trials, grid columns)``, in
        the stimulus's units, floored at ``1e-9`` of the task's scale.
    """
    # start-up time: the simulated subjects load only for reference rows
    from ..magnitude.subject import IMAGE_SD, SCALE, TEXT_SD, WEBER

    lo, hi = response_range(trials)
    task = trials["task"].astype(str).to_numpy()
    scale = np.array([SCALE.get(t, np.nan) for t in task])
    scale = np.where(np.isfinite(scale), scale, (lo + hi) / 2)[:, None] * np.ones_like(grid)
    weber = np.isin(task, WEBER)[:, None]
    base = np.where(weber, np.abs(grid), scale)
    blur = _column(trials, "blur_sigma")
    text_noise = _column(trials, "text_noise")
    sd_t = np.hypot(TEXT_SD * base, np.sqrt(2.0) * text_noise[:, None] * np.abs(grid))
    sd_i = IMAGE_SD * base * np.sqrt(1.0 + (blur[:, None] / BLUR_SCALE) ** 2)
    floor = 1e-9 * np.maximum(np.abs(scale), 1e-9)
    return np.maximum(sd_t, floor), np.maximum(sd_i, floor)


def _column(trials: pd.DataFrame, name: str) -> np.ndarray:
    """A numeric column, 0 where absent or missing."""
    if name not in trials:
        return np.zeros(len(trials))
    v = pd.to_numeric(trials[name], errors="coerce").to_numpy(float)
    return np.where(np.isfinite(v), v, 0.0)


def ideal_responses(trials: pd.DataFrame, seed: int = 0) -> np.ndarray:
    """The Bayes-optimal posterior mean of every trial (see the module docstring).

    The standard-normal noise of the text and of the image measurement is
    drawn once per ``(task, session, run)`` and shown value (its k-th
    showing), whatever the condition, modality and order: a multimodal trial
    combines the two measurements its text and image twins got, and a
    condition that changes nothing the observer measures (a steering prompt,
    a reversed order) gets the same answers as ``base``.

    Parameters
    ----------
    trials : DataFrame
        Normalised magnitude trials (a :func:`template`): ``stimulus``,
        ``trial``, ``task``, ``modality``, ``condition``, ``session``,
        ``run``, the range columns and optional ``distribution``,
        ``blur_sigma``, ``text_noise``.
    seed : int
        Seed of the measurement noise (one generator per ``(task, session,
        run)``, :func:`bayesobs.bootstrap.group_rng`).

    Returns
    -------
    numpy.ndarray
        One response per trial in row order: the posterior mean
        (:func:`posterior_mean`).
    """
    t = trials.reset_index(drop=True)
    x = t["stimulus"].to_numpy(float)
    # the k-th showing of a value in its sequence: the same stimulus gets the same noise in
    # every modality and condition, in any order (context_reversed)
    occurrence = (
        t.sort_values("trial", kind="stable")
        .groupby(["task", "modality", "condition", "session", "run", "stimulus"], sort=False)
        .cumcount()
        .reindex(t.index)
        .to_numpy()
    )
    e_t, e_i = np.empty(len(t)), np.empty(len(t))
    for key, idx in t.groupby(["task", "session", "run"], sort=True).indices.items():
        pairs = np.stack([x[idx], occurrence[idx].astype(float)], axis=1)
        order, codes = np.unique(pairs, axis=0, return_inverse=True)
        draws = group_rng(seed, ("ideal", *key)).standard_normal((2, len(order)))
        e_t[idx], e_i[idx] = draws[0, codes.ravel()], draws[1, codes.ravel()]
    lo, hi = response_range(t)
    # the measurements, with the noise of the true stimulus
    sd_tx, sd_ix = noise_sd(t, x[:, None])
    m_t = x + sd_tx[:, 0] * e_t
    m_i = x + sd_ix[:, 0] * e_i
    modality = t["modality"].astype(str).to_numpy()
    labels = t["distribution"].to_numpy() if "distribution" in t else np.full(len(t), None)
    out = np.empty(len(t))
    for start in range(0, len(t), CHUNK):  # trials x grid in bounded memory
        sl = slice(start, start + CHUNK)
        out[sl] = posterior_mean(
            t.iloc[sl], m_t[sl], m_i[sl], lo[sl], hi[sl], modality[sl], labels[sl]
        )
    return out


def posterior_mean(t, m_t, m_i, lo, hi, modality, labels=None) -> np.ndarray:
    """Posterior means of the stimuli of trials ``t`` given their measurements.

    ``m_t``, ``m_i``: the text and image measurements (arrays, one per row;
    a text trial uses ``m_t`` only, an image trial ``m_i`` only, a
    multimodal trial both); ``lo``, ``hi``: the prior's support;
    ``modality``: per row; ``labels``: the logged ``distribution`` of each
    row (None: uniform).  Computed on a grid of :data:`GRID` points.

    Parameters
    ----------
    t : DataFrame
        The trials (``task``, the range columns, optional ``blur_sigma``,
        ``text_noise``), for the noise SDs (:func:`noise_sd`).
    m_t, m_i : numpy.ndarray
        Text and image measurements, one per row.
    lo, hi : numpy.ndarray
        The prior's support per row.
    modality : array-like of str
        ``text``, ``image`` or ``multimodal`` per row.
    labels : array-like, optional
        The logged ``distribution`` of each row (None or a non-string:
        uniform on ``[lo, hi]``).

    Returns
    -------
    numpy.ndarray
        The posterior mean per row; where the posterior has no mass on the
        grid, the measurement clipped to ``[lo, hi]``.
    """
    modality = np.asarray(modality).astype(str)
    labels = np.full(len(t), None) if labels is None else np.asarray(labels, dtype=object)
    # start-up time: the stimuli package (PIL, every task) loads only for reference rows
    from ..stimuli.distributions import density

    u = np.linspace(0.0, 1.0, GRID)
    grid = lo[:, None] + u[None, :] * (hi - lo)[:, None]
    prior = np.ones_like(grid)
    for label in {str(v) for v in labels if isinstance(v, str)}:
        opts = parse_distribution(label)
        if opts.get("distribution", "uniform") != "uniform":
            for i in np.flatnonzero(labels == label):
                prior[i] = density(grid[i], lo[i], hi[i], opts)
    sd_t, sd_i = noise_sd(t, grid)
    uses_t = (modality != "image")[:, None]
    uses_i = (modality != "text")[:, None]
    loglik = np.where(uses_t, -0.5 * ((m_t[:, None] - grid) / sd_t) ** 2 - np.log(sd_t), 0.0)
    loglik += np.where(uses_i, -0.5 * ((m_i[:, None] - grid) / sd_i) ** 2 - np.log(sd_i), 0.0)
    loglik -= loglik.max(axis=1, keepdims=True)
    w = prior * np.exp(loglik)
    w[:, [0, -1]] *= 0.5  # the trapezoid rule over the support
    total = w.sum(axis=1)
    post = (w * grid).sum(axis=1) / np.where(total > 0, total, 1.0)
    # no prior mass near the measurement: the nearest end of the range
    return np.where(total > 0, post, np.clip(np.where(uses_t[:, 0], m_t, m_i), lo, hi))


def human_subjects(subjects, patterns) -> list[str]:
    """The subjects whose id matches one of the glob ``patterns`` (``--humans``).

    Parameters
    ----------
    subjects : iterable
        Subject ids (compared as text).
    patterns : iterable of str or None
        ``fnmatch`` glob patterns, case-sensitive (None: none).

    Returns
    -------
    list of str
        The matching ids, once each, in natural order.
    """
    pats = list(patterns or [])
    return sorted(
        {str(s) for s in subjects if any(fnmatch.fnmatchcase(str(s), p) for p in pats)},
        key=natural_key,
    )


def reference_trials(
    trials: pd.DataFrame, seed: int = 0, humans=(), kinds=("random", "ideal")
) -> pd.DataFrame:
    """The trials of every reference observer, one subject ``reference:KIND`` each.

    ``trials``: magnitude trials (normalised).  ``humans``: subject ids whose
    trials are pooled into ``reference:humans`` (runs renamed
    ``SUBJECT/RUN``, so each participant's runs stay apart).

    Parameters
    ----------
    trials : DataFrame
        Normalised magnitude trials of every subject.
    seed : int
        Seed of the random responses and of the ideal observer's noise.
    humans : iterable of str
        Subject ids pooled into ``reference:humans`` (empty: no such row).
    kinds : iterable of str
        The simulated references to build, ``random`` and/or ``ideal``
        (``ideal`` on the cells of the :func:`prompted` rows only, none
        without them).

    Returns
    -------
    DataFrame
        The reference trials, the trial table's columns less ``raw_response``
        and ``valid``; empty (with the trials' columns) when there is none.

    Raises
    ------
    ValueError
        A kind other than ``random`` or ``ideal`` (when there are trials).
    """
    frames = []
    humans = list(humans)
    for kind in kinds:
        t = template(trials[prompted(trials, humans)] if kind == "ideal" else trials)
        if len(t):
            if kind == "random":
                t["response"] = random_responses(t, seed)
            elif kind == "ideal":
                t["response"] = ideal_responses(t, seed)
            else:
                raise ValueError(f"unknown reference kind {kind!r}")
            t["subject"] = reference_name(kind)
            frames.append(t)
    if humans:
        h = trials[trials["subject"].astype(str).isin(humans)].copy()
        if len(h):
            h["run"] = h["subject"].astype(str) + "/" + h["run"].astype(str)
            h["subject"] = reference_name("humans")
            frames.append(h)
    if not frames:
        return trials.iloc[:0].copy()
    out = pd.concat(frames, ignore_index=True)
    for col in [c for c in ("raw_response", "valid") if c in out]:  # the subject's parse: gone
        out = out.drop(columns=col)
    return out


def with_references(bayesbench: pd.DataFrame, refs: pd.DataFrame, humans=()) -> pd.DataFrame:
    """``bayesbench`` with a ``reference`` column and the reference rows after the subjects.

    Subjects get ``""`` (or ``human`` for the ``--humans`` subjects); a
    reference row its kind.  The reference rows keep only the subjects'
    columns, so the subjects' rows are unchanged.

    Parameters
    ----------
    bayesbench : DataFrame
        The subjects' ``bayesbench`` table (not changed).
    refs : DataFrame or None
        The references' ``bayesbench`` rows (subjects ``reference:KIND``);
        None or empty: none.
    humans : iterable of str
        Subject ids marked :data:`HUMAN`.

    Returns
    -------
    DataFrame
        A copy of ``bayesbench`` with a ``reference`` column, then the
        reference rows.
    """
    out = bayesbench.copy()
    humans = set(humans)
    out["reference"] = [HUMAN if str(s) in humans else "" for s in out["subject"]]
    if refs is None or refs.empty:
        return out
    r = refs.copy()
    r["reference"] = r["subject"].astype(str).str.removeprefix(PREFIX)
    r = r[[c for c in out.columns if c in r.columns]]
    return pd.concat([out, r], ignore_index=True)


def is_reference(bayesbench: pd.DataFrame) -> pd.Series:
    """Which rows of a ``bayesbench`` table are references (any non-empty ``reference``).

    Parameters
    ----------
    bayesbench : DataFrame
        A ``bayesbench`` table, with or without a ``reference`` column.

    Returns
    -------
    Series of bool
        True where ``reference`` is neither missing, blank nor ``nan`` (so
        also the :data:`HUMAN` subjects); all False without the column.
    """
    if "reference" not in bayesbench:
        return pd.Series(False, index=bayesbench.index)
    ref = bayesbench["reference"]
    return ref.notna() & (ref.astype(str).str.strip() != "") & (ref.astype(str) != "nan")


def subjects_only(bayesbench: pd.DataFrame) -> pd.DataFrame:
    """The rows of a ``bayesbench`` table that are subjects, not references.

    Parameters
    ----------
    bayesbench : DataFrame
        A ``bayesbench`` table.

    Returns
    -------
    DataFrame
        The rows :func:`is_reference` rejects, with a fresh index.
    """
    return bayesbench[~is_reference(bayesbench)].reset_index(drop=True)


__all__ = [
    "HUMAN",
    "IDEAL_WITHHELD",
    "KINDS",
    "PREFIX",
    "human_subjects",
    "ideal_responses",
    "is_reference",
    "noise_sd",
    "parse_distribution",
    "posterior_mean",
    "prompted",
    "random_responses",
    "reference_name",
    "reference_trials",
    "response_range",
    "subjects_only",
    "template",
    "with_references",
]
