"""QUEST+ level placement for right/wrong trials (issue 53), on the posterior ``bayesobs psychometric`` reports.

Watson (2017), "QUEST+: A general multidimensional Bayesian adaptive
psychometric method", J Vis 17(3):10: the next trial goes to the level whose
outcome is expected to leave the least entropy in the posterior.  The
posterior here is :func:`bayesobs.scores.psychometric_bayes.grid_posterior`'s
(psignifit 4's priors, its grid, the guess rate and the direction that
``bayesobs psychometric`` fits), so the levels are chosen for the interval
that is then reported.  The ``questplus`` package is not used: it keeps its own
parameter grid and priors (and knows no overdispersion), so it would optimise
a posterior other than the one the score reports.

The entropy is that of the posterior's threshold and width, the lapse summed
out as a nuisance (``of="threshold_width"``, the default: Prins (2013), "The
psi-marginal adaptive method", J Vis 13(7):3; over the whole posterior the
lapse's information drew up to 40 of 90 trials to the easiest level, and on
benchmarks/bench_placement.py this needs the fewest trials for the fixed
protocol's threshold precision), of the whole posterior over threshold, width
and lapse (``of="all"``, Watson's) or of the threshold marginal alone
(``of="threshold"``); eta does not change one trial's chance of a right answer
and is summed out.  A round's batch is chosen greedily, each trial's level on
the posterior updated with a seeded draw of the outcomes of the trials chosen
before it (``batch="sample"``, the default: a batch spreads where the outcome
is uncertain instead of repeating one level), or as the batch's best distinct
levels (``batch="best"``).
benchmarks/bench_placement.py measures the choices (docs/protocol.md).
"""

from __future__ import annotations

import functools

import numpy as np

from .errors import BayesobsInputError
from .scores import psychometric_bayes as bayes
from .scores.psychometric import sigmoid_value
from .scores.psychometric_bayes import grid_posterior, percentiles

OF = ("threshold", "threshold_width", "all")
BATCH = ("sample", "best")


def _entropy(p: np.ndarray) -> float:
    """Shannon entropy (nats) of a probability mass."""
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def _levels(x, k, guess, n=None):
    """Distinct levels, their right answers, trials and mean guess rate."""
    u, inv = np.unique(np.asarray(x, float), return_inverse=True)
    n = np.ones(len(inv)) if n is None else np.asarray(n, float)
    g = np.broadcast_to(np.asarray(guess, float), inv.shape) * n
    total = np.bincount(inv, weights=n, minlength=len(u))
    right, g = (np.bincount(inv, weights=w, minlength=len(u)) for w in (np.asarray(k, float), g))
    return u, right, total, g / total


def posterior(x, k, guess, n=None, sigmoid: str = "norm", direction: str = "decreasing"):
    """The score's grid posterior of ``k`` right of ``n`` trials (1 each: trial rows) at levels ``x``."""
    data = (tuple(v.tolist()) for v in _levels(x, k, guess, n))
    return _grid(*data, sigmoid, direction, (bayes.COARSE, bayes.FINE))


@functools.lru_cache(maxsize=16)
def _grid(x, k, n, guess, sigmoid, direction, steps):
    """:func:`grid_posterior`'s mass and axes, kept for the round's stop test and placement."""
    _, _, (mass, axes, _) = grid_posterior(x, k, n, guess, sigmoid, direction)
    return mass, axes


def threshold_interval(mass: np.ndarray, axes: list) -> tuple[float, float]:
    """The threshold's 95% interval from a grid posterior, as ``fit_bayes`` reports it."""
    return percentiles(axes[0], mass.sum(axis=(1, 2, 3)))


def right_chance(mass, axes, levels, guess, sigmoid="norm", direction="decreasing"):
    """P(right | theta) at each level on the grid, eta summed out: ``(levels, T, W, L)``."""
    T, W, L = np.meshgrid(*axes[:3], indexing="ij", sparse=True)
    F = np.array([sigmoid_value(c, T, W, sigmoid, direction) for c in np.asarray(levels, float)])
    g = np.broadcast_to(np.asarray(guess, float), (len(F),)).reshape(-1, 1, 1, 1)
    return g + (1 - g - L[None]) * F


def _marginal(post: np.ndarray, of: str) -> np.ndarray:
    """The mass over threshold, width and lapse summed to what ``of`` names."""
    if of == "threshold":
        return post.sum(axis=(1, 2))
    return post.sum(axis=2) if of == "threshold_width" else post


def expected_entropy(m: np.ndarray, like: np.ndarray, of: str) -> np.ndarray:
    """Expected posterior entropy after one trial at each level (``m``: mass over T, W, L)."""
    out = np.zeros(len(like))
    for i, p in enumerate(like):
        for joint in (m * p, m * (1 - p)):
            total = joint.sum()
            if total > 0:
                post = joint / total
                out[i] += total * _entropy(_marginal(post, of))
    return out


def choose_levels(
    x,
    k,
    guess,
    candidates,
    size: int,
    n=None,
    direction: str = "decreasing",
    sigmoid: str = "norm",
    seed: int = 0,
    of: str = "threshold_width",
    batch: str = "sample",
) -> np.ndarray:
    """The levels of the next ``size`` trials of one cell: QUEST+ on the score's posterior.

    Parameters
    ----------
    x, k : array_like
        The cell's trials so far: levels and right answers (1 or 0 per trial
        row, or counts with ``n``); at least three distinct levels (the fit's minimum).
    guess : float or array_like
        The guess rate (chance), one or per entry of ``x``; a candidate
        level's is interpolated between the levels so far.
    candidates : array_like
        The levels a trial may be asked at (a session's set sizes).
    size : int
        Trials in the batch.
    n : array_like, optional
        Trials per entry of ``x`` (default 1: trial rows).
    direction, sigmoid : str
        As :func:`bayesobs.scores.psychometric_bayes.fit_bayes`.
    seed : int
        Seed of the sampled outcomes (``batch="sample"``); the same rows and
        seed give the same levels.
    of : {"threshold_width", "all", "threshold"}
        The entropy minimised: of threshold and width (the lapse a nuisance),
        of the whole posterior, or of the threshold alone.
    batch : {"sample", "best"}
        Greedy with sampled outcomes, or the ``size`` best distinct levels.

    Returns
    -------
    numpy.ndarray
        ``size`` levels, in the order chosen.

    Raises
    ------
    BayesobsInputError
        Fewer than three distinct levels so far, no candidates, or an unknown ``of`` or ``batch``.
    """
    if of not in OF or batch not in BATCH:
        raise BayesobsInputError(f"placement: of is one of {OF}, batch one of {BATCH}")
    cand = np.unique(np.asarray(candidates, float))
    if not len(cand) or size < 1:
        raise BayesobsInputError("placement needs candidate levels and a batch of 1 or more")
    mass, axes = posterior(x, k, guess, n, sigmoid, direction)
    m = mass.sum(axis=3)
    u, _, _, g = _levels(x, k, guess, n)
    like = right_chance(mass, axes, cand, np.interp(cand, u, g), sigmoid, direction)
    if batch == "best":
        order = np.argsort(expected_entropy(m, like, of), kind="stable")
        return cand[np.resize(order, size)]
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(size):
        i = int(np.argmin(expected_entropy(m, like, of)))  # ties: the lowest level
        right = rng.random() < float((m * like[i]).sum())
        m = m * (like[i] if right else 1 - like[i])
        m = m / m.sum()
        out.append(cand[i])
    return np.array(out)
