"""Psychometric functions of the right/wrong paradigms (``psychometric.csv``)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import special

from ..errors import BayesobsInputError
from ..hvs.logged import is_hvs
from ..intervals import wilson
from ..paradigms import levels
from ..search import tasks as S
from ..search.scores import search_table
from ..trials import paradigm_rows
from ..tunnel.scores import perception_table

SIGMOIDS = ("norm", "logistic")
DIRECTIONS = ("decreasing", "increasing")
WIDTH_ALPHA = 0.05  # width = x(F = 1 - alpha) - x(F = alpha), psignifit's default
LAPSE_MAX = 0.5  # psignifit's border on the lapse rate
MIN_LEVELS = 3
BOOTSTRAP = 200  # parametric bootstrap data sets per group
NO_BOOTSTRAP_NOTE = "no bootstrap (--bootstrap 0): no intervals and no gof_p"
EPS = 1e-12  # psi is kept in [EPS, 1 - EPS] inside the log-likelihood
MAX_ITER = 200
# the stimulus level of each paradigm's trials
LEVELS = levels()  # paradigm -> its level column (bayesobs.paradigms)
KEYS = ["paradigm", "subject", "task", "variant", "modality", "condition", "answer"]
PARAMS = ("threshold", "width", "lapse")
COLUMNS = [
    *KEYS,
    "level",
    "n_levels",
    "n_trials",
    "guess",
    "guess_min",
    "guess_max",
    "threshold",
    "threshold_lo",
    "threshold_hi",
    "width",
    "width_lo",
    "width_hi",
    "lapse",
    "lapse_lo",
    "lapse_hi",
    "deviance",
    "gof_p",
    "gof_p_chi2",
    "log_likelihood",
    "at_bound",
    "sigmoid",
    "direction",
    "bootstrap",
    "interval_note",
]
LEVEL_COLUMNS = [*KEYS, "level", "x", "n", "k", "guess", "accuracy", "lo", "hi"]
MISSING_COLUMNS = ["subject", "task", "component", "reason"]


def check_options(sigmoid: str, direction: str) -> None:
    """Refuse an unknown sigmoid or direction (one clear error)."""
    if sigmoid not in SIGMOIDS:
        raise BayesobsInputError(f"unknown sigmoid {sigmoid!r}; choose from {', '.join(SIGMOIDS)}")
    if direction not in DIRECTIONS:
        raise BayesobsInputError(
            f"unknown direction {direction!r}; choose from {', '.join(DIRECTIONS)}"
        )


def _scale(sigmoid: str) -> float:
    """``ppf(1 - alpha) - ppf(alpha)`` of the standard sigmoid: z per unit of ``x / width``."""
    if sigmoid == "norm":
        return float(2 * special.ndtri(1 - WIDTH_ALPHA))  # scipy.stats.norm.ppf
    return float(2 * math.log((1 - WIDTH_ALPHA) / WIDTH_ALPHA))


def _cdf(z: np.ndarray, sigmoid: str) -> np.ndarray:
    return special.ndtr(z) if sigmoid == "norm" else special.expit(z)


def _cdf_pdf(z: np.ndarray, sigmoid: str) -> tuple[np.ndarray, np.ndarray]:
    if sigmoid == "norm":
        return special.ndtr(z), np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
    F = special.expit(z)
    return F, F * (1 - F)


def sigmoid_value(x, threshold, width, sigmoid: str = "norm", direction: str = "increasing"):
    """``F(x)``: 0.5 at ``threshold``; 0.05 and 0.95 (or 0.95 and 0.05) ``width`` apart."""
    check_options(sigmoid, direction)
    sign = 1.0 if direction == "increasing" else -1.0
    z = sign * _scale(sigmoid) * (np.asarray(x, float) - threshold) / width
    return _cdf_pdf(z, sigmoid)[0]


def psi(x, threshold, width, lapse, guess, sigmoid: str = "norm", direction: str = "decreasing"):
    """Probability of a right answer: ``guess + (1 - guess - lapse) * F(x)``."""
    guess = np.asarray(guess, float)
    return guess + (1 - guess - lapse) * sigmoid_value(x, threshold, width, sigmoid, direction)


def log_likelihood(
    x, k, n, guess, threshold, width, lapse, sigmoid: str = "norm", direction: str = "decreasing"
) -> float:
    """Binomial log-likelihood of ``k`` right of ``n`` per level (with the binomial coefficients)."""
    k, n = np.asarray(k, float), np.asarray(n, float)
    p = np.clip(psi(x, threshold, width, lapse, guess, sigmoid, direction), EPS, 1 - EPS)
    coef = special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)
    return float(np.sum(coef + special.xlogy(k, p) + special.xlogy(n - k, 1 - p)))


def deviance(k, n, p) -> np.ndarray:
    """Deviance against the saturated model, ``2 sum k log(k / np) + (n - k) log((n - k) / n(1 - p))``."""
    k, n = np.asarray(k, float), np.asarray(n, float)
    p = np.clip(np.asarray(p, float), EPS, 1 - EPS)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = special.xlogy(k, k) - special.xlogy(k, n * p)
        b = special.xlogy(n - k, n - k) - special.xlogy(n - k, n * (1 - p))
    return 2 * np.sum(a + b, axis=-1)


def borders(x: np.ndarray) -> dict[str, tuple[float, float]]:
    """The borders psignifit sets for the levels ``x``: threshold, width, lapse."""
    u = np.unique(np.asarray(x, float))
    if len(u) < 2:
        raise BayesobsInputError("a psychometric function needs at least two distinct levels")
    lo, hi = float(u[0]), float(u[-1])
    spread = hi - lo
    return {
        "threshold": (lo - spread / 2, hi + spread / 2),
        "width": (float(np.diff(u).min()), 3 * spread),
        "lapse": (0.0, LAPSE_MAX),
    }


# ------------------------------------------------------------------ batched fitting
class _Batch:
    """``D`` data sets of up to ``L`` levels (padded: ``n = 0``), with their borders."""

    def __init__(self, x, k, n, g, lower, upper, sigmoid, direction):
        self.x, self.k, self.n, self.g = x, k, n, g
        self.lower, self.upper = lower, upper  # (D, 3): threshold, log width, lapse
        self.sign = 1.0 if direction == "increasing" else -1.0
        self.scale = _scale(sigmoid)
        self.sigmoid = sigmoid

    def take(self, idx) -> _Batch:
        b = _Batch.__new__(_Batch)
        b.__dict__.update(self.__dict__)
        for name in ("x", "k", "n", "g", "lower", "upper"):
            setattr(b, name, getattr(self, name)[idx])
        return b

    def parts(self, theta):
        m, s, lam = (theta[..., i, None] for i in range(3))
        z = self.sign * self.scale * (self.x - m) * np.exp(-s)
        F, f = _cdf_pdf(z, self.sigmoid)
        a = 1 - self.g - lam
        p = np.clip(self.g + a * F, EPS, 1 - EPS)
        return z, F, f, a, p

    def nll(self, theta) -> np.ndarray:
        p = self.parts(theta)[-1]
        return -np.sum(special.xlogy(self.k, p) + special.xlogy(self.n - self.k, 1 - p), axis=-1)

    def grid_nll(self, pts) -> np.ndarray:
        """NLL of every data set (D) at each of its grid points ``pts`` (D, P, 3): ``(D, P)``."""
        m, s, lam = (pts[:, :, i, None] for i in range(3))
        x, k, n, g = (v[:, None, :] for v in (self.x, self.k, self.n, self.g))
        z = self.sign * self.scale * (x - m) * np.exp(-s)
        p = np.clip(g + (1 - g - lam) * _cdf(z, self.sigmoid), EPS, 1 - EPS)
        return -np.sum(special.xlogy(k, p) + special.xlogy(n - k, 1 - p), axis=-1)

    def score_info(self, theta):
        """Gradient of the NLL ``(D, 3)`` and the Fisher information ``(D, 3, 3)``."""
        z, F, f, a, p = self.parts(theta)
        w = np.exp(-theta[:, 1, None])
        J = np.stack(
            [a * f * (-self.sign * self.scale * w), a * f * (-z), -F * np.ones_like(a)], axis=-1
        )
        v = p * (1 - p)
        r = (self.k - self.n * p) / v
        grad = -np.einsum("dl,dli->di", r, J)
        info = np.einsum("dl,dli,dlj->dij", self.n / v, J, J)
        return grad, info


def _start_grid(
    lapse_max: float, n_m: int = 13, n_w: int = 9, lapses=(0.0, 0.02, 0.06, 0.15, 0.35)
):
    """Grid in the unit box of (threshold, log width) and absolute lapses (clipped per data set)."""
    um, uw = np.meshgrid(np.linspace(0, 1, n_m), np.linspace(0, 1, n_w), indexing="ij")
    lam = np.array([v for v in lapses if v <= lapse_max] or [0.0])
    P = um.size * len(lam)
    grid = np.empty((P, 3))
    grid[:, 0] = np.repeat(um.ravel(), len(lam))
    grid[:, 1] = np.repeat(uw.ravel(), len(lam))
    grid[:, 2] = np.tile(lam, um.size)
    return grid, (n_m, n_w, len(lam))


FULL_GRID = _start_grid(LAPSE_MAX, 25, 13, (0.0, 0.02, 0.05, 0.1, 0.17, 0.25, 0.35, 0.45))
# bootstrap data sets: a coarser grid beside the fitted parameters they were drawn from
SMALL_GRID = _start_grid(LAPSE_MAX, 9, 5, (0.0, 0.05, 0.2))
STARTS = 4  # the grid's lowest local minima refined per data set (one basin can be a trap)


def _local_minima(values: np.ndarray, shape: tuple, K: int) -> np.ndarray:
    """Indices ``(D, K)`` of each row's ``K`` lowest grid local minima (axis neighbours), best first."""
    v = values.reshape(len(values), *shape)
    is_min = np.ones(v.shape, bool)
    for ax in range(1, 4):
        pad = [(0, 0)] * 4
        pad[ax] = (1, 1)
        vp = np.pad(v, pad, constant_values=np.inf)
        n = v.shape[ax]
        is_min &= (v <= np.take(vp, np.arange(n), axis=ax)) & (
            v <= np.take(vp, np.arange(2, n + 2), axis=ax)
        )
    flat = np.where(is_min, v, np.inf).reshape(len(values), -1)
    order = np.argsort(flat, axis=1, kind="stable")[:, :K]
    ok = np.isfinite(np.take_along_axis(flat, order, axis=1))
    return np.where(ok, order, order[:, :1])


def _fit_batch(
    b: _Batch, start: np.ndarray | None = None, grid=FULL_GRID, chunk: int = 256
) -> tuple[np.ndarray, np.ndarray]:
    """Maximum-likelihood ``theta`` (threshold, log width, lapse) of every data set, and its NLL."""
    unit, shape = grid
    D = len(b.x)
    K = STARTS + (start is not None)
    cand = np.empty((D, K, 3))
    for i in range(0, D, chunk):
        c = b.take(slice(i, i + chunk))
        lo, hi = c.lower, c.upper
        # per data set: the grid mapped into its own box (D_c, P, 3)
        pts = lo[:, None, :] + unit[None, :, :] * (hi - lo)[:, None, :]
        pts[..., 2] = np.minimum(unit[None, :, 2], hi[:, None, 2])
        best = _local_minima(c.grid_nll(pts), shape, STARTS)
        cand[i : i + chunk, :STARTS] = np.take_along_axis(pts, best[..., None], axis=1)
        if start is not None:
            cand[i : i + chunk, STARTS] = start[i : i + chunk]
    theta, f = _refine(b.take(np.repeat(np.arange(D), K)), cand.reshape(D * K, 3))
    f = f.reshape(D, K)
    pick = np.argmin(f, axis=1)
    return theta.reshape(D, K, 3)[np.arange(D), pick], f[np.arange(D), pick]


def _refine(b: _Batch, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fisher scoring inside the borders (active set at a border, step halving), vectorised."""
    theta = np.clip(theta, b.lower, b.upper)
    f = b.nll(theta)
    active = np.arange(len(theta))
    for _ in range(MAX_ITER):
        if not len(active):
            break
        c = b.take(active)
        th = theta[active]
        grad, info = c.score_info(th)
        span = c.upper - c.lower
        at_lo = th <= c.lower + 1e-6 * span
        at_hi = th >= c.upper - 1e-6 * span
        free = ~((at_lo & (grad > 0)) | (at_hi & (grad < 0)))
        info = info * free[:, :, None] * free[:, None, :]
        info = info + np.eye(3)[None] * (~free)[:, None, :]
        ridge = 1e-10 * (np.abs(np.einsum("dii->d", info)) + 1e-300)
        info = info + ridge[:, None, None] * np.eye(3)[None]
        step = -np.linalg.solve(info, (grad * free)[..., None])[..., 0]
        f0 = f[active]
        t = np.ones(len(active))
        new = th.copy()
        f_new = f0.copy()
        todo = np.ones(len(active), bool)
        for _h in range(40):
            cand = np.clip(th[todo] + t[todo, None] * step[todo], c.lower[todo], c.upper[todo])
            fc = c.take(todo).nll(cand)
            ok = fc <= f0[todo]
            idx = np.flatnonzero(todo)
            new[idx[ok]] = cand[ok]
            f_new[idx[ok]] = fc[ok]
            todo[idx[ok]] = False
            t[todo] /= 2
            if not todo.any():
                break
        moved = np.abs(new - th).max(axis=1) / np.maximum(span.max(axis=1), 1e-300)
        theta[active], f[active] = new, f_new
        done = todo | ((f0 - f_new) < 1e-12 * (1 + np.abs(f0))) | (moved < 1e-10)
        active = active[~done]
    return theta, f


def _batch(levels: list[tuple], sigmoid: str, direction: str) -> _Batch:
    """Pad ``(x, k, n, guess)`` arrays of several data sets into one :class:`_Batch`."""
    L = max(len(v[0]) for v in levels)
    D = len(levels)
    x, k, n, g = (np.zeros((D, L)) for _ in range(4))
    lower, upper = np.empty((D, 3)), np.empty((D, 3))
    for i, (xi, ki, ni, gi) in enumerate(levels):
        m = len(xi)
        x[i, :m], k[i, :m], n[i, :m], g[i, :m] = xi, ki, ni, gi
        x[i, m:] = xi[0]  # padding: n = 0, no weight
        g[i, m:] = gi[0]
        bd = borders(xi)
        lower[i] = bd["threshold"][0], math.log(bd["width"][0]), 0.0
        upper[i] = bd["threshold"][1], math.log(bd["width"][1]), min(LAPSE_MAX, 1 - max(gi) - 1e-9)
    return _Batch(x, k, n, g, lower, upper, sigmoid, direction)


def _check_counts(x, k, n, guess):
    x, k, n = (np.asarray(v, float).ravel() for v in (x, k, n))
    g = np.broadcast_to(np.asarray(guess, float), x.shape).astype(float)
    if not (len(x) == len(k) == len(n)):
        raise BayesobsInputError("levels, right answers and trials differ in length")
    if len(np.unique(x)) != len(x) or len(x) < MIN_LEVELS:
        raise BayesobsInputError(f"a psychometric fit needs at least {MIN_LEVELS} distinct levels")
    if not (np.isfinite(x).all() and (n > 0).all() and (k >= 0).all() and (k <= n).all()):
        raise BayesobsInputError("counts must satisfy 0 <= right <= trials, trials > 0")
    if not (np.isfinite(g).all() and (g >= 0).all() and (g < 1).all()):
        raise BayesobsInputError("the guess rate (chance) must lie in [0, 1)")
    order = np.argsort(x)
    return x[order], k[order], n[order], g[order]


def fit_many(
    groups: list[tuple],
    sigmoid: str = "norm",
    direction: str = "decreasing",
    bootstrap: int = BOOTSTRAP,
    seed: int = 0,
) -> list[dict]:
    """Fit every ``(x, k, n, guess)`` group; one dict per group (see :func:`fit_psychometric`)."""
    check_options(sigmoid, direction)
    B = int(bootstrap)
    if B < 0:
        raise BayesobsInputError(f"bootstrap must be 0 or more, not {bootstrap}")
    data = [_check_counts(*g) for g in groups]
    if not data:
        return []
    from scipy import stats  # start-up time: loaded only where there is a curve to test

    batch = _batch(data, sigmoid, direction)
    theta, _ = _fit_batch(batch)
    out = []
    p_hat = batch.parts(theta)[-1]
    reps = []
    for i, (x, k, n, g) in enumerate(data):
        dev = max(0.0, float(deviance(k, n, p_hat[i, : len(x)])))
        span = batch.upper[i] - batch.lower[i]
        at = [
            name
            for j, name in enumerate(PARAMS)
            if min(theta[i, j] - batch.lower[i, j], batch.upper[i, j] - theta[i, j])
            <= 1e-6 * span[j]
        ]
        df = len(x) - 3
        out.append(
            {
                "threshold": float(theta[i, 0]),
                "width": float(math.exp(theta[i, 1])),
                "lapse": float(theta[i, 2]),
                "deviance": dev,
                "log_likelihood": log_likelihood(
                    x, k, n, g, theta[i, 0], math.exp(theta[i, 1]), theta[i, 2], sigmoid, direction
                ),
                "gof_p_chi2": float(stats.chi2.sf(dev, df)) if df > 0 else np.nan,
                "at_bound": ";".join(at),
                "n_levels": len(x),
                "n_trials": int(n.sum()),
            }
        )
        if B:
            rng = np.random.default_rng([int(seed), i])
            sims = rng.binomial(n.astype(int)[None, :], p_hat[i, : len(x)][None, :], (B, len(x)))
            reps += [(x, s, n, g) for s in sims]
    for name in ("lo", "hi"):
        for r in out:
            for p in PARAMS:
                r[f"{p}_{name}"] = np.nan
    for r in out:
        r["gof_p"] = np.nan
        r["bootstrap"] = B
        r["interval_note"] = "" if B else NO_BOOTSTRAP_NOTE
    if not B:
        return out
    rb = _batch(reps, sigmoid, direction)
    th_b, _ = _fit_batch(rb, start=np.repeat(theta, B, axis=0), grid=SMALL_GRID)
    dev_b = deviance(rb.k, rb.n, rb.parts(th_b)[-1])
    vals = np.column_stack([th_b[:, 0], np.exp(th_b[:, 1]), th_b[:, 2]]).reshape(len(data), B, 3)
    dev_b = dev_b.reshape(len(data), B)
    for i, r in enumerate(out):
        lo, hi = np.percentile(vals[i], [2.5, 97.5], axis=0)
        for j, p in enumerate(PARAMS):
            r[f"{p}_lo"], r[f"{p}_hi"] = float(lo[j]), float(hi[j])
        r["gof_p"] = float((1 + np.sum(dev_b[i] >= r["deviance"] - 1e-9)) / (1 + B))
    return out


def fit_psychometric(
    x,
    k,
    n,
    guess,
    sigmoid: str = "norm",
    direction: str = "decreasing",
    bootstrap: int = BOOTSTRAP,
    seed: int = 0,
) -> dict:
    """Maximum-likelihood psychometric function of one group of binomial counts."""
    return fit_many([(x, k, n, guess)], sigmoid, direction, bootstrap, seed)[0]


# ------------------------------------------------------------------ trial tables
def search_chance(task: str, search_condition: str, answer: str) -> float:
    """A uniform guesser's accuracy on a visual-search trial (NaN where unknown)."""
    if answer == "cell":
        return 1 / len(S.CELLS)
    radius = {
        "circle_sizes": S.TARGET_RADIUS.get(search_condition, np.nan),
        "two_among_five": S.GLYPH_RADIUS,
        "light_priors": S.SPHERE_RADIUS,
    }.get(task, np.nan)
    return float(math.pi * radius**2 / S.SIZE**2)


def _search_levels(trials: pd.DataFrame) -> pd.DataFrame:

    t = search_table(trials)
    guess = [
        search_chance(a, b, c)
        for a, b, c in zip(t["task"], t["condition"], t["answer"], strict=True)
    ]
    return pd.DataFrame(
        {
            "paradigm": "search",
            "subject": t["subject"].to_numpy(),
            "task": t["task"].to_numpy(),
            "variant": t["condition"].to_numpy(),  # the search condition (search.csv's condition)
            "modality": t["modality"].to_numpy(),
            "condition": t["ablation"].to_numpy(),  # the runner's condition (search.csv's ablation)
            "answer": t["answer"].to_numpy(),
            "level": LEVELS["search"],
            "x": t["set_size"].to_numpy(float),
            "k": t["correct"].to_numpy(float),
            "guess": np.asarray(guess, float),
        }
    )


def _perception_levels(trials: pd.DataFrame) -> pd.DataFrame:

    t = perception_table(trials)
    return pd.DataFrame(
        {
            "paradigm": "perception",
            "subject": t["subject"].to_numpy(),
            "task": t["task"].to_numpy(),
            "variant": t["variant"].to_numpy(),
            "modality": t["modality"].to_numpy(),
            "condition": t["condition"].to_numpy(),
            "answer": "",
            "level": LEVELS["perception"],
            "x": t["problem_size"].to_numpy(float),
            "k": t["hit"].to_numpy(float),  # an invalid reply is wrong, as in perception.csv
            "guess": t["chance"].to_numpy(float),
        }
    )


def _choice_levels(trials: pd.DataFrame) -> pd.DataFrame:
    """The rows of right/wrong tables (paradigm ``choice``): an invalid reply is wrong."""
    t = trials[paradigm_rows(trials, "choice")]
    return pd.DataFrame(
        {
            "paradigm": "choice",
            "subject": t["subject"].astype(str).to_numpy(),
            "task": t["task"].astype(str).to_numpy(),
            "variant": "",
            "modality": t["modality"].astype(str).to_numpy(),
            "condition": t["condition"].astype(str).to_numpy(),
            "answer": "",
            "level": LEVELS["choice"],
            "x": pd.to_numeric(t["level"], errors="coerce").to_numpy(float),
            "k": pd.to_numeric(t["correct"], errors="coerce").fillna(0.0).to_numpy(float),
            "guess": pd.to_numeric(t["chance"], errors="coerce").to_numpy(float),
        }
    )


def right_wrong_trials(trials: pd.DataFrame) -> pd.DataFrame:
    """One row per trial of every right/wrong paradigm: its group keys, level and ``k`` (1/0)."""
    parts = []
    if paradigm_rows(trials, "search").any():
        parts.append(_search_levels(trials))
    if paradigm_rows(trials, "perception").any():
        parts.append(_perception_levels(trials))
    if paradigm_rows(trials, "choice").any():
        parts.append(_choice_levels(trials))
    from ..hvs.logged import is_hvs  # start-up time: the HVS scorers load only here

    hvs = trials[is_hvs(trials)]
    if len(hvs) and "correct" in hvs:
        k = pd.to_numeric(hvs["correct"], errors="coerce").to_numpy(float)
        scored = np.isin(k, (0.0, 1.0))
        h = hvs[scored]
        parts.append(
            pd.DataFrame(
                {
                    "paradigm": "hvs",
                    "subject": h["subject"].astype(str).to_numpy(),
                    "task": h["task"].astype(str).to_numpy(),
                    "variant": "",
                    "modality": h["modality"].astype(str).to_numpy(),
                    "condition": h["condition"].astype(str).to_numpy(),
                    "answer": "",
                    "level": "",
                    "x": np.nan,
                    "k": k[scored],
                    "guess": np.nan,
                }
            )
        )
    if not parts:
        return pd.DataFrame(columns=[*KEYS, "level", "x", "k", "guess"])
    return pd.concat(parts, ignore_index=True)


def psychometric_levels(trials: pd.DataFrame) -> pd.DataFrame:
    """Right answers per level of every right/wrong group: the data the functions are fitted to."""
    parts = []
    if paradigm_rows(trials, "search").any():
        parts.append(_search_levels(trials))
    if paradigm_rows(trials, "perception").any():
        parts.append(_perception_levels(trials))
    if paradigm_rows(trials, "choice").any():
        parts.append(_choice_levels(trials))
    if not parts:
        return pd.DataFrame(columns=LEVEL_COLUMNS)
    t = pd.concat(parts, ignore_index=True)
    t = t[np.isfinite(t["x"])]
    g = t.groupby([*KEYS, "level", "x"], sort=True, dropna=False)
    out = g.agg(n=("k", "size"), k=("k", "sum"), guess=("guess", "mean")).reset_index()
    out["n"] = out["n"].astype(int)
    out["k"] = out["k"].astype(int)
    out["accuracy"] = out["k"] / out["n"]

    out["lo"], out["hi"] = wilson(out["k"].to_numpy(), out["n"].to_numpy())
    return out[LEVEL_COLUMNS]


def psychometric_table(
    levels: pd.DataFrame,
    sigmoid: str = "norm",
    direction: str = "decreasing",
    bootstrap: int = BOOTSTRAP,
    seed: int = 0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``psychometric.csv`` from :func:`psychometric_levels`, and the groups left out."""
    check_options(sigmoid, direction)
    groups, keys, missing = [], [], []
    for key, g in levels.groupby(KEYS, sort=True, dropna=False):
        info = dict(zip(KEYS, key, strict=True))
        what = " ".join(str(v) for v in (info["paradigm"], *key[3:]) if str(v))
        component = f"psychometric {what}"
        name = str(g["level"].iloc[0])
        if len(g) < MIN_LEVELS:
            missing.append(
                (
                    info["subject"],
                    info["task"],
                    component,
                    f"{len(g)} level(s) of {name}; a psychometric function needs at least {MIN_LEVELS}",
                )
            )
            continue
        guess = g["guess"].to_numpy(float)
        if not (np.isfinite(guess).all() and (guess >= 0).all() and (guess < 1).all()):
            missing.append(
                (info["subject"], info["task"], component, "no chance level (column chance)")
            )
            continue
        x, k, n = (g[c].to_numpy(float) for c in ("x", "k", "n"))
        groups.append((x, k, n, guess))
        keys.append(
            info
            | {
                "level": name,
                "guess": float(np.average(guess, weights=n)),
                "guess_min": float(guess.min()),
                "guess_max": float(guess.max()),
            }
        )
    fits = fit_many(groups, sigmoid, direction, bootstrap, seed)
    rows = [
        k | f | {"sigmoid": sigmoid, "direction": direction}
        for k, f in zip(keys, fits, strict=True)
    ]
    return (
        pd.DataFrame(rows, columns=COLUMNS),
        pd.DataFrame(missing, columns=MISSING_COLUMNS),
    )


def hvs_missing(trials: pd.DataFrame) -> pd.DataFrame:
    """One ``missing.csv`` row per subject of HVSBench-style trials: they have no graded level."""
    t = trials[is_hvs(trials)]
    rows = [
        (s, "hvs", "psychometric hvs", "HVSBench-style questions have no graded level")
        for s in sorted(t["subject"].astype(str).unique())
    ]
    return pd.DataFrame(rows, columns=MISSING_COLUMNS)


def psychometric_scores(
    trials: pd.DataFrame, bootstrap: int = BOOTSTRAP, seed: int = 0
) -> tuple[pd.DataFrame | None, pd.DataFrame]:
    """``psychometric.csv`` of a (normalised) trial table and its ``missing.csv`` rows."""
    levels = psychometric_levels(trials)
    table, missing = None, pd.DataFrame(columns=MISSING_COLUMNS)
    if len(levels):
        table, missing = psychometric_table(levels, bootstrap=bootstrap, seed=seed)
    extra = hvs_missing(trials)
    if len(extra):
        missing = pd.concat([missing, extra], ignore_index=True) if len(missing) else extra
    return table, missing


def with_psychometric(scores, table: pd.DataFrame | None, missing: pd.DataFrame):
    """``scores`` (a :class:`bayesobs.scores.Scores`) with ``psychometric`` and its missing rows."""
    old = scores.missing
    if len(missing):
        old = (
            pd.concat([old, missing], ignore_index=True)
            if old is not None and len(old.columns)
            else missing
        )
    return scores._replace(psychometric=table, missing=old)
