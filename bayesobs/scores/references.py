"""Reference rows of the leaderboard: a random responder, the ideal observer, humans."""

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
    """The rows of prompted subjects: a ``prompt_id`` (``bayesobs run``) and not ``--humans``."""
    if "prompt_id" not in trials:
        return pd.Series(False, index=trials.index)
    pid = trials["prompt_id"]
    ok = pid.notna() & ~pid.astype(str).str.strip().isin(["", "nan", "None"])
    return ok & ~trials["subject"].astype(str).isin(set(map(str, humans)))


def reference_name(kind: str) -> str:
    """The subject id of a reference row, e.g. ``reference:random``."""
    return f"{PREFIX}{kind}"


def template(trials: pd.DataFrame) -> pd.DataFrame:
    """The cells a reference answers: per task, the trials of the subject with most of them."""
    parts = []
    for _task, g in trials.groupby("task", sort=True):
        counts = g.groupby("subject", sort=False).size()
        best = sorted(counts.index, key=lambda s: (-int(counts[s]), natural_key(s)))[0]
        parts.append(g[g["subject"] == best])
    if not parts:
        return trials.iloc[:0].copy()
    return pd.concat(parts, ignore_index=True)


def response_range(trials: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per trial, the session's response range: ``range_low, range_high`` where logged."""
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
    """A uniform draw over :func:`response_range` for every trial (seeded per session run)."""
    lo, hi = response_range(trials)
    u = np.empty(len(trials))
    keys = ["task", "modality", "condition", "session", "run"]
    for key, idx in trials.groupby(keys, sort=True).indices.items():
        u[idx] = group_rng(seed, ("random", *key)).uniform(size=len(idx))
    return lo + u * (hi - lo)


_LABEL = re.compile(r"^\s*(\w+)\s*(?:\((.*)\))?\s*$")


def parse_distribution(label) -> dict:
    """The options of a logged ``distribution`` label, e.g. ``gaussian(mean=0.3, sd=0.05)``."""
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
    """Text and image measurement SDs per trial (rows) and grid value (columns)."""
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
    """The Bayes-optimal posterior mean of every trial (see the module docstring)."""
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
    """Posterior means of the stimuli of trials ``t`` given their measurements."""
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
    """The subjects whose id matches one of the glob ``patterns`` (``--humans``)."""
    pats = list(patterns or [])
    return sorted(
        {str(s) for s in subjects if any(fnmatch.fnmatchcase(str(s), p) for p in pats)},
        key=natural_key,
    )


def reference_trials(
    trials: pd.DataFrame, seed: int = 0, humans=(), kinds=("random", "ideal")
) -> pd.DataFrame:
    """The trials of every reference observer, one subject ``reference:KIND`` each."""
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
    """``bayesbench`` with a ``reference`` column and the reference rows after the subjects."""
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
    """Which rows of a ``bayesbench`` table are references (any non-empty ``reference``)."""
    if "reference" not in bayesbench:
        return pd.Series(False, index=bayesbench.index)
    ref = bayesbench["reference"]
    return ref.notna() & (ref.astype(str).str.strip() != "") & (ref.astype(str) != "nan")


def subjects_only(bayesbench: pd.DataFrame) -> pd.DataFrame:
    """The rows of a ``bayesbench`` table that are subjects, not references."""
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
