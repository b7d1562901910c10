"""The straightforward way: an independent reference implementation.

Python loops, ``scipy.stats.norm.logpdf`` and ``scipy.optimize.minimize``
(L-BFGS-B over every parameter including sigma, several random starts).  It
shares no code with :mod:`bayesobs` so the tests and the benchmark can check
the fast engine against it.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, stats

FAMILY = {
    "linear": ("linear", False, False),
    "static": ("static", False, False),
    "static_gain": ("static", False, True),
    "kalman": ("kalman", False, False),
    "kalman_gain": ("kalman", False, True),
    "linear_log": ("linear", True, False),
    "static_log": ("static", True, False),
    "static_log_gain": ("static", True, True),
    "kalman_log": ("kalman", True, False),
    "kalman_log_gain": ("kalman", True, True),
}
LOG_RHO_BOUNDS = (-20.0, 20.0)


def loop_kalman(z, rho):
    """Diffuse-start Kalman means with an explicit Python loop."""
    mu = [z[0]]
    K = 1.0
    for t in range(1, len(z)):
        K = 1.0 if math.isinf(rho) else (K + rho) / (K + rho + 1.0)
        mu.append(mu[-1] + K * (z[t] - mu[-1]))
    return np.array(mu)


def runs_of(run):
    """Indices of each run's trials, in order of first appearance."""
    out = {}
    for i, r in enumerate(run):
        out.setdefault(r, []).append(i)
    return [np.array(v) for v in out.values()]


def naive_mean(name, p, x, run, eps):
    family, log, gain = FAMILY[name]
    z = np.log(x + eps) if log else np.asarray(x, float)
    if family == "linear":
        return p["w"] * z + p["b"]
    m = np.empty(len(z))
    for idx in runs_of(run):
        if family == "static":
            zbar = sum(z[i] for i in idx) / len(idx)
            m[idx] = [(1 - p["w_prior"]) * z[i] + p["w_prior"] * zbar for i in idx]
        else:
            m[idx] = loop_kalman(z[idx], p["rho"])
    if gain:
        m = p["g"] * m + p["delta"]
    return m


def naive_loglik(name, p, x, y, run, eps):
    """Response-scale log-likelihood via ``scipy.stats.norm.logpdf``."""
    _, log, _ = FAMILY[name]
    m = naive_mean(name, p, x, run, eps)
    obs = ~np.isnan(y)
    u = np.log(y[obs] + eps) if log else y[obs]
    ll = stats.norm.logpdf(u, loc=m[obs], scale=p["sigma"]).sum()
    if log:
        ll -= np.log(y[obs] + eps).sum()
    return float(ll)


def _unpack(name, theta):
    family, _, gain = FAMILY[name]
    if family == "linear":
        return {"w": theta[0], "b": theta[1], "sigma": math.exp(theta[2])}
    p = {"w_prior": theta[0]} if family == "static" else {"rho": math.exp(theta[0])}
    i = 1
    if gain:
        p.update(g=theta[1], delta=theta[2])
        i = 3
    p["sigma"] = math.exp(theta[i])
    return p


def naive_fit(name, x, y, run, eps, starts=5, rng=None):
    """Multi-start L-BFGS-B over all parameters; returns ``(loglik, params)``."""
    rng = np.random.default_rng(rng)
    family, log, gain = FAMILY[name]
    obs = ~np.isnan(y)
    u = np.log(y[obs] + eps) if log else y[obs]
    su = max(float(np.std(u)), 1e-6)
    mu_u = float(np.mean(u))
    best = (-np.inf, None)

    def negll(theta):
        val = naive_loglik(name, _unpack(name, theta), x, y, run, eps)
        return -val if np.isfinite(val) else 1e300

    for _ in range(starts):
        ls = math.log(su * rng.uniform(0.3, 1.5))
        if family == "linear":
            theta0 = [rng.uniform(-1, 2), mu_u * rng.uniform(-1, 1), ls]
            bounds = [(None, None), (None, None), (-25, 10)]
        else:
            first = rng.uniform(0, 1) if family == "static" else rng.uniform(-5, 5)
            b0 = (0, 1) if family == "static" else LOG_RHO_BOUNDS
            theta0, bounds = [first], [b0]
            if gain:
                theta0 += [rng.uniform(0.5, 1.5), mu_u * rng.uniform(-0.5, 0.5)]
                bounds += [(0, None), (None, None)]
            theta0.append(ls)
            bounds.append((-25, 10))
        res = optimize.minimize(negll, theta0, method="L-BFGS-B", bounds=bounds)
        if -res.fun > best[0]:
            best = (-res.fun, _unpack(name, res.x))
    return best
