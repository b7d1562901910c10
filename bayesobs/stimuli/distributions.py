"""Stimulus distributions of a session: the prior the observer can learn."""

from __future__ import annotations

import numpy as np

from ..errors import BayesobsInputError

DISTRIBUTIONS = ("uniform", "gaussian", "skewed", "bimodal")
PARAMETERS = {
    "uniform": (),
    "gaussian": ("mean", "sd"),
    "skewed": ("alpha", "beta"),
    "bimodal": ("modes", "sd"),
}
_GRID = 4001  # points of the numerical prior mean


def _params(low: float, high: float, options: dict) -> tuple[str, dict]:
    name = options.get("distribution", "uniform")
    w = high - low
    if name == "gaussian":
        return name, {
            "mean": float(options.get("mean", (low + high) / 2)),
            "sd": float(options.get("sd", w / 6)),
        }
    if name == "skewed":
        return name, {
            "alpha": float(options.get("alpha", 2.0)),
            "beta": float(options.get("beta", 5.0)),
        }
    if name == "bimodal":
        modes = options.get("modes", [low + w / 4, low + 3 * w / 4])
        return name, {"modes": [float(m) for m in modes], "sd": float(options.get("sd", w / 12))}
    return name, {}


def check_distribution(low: float, high: float, options: dict, where: str) -> None:
    """Refuse an unknown distribution or impossible parameters, in one line naming ``where``."""
    name = options.get("distribution", "uniform")
    if name not in DISTRIBUTIONS:
        raise BayesobsInputError(
            f"{where}: unknown distribution {name!r}; choose from {', '.join(DISTRIBUTIONS)}"
        )
    stray = {"mean", "sd", "alpha", "beta", "modes"} & set(options) - set(PARAMETERS[name])
    if stray:
        raise BayesobsInputError(
            f"{where}: {', '.join(sorted(stray))} is not a parameter of distribution {name!r} "
            f"(it takes {', '.join(PARAMETERS[name]) or 'none'})"
        )
    try:
        _, p = _params(low, high, options)
    except (TypeError, ValueError):
        raise BayesobsInputError(f"{where}: distribution parameters must be numbers") from None
    if name in ("gaussian", "bimodal") and not p["sd"] > 0:
        raise BayesobsInputError(f"{where}: distribution sd must be > 0, not {p['sd']!r}")
    if name == "gaussian" and not low <= p["mean"] <= high:
        raise BayesobsInputError(f"{where}: distribution mean {p['mean']!r} is outside the range")
    if name == "skewed" and not (p["alpha"] > 0 and p["beta"] > 0):
        raise BayesobsInputError(f"{where}: distribution alpha and beta must be > 0")
    if name == "bimodal" and (
        len(p["modes"]) != 2 or not all(low <= m <= high for m in p["modes"])
    ):
        raise BayesobsInputError(f"{where}: distribution modes must be two values inside the range")


def draw_values(
    rng: np.random.Generator, low: float, high: float, n: int, options: dict
) -> np.ndarray:
    """``n`` values of the session's distribution, inside ``[low, high]``."""
    name, p = _params(low, high, options)
    if name == "uniform":
        return np.array([rng.uniform(low, high) for _ in range(n)])
    out = np.empty(0)
    while len(out) < n:  # truncation by rejection (the range holds most of the mass)
        m = 2 * (n - len(out)) + 8
        if name == "gaussian":
            v = rng.normal(p["mean"], p["sd"], m)
        elif name == "skewed":
            v = low + (high - low) * rng.beta(p["alpha"], p["beta"], m)
        else:
            centre = np.asarray(p["modes"])[rng.integers(2, size=m)]
            v = rng.normal(centre, p["sd"])
        out = np.concatenate([out, v[(v >= low) & (v <= high)]])
    return out[:n]


def draw_value(rng: np.random.Generator, low: float, high: float, options: dict) -> float:
    """One value of the session's distribution (uniform: exactly ``rng.uniform(low, high)``)."""
    if options.get("distribution", "uniform") == "uniform":
        return float(rng.uniform(low, high))
    return float(draw_values(rng, low, high, 1, options)[0])


def density(x: np.ndarray, low: float, high: float, options: dict) -> np.ndarray:
    """Unnormalised density of the (truncated) distribution at ``x``."""
    name, p = _params(low, high, options)
    x = np.asarray(x, dtype=float)
    inside = (x >= low) & (x <= high)
    if name == "uniform":
        d = np.ones_like(x)
    elif name == "gaussian":
        d = np.exp(-0.5 * ((x - p["mean"]) / p["sd"]) ** 2)
    elif name == "skewed":
        t = np.clip((x - low) / (high - low), 1e-12, 1 - 1e-12)
        d = t ** (p["alpha"] - 1) * (1 - t) ** (p["beta"] - 1)
    else:
        d = sum(np.exp(-0.5 * ((x - m) / p["sd"]) ** 2) for m in p["modes"])
    return np.where(inside, d, 0.0)


def prior_mean(low: float, high: float, options: dict) -> float:
    """Mean of the session's stimulus distribution (numerically, on a fine grid)."""
    if options.get("distribution", "uniform") == "uniform":
        return (low + high) / 2
    x = np.linspace(low, high, _GRID)
    d = density(x, low, high, options)
    return float(np.trapezoid(x * d, x) / np.trapezoid(d, x))


def label(low: float, high: float, options: dict) -> str:
    """The distribution as logged in the trial rows, e.g. ``gaussian(mean=0.3, sd=0.05)``."""
    name, p = _params(low, high, options)
    if not p:
        return name

    def fmt(v) -> str:
        return "[" + ", ".join(f"{m:g}" for m in v) + "]" if isinstance(v, list) else f"{v:g}"

    return f"{name}(" + ", ".join(f"{k}={fmt(v)}" for k, v in p.items()) + ")"
