"""Bayesian psychometric functions as psignifit 4 fits them: its priors, beta-binomial overdispersion, a grid posterior.

The model and priors are those of Schütt, Harmeling, Macke and Wichmann (2016),
"Painfree and accurate Bayesian estimation of psychometric functions for
(potentially) overdispersed data", Vision Research 122: ``psi(x) = guess + (1 -
guess - lapse) F(x)`` with ``F`` 0.5 at the threshold and 0.05/0.95 ``width``
apart; counts beta-binomial around ``psi`` with overdispersion ``eta`` (the SD
of the per-level probabilities relative to its largest possible value; 0 is
binomial); flat priors on threshold (the levels' range, cosine tails of half the
range) and width (between twice the smallest step and the range, cosine tails),
Beta(1, 10) on the lapse and on eta.  The posterior is evaluated on a grid in two
passes (a coarse one fixes where the mass is, a fine one integrates there); the
estimates are maxima of the posterior (MAP), the intervals percentiles of each
parameter's marginal.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import optimize, special, stats

from ..errors import BayesobsInputError
from ..intervals import wilson
from .psychometric import (
    KEYS,
    LEVEL_COLUMNS,
    PARAMS,
    _check_counts,
    borders,
    check_options,
    psychometric_table,
    sigmoid_value,
)

NAMES = ("threshold", "width", "lapse", "eta")
COARSE = (30, 40, 10, 20)  # grid points per parameter: the pass that finds the mass
FINE = (40, 40, 20, 20)  # and the pass that integrates it (psignifit's nAFC defaults)
MASS_MIN = 1e-5  # grid points below this share of the posterior do not widen the fine grid
BETA_LAPSE = BETA_ETA = 10.0
LEVEL = 0.95


def _cosine_flat(x, lo, hi, left, right):
    """1 on (lo, hi), cosine tails down to 0 at ``lo - left`` and ``hi + right``."""
    x = np.atleast_1d(np.asarray(x, float))
    p = ((x > lo) & (x < hi)).astype(float)
    a = (x >= lo - left) & (x <= lo)
    p[a] = (1 + np.cos(np.pi * (lo - x[a]) / left)) / 2
    b = (x >= hi) & (x <= hi + right)
    p[b] = (1 + np.cos(np.pi * (x[b] - hi) / right)) / 2
    return p


def log_prior(theta: dict, levels: np.ndarray) -> np.ndarray:
    """The default log prior of psignifit 4 at ``theta`` (arrays broadcasting together)."""
    u = np.unique(levels)
    lo, hi = u[0], u[-1]
    spread, step = hi - lo, np.diff(u).min()
    with np.errstate(divide="ignore"):
        return (
            np.log(_cosine_flat(theta["threshold"], lo, hi, spread / 2, spread / 2))
            + np.log(_cosine_flat(theta["width"], 2 * step, spread, step, 2 * spread))
            + stats.beta.logpdf(theta["lapse"], 1, BETA_LAPSE)
            + stats.beta.logpdf(theta["eta"], 1, BETA_ETA)
        )


def log_likelihood(theta: dict, x, k, n, guess, sigmoid: str, direction: str) -> np.ndarray:
    """Beta-binomial log-likelihood summed over levels (binomial where ``eta`` is 0)."""
    eta2 = np.asarray(theta["eta"], float) ** 2
    total = 0.0
    for xi, ki, ni, gi in zip(x, k, n, guess, strict=True):
        F = sigmoid_value(xi, theta["threshold"], theta["width"], sigmoid, direction)
        p = np.clip(gi + (1 - gi - theta["lapse"]) * F, 1e-12, 1 - 1e-12)
        binom = special.xlogy(ki, p) + special.xlogy(ni - ki, 1 - p)
        with np.errstate(divide="ignore", invalid="ignore"):
            nu = 1 / np.where(eta2 > 1e-9, eta2, 1.0) - 1
            a, b = p * nu, (1 - p) * nu
            bb = special.betaln(ki + a, ni - ki + b) - special.betaln(a, b)
        total = total + np.where(eta2 > 1e-9, bb, binom)
    return total


def _bounds(x) -> list[tuple[float, float]]:
    """The ML fit's borders (psignifit's) for threshold, width and lapse; eta in [0, 1)."""
    b = borders(x)
    return [b["threshold"], b["width"], b["lapse"], (0.0, 1 - 1e-10)]


def _posterior(bounds, steps, data):
    """The normalised posterior mass on a grid, its axes and its log density."""
    axes = [np.linspace(lo, hi, s) for (lo, hi), s in zip(bounds, steps, strict=True)]
    mesh = dict(zip(NAMES, np.meshgrid(*axes, indexing="ij", sparse=True), strict=True))
    logp = log_likelihood(mesh, *data) + log_prior(mesh, data[0])
    weights = 1.0  # the trapezoid rule along every axis
    for i, ax in enumerate(axes):
        w = np.gradient(ax) if len(ax) > 1 else np.ones(1)
        w[[0, -1]] /= 2
        weights = weights * w.reshape([-1 if j == i else 1 for j in range(len(axes))])
    mass = np.exp(logp - np.nanmax(logp)) * weights
    return mass / mass.sum(), axes, logp


def percentiles(axis, marginal, level=LEVEL) -> tuple[float, float]:
    """Where the marginal's cumulative mass, read at the grid points as psignifit reads it, crosses (1 -+ level)/2."""
    cdf = np.cumsum(marginal)
    return tuple(float(np.interp(q, cdf, axis)) for q in ((1 - level) / 2, (1 + level) / 2))


def grid_posterior(x, k, n, guess, sigmoid: str = "norm", direction: str = "decreasing"):
    """The checked data, the borders and the fine pass's posterior (mass, axes, log density) :func:`fit_bayes` reads."""
    check_options(sigmoid, direction)
    x, k, n, g = _check_counts(x, k, n, guess)
    data = (x, k, n, g, sigmoid, direction)
    bounds = _bounds(x)
    mass, axes, _ = _posterior(bounds, COARSE, data)
    keep = mass >= MASS_MIN * mass.max()
    tight = []
    for i, ax in enumerate(axes):
        idx = np.nonzero(keep.any(axis=tuple(j for j in range(len(axes)) if j != i)))[0]
        lo, hi = max(idx[0] - 1, 0), min(idx[-1] + 1, len(ax) - 1)
        tight.append((ax[lo], ax[hi]))
    return data, bounds, _posterior(tight, FINE, data)


def fit_bayes(x, k, n, guess, sigmoid: str = "norm", direction: str = "decreasing") -> dict:
    """Bayesian psychometric function of one group of counts, as psignifit 4 fits it.

    Parameters
    ----------
    x, k, n : array_like
        Levels, right answers and trials per level (at least three levels).
    guess : float or array_like
        The guess rate (chance: 1/m for m alternatives), fixed.
    sigmoid : {"norm", "logistic"}
        ``F``'s shape.
    direction : {"decreasing", "increasing"}
        Whether accuracy falls or rises with the level.

    Returns
    -------
    dict
        ``threshold``, ``width``, ``lapse``, ``eta`` (maxima of the posterior) and
        each one's 95% interval ``*_lo``, ``*_hi`` (percentiles of its marginal),
        ``n_levels``, ``n_trials`` and ``mass_at_edge`` (the names whose marginal
        keeps more than 0.1% of its mass in the last point of the grid: a prior
        that binds, not the data).
    """
    data, bounds, (mass, axes, logp) = grid_posterior(x, k, n, guess, sigmoid, direction)
    x = data[0]
    start = [
        ax[i] for ax, i in zip(axes, np.unravel_index(np.nanargmax(logp), logp.shape), strict=True)
    ]

    def neg(v):
        theta = dict(zip(NAMES, v, strict=True))
        if not all(lo <= t <= hi for t, (lo, hi) in zip(v, bounds, strict=True)):
            return np.inf
        value = float(np.sum(log_likelihood(theta, *data) + log_prior(theta, x)))
        return -value if np.isfinite(value) else np.inf

    best = optimize.minimize(
        neg, start, method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-10}
    )
    out = dict(zip(NAMES, map(float, best.x if best.fun <= neg(start) else start), strict=True))
    edge = []
    for i, (name, ax) in enumerate(zip(NAMES, axes, strict=True)):
        marginal = mass.sum(axis=tuple(j for j in range(len(axes)) if j != i))
        out[f"{name}_lo"], out[f"{name}_hi"] = percentiles(ax, marginal)
        if max(marginal[0], marginal[-1]) > 1e-3 and name in ("threshold", "width"):
            edge.append(name)
    return out | {"n_levels": len(x), "n_trials": int(n.sum()), "mass_at_edge": ";".join(edge)}


def counts_levels(table: pd.DataFrame, guess: float, by: tuple[str, ...] = ()) -> pd.DataFrame:
    """A user's ``level, correct[, total]`` table (counts, or one row per trial) as psychometric levels.

    Parameters
    ----------
    table : pandas.DataFrame
        ``level`` and ``correct`` (right answers), and ``total`` (trials; 1 per
        row when absent: trial rows with ``correct`` 0 or 1); ``by`` columns
        name groups fitted apart (as ``subject``, ``task`` and ``condition``).
    guess : float
        The guess rate (chance), in [0, 1).
    by : tuple of str
        Group columns, at most three.

    Returns
    -------
    pandas.DataFrame
        :data:`~bayesobs.scores.psychometric.LEVEL_COLUMNS`: right answers of
        ``n`` trials per level and group, with Wilson intervals.
    """
    need = ["level", "correct", *by]
    missing = [c for c in need if c not in table.columns]
    if missing or len(by) > 3:
        raise BayesobsInputError(
            f"a psychometric table needs columns level, correct (and total), found: "
            f"{', '.join(map(str, table.columns[:12]))}"
            if missing
            else "--by takes at most 3 columns"
        )
    if not 0 <= guess < 1:
        raise BayesobsInputError(f"--guess must lie in [0, 1), not {guess}")
    t = pd.DataFrame({c: table[c] for c in by})
    for c in ("level", "correct", "total"):
        values = table[c] if c in table.columns else pd.Series(1, index=table.index)
        t[c] = pd.to_numeric(values, errors="coerce")
        if t[c].isna().any() or not np.isfinite(t[c]).all():
            row = int(np.flatnonzero(t[c].isna() | ~np.isfinite(t[c]))[0]) + 2
            raise BayesobsInputError(
                f"column {c}, line {row}: not a number ({table[c].iloc[row - 2]!r})"
            )
    if ((t["correct"] < 0) | (t["correct"] > t["total"]) | (t["total"] <= 0)).any():
        raise BayesobsInputError("every row needs 0 <= correct <= total and total > 0")
    keys = dict(zip(("subject", "task", "condition"), by, strict=False))
    g = (
        t.groupby([*by, "level"], sort=True)
        .agg(k=("correct", "sum"), n=("total", "sum"))
        .reset_index()
    )
    out = pd.DataFrame(
        {k: g[keys[k]].astype(str) if k in keys else "" for k in KEYS}, index=g.index
    )
    out["paradigm"], out["level"], out["x"] = "table", "level", g["level"].astype(float)
    out["n"], out["k"] = g["n"].astype(int), g["k"].astype(int)
    out["guess"], out["accuracy"] = float(guess), out["k"] / out["n"]
    out["lo"], out["hi"] = wilson(out["k"].to_numpy(), out["n"].to_numpy())
    return out[LEVEL_COLUMNS]


def bayes_table(
    levels: pd.DataFrame, sigmoid: str = "norm", direction: str = "decreasing", bootstrap: int = 200
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``psychometric.csv`` with Bayesian fits (:func:`fit_bayes`) and the ML fits beside them.

    Parameters
    ----------
    levels : pandas.DataFrame
        :func:`~bayesobs.scores.psychometric.psychometric_levels` or :func:`counts_levels`.
    sigmoid, direction : str
        As :func:`fit_bayes`.
    bootstrap : int
        Parametric bootstrap data sets of the ML fit's intervals.

    Returns
    -------
    table : pandas.DataFrame
        One row per group: ``threshold``, ``width``, ``lapse``, ``eta`` (MAP) with
        ``*_lo``, ``*_hi`` (95% credible intervals) and ``mass_at_edge``; the ML fit's
        ``threshold_ml``, ``width_ml``, ``lapse_ml`` with their bootstrap intervals.
    missing : pandas.DataFrame
        The groups left out, and why.
    """
    ml, missing = psychometric_table(levels, sigmoid, direction, bootstrap)
    by_key = {tuple(map(str, k)): g for k, g in levels.fillna("").groupby(KEYS, sort=True)}
    rows = []
    for row in ml.fillna({k: "" for k in KEYS}).to_dict("records"):
        g = by_key[tuple(str(row[k]) for k in KEYS)]
        fit = fit_bayes(g["x"], g["k"], g["n"], g["guess"], sigmoid, direction)
        ml_part = {f"{p}_ml{s}": row[f"{p}{s}"] for p in PARAMS for s in ("", "_lo", "_hi")}
        rows.append(
            {k: row[k] for k in (*KEYS, "level", "guess", "sigmoid", "direction")} | fit | ml_part
        )
    return pd.DataFrame(rows), missing
