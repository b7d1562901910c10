"""Pure observer functions: predicted means, log-likelihoods and simulation.

Every function here is a pure function of arrays and a small parameter
NamedTuple; nothing holds fitted state.  Trials are passed as flat arrays in
presentation order together with a ``run`` label per trial (trials of a session
run need not be contiguous, but their relative order is their order in time).

The batched maximum-likelihood engine (:mod:`bayesobs.fits.fitting`) works on
sufficient statistics for speed; the tests check that it agrees with these
functions.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import numpy as np

from .variants import Variant, get_variant

LOG_EPS_FRACTION = 1e-3  # METHOD §2: eps = 1e-3 * max(x over the cell)


class LinearParams(NamedTuple):
    """``m_t = w z_t + b``."""

    w: float
    b: float
    sigma: float


class StaticParams(NamedTuple):
    """``m_t = g[(1 - w_prior) z_t + w_prior zbar_r] + delta``."""

    w_prior: float
    sigma: float
    g: float = 1.0
    delta: float = 0.0


class KalmanParams(NamedTuple):
    """``m_t = g mu_t + delta`` with the diffuse-start Kalman mean ``mu_t``."""

    rho: float
    sigma: float
    g: float = 1.0
    delta: float = 0.0


Params = LinearParams | StaticParams | KalmanParams


def log_epsilon(x: np.ndarray) -> float:
    """The log offset ``eps = 1e-3 * max(x)`` of a cell's stimuli.

    Parameters
    ----------
    x : array
        The cell's stimuli.

    Returns
    -------
    float
        ``eps``.
    """
    return LOG_EPS_FRACTION * float(np.max(x))


def transform(v: np.ndarray, eps: float | None, log: bool) -> np.ndarray:
    """``h(v)``: identity, or ``log(v + eps)`` for log variants.

    Parameters
    ----------
    v : array
        Stimuli or responses.
    eps : float or None
        The cell's log offset (unused unless ``log``).
    log : bool
        A log (Weber) variant.

    Returns
    -------
    ndarray
        ``h(v)`` as floats.
    """
    v = np.asarray(v, dtype=float)
    return np.log(v + eps) if log else v


def kalman_gains(rho: np.ndarray | float, T: int) -> np.ndarray:
    """Gains ``K_1..K_T`` of the diffuse-start filter for each ``rho``.

    ``K_1 = 1`` and ``K_t = (K_{t-1} + rho) / (K_{t-1} + rho + 1)``;
    ``rho = 0`` gives ``1/t`` and ``rho = inf`` gives 1 throughout.

    Parameters
    ----------
    rho : float or array
        Ratio of process to measurement variance, one or many.
    T : int
        Trials in the run.

    Returns
    -------
    ndarray, shape ``np.shape(rho) + (T,)``
        The gains.
    """
    rho = np.asarray(rho, dtype=float)
    K = np.empty(rho.shape + (T,))
    k = np.ones(rho.shape)
    inf = np.isinf(rho)
    r = np.where(inf, 0.0, rho)
    for t in range(T):
        K[..., t] = k
        p = k + r
        k = np.where(inf, 1.0, p / (p + 1.0))
    return K


def kalman_means(z: np.ndarray, rho: np.ndarray | float) -> np.ndarray:
    """Posterior means ``mu_t`` of one run (time on the last axis).

    ``rho`` broadcasts against ``z.shape[:-1]``, so many runs or many values
    of ``rho`` are filtered at once.

    Parameters
    ----------
    z : array, shape (..., T)
        Transformed stimuli of one or many runs.
    rho : float or array
        Ratio of process to measurement variance.

    Returns
    -------
    ndarray, shape of ``z`` broadcast against ``rho``
        The posterior means.
    """
    z = np.asarray(z, dtype=float)
    T = z.shape[-1]
    K = kalman_gains(rho, T)
    K = np.broadcast_to(K, np.broadcast_shapes(K.shape, z.shape))
    z = np.broadcast_to(z, K.shape)
    mu = np.empty(K.shape)
    m = z[..., 0]
    mu[..., 0] = m
    for t in range(1, T):
        m = m + K[..., t] * (z[..., t] - m)
        mu[..., t] = m
    return mu


def _kalman_scan(z, r, tangent: bool):
    """The filter's ``lax.scan``: the means, and with ``tangent`` their derivatives in ``r``."""
    import jax  # optional weight: JAX loads only for posterior/calibration work
    import jax.numpy as jnp  # optional weight: JAX loads only for posterior/calibration work

    def step(carry, zt):
        k, mu = carry[:2]
        p = k + r
        k_new = p / (p + 1.0)
        mu_new = mu + k_new * (zt - mu)
        if not tangent:
            return (k_new, mu_new), mu_new
        dk, dmu = carry[2:]
        # d/dr of k' = p / (p + 1), p = k + r: (dk + 1) / (p + 1)^2
        dk_new = (dk + 1.0) / ((p + 1.0) * (p + 1.0))
        # d/dr of mu + k' (z - mu) = (1 - k') dmu + dk' (z - mu)
        dmu_new = (1.0 - k_new) * dmu + dk_new * (zt - mu)
        return (k_new, mu_new, dk_new, dmu_new), (mu_new, dmu_new)

    zero = jnp.zeros(z.shape[:-1], dtype=z.dtype)
    init = (jnp.ones(z.shape[:-1], dtype=z.dtype), z[..., 0]) + ((zero, zero) if tangent else ())
    _, out = jax.lax.scan(step, init, jnp.moveaxis(z[..., 1:], -1, 0))

    def series(first, rest):
        return jnp.concatenate([first[..., None], jnp.moveaxis(rest, 0, -1)], axis=-1)

    if not tangent:
        return series(z[..., 0], out), None
    return series(z[..., 0], out[0]), series(zero, out[1])


@lru_cache(maxsize=1)
def _kalman_filter_jax():
    """The filter as a ``jax.custom_jvp`` of ``(z, r)`` (built once, when JAX is first needed)."""
    import jax  # optional weight: JAX loads only for posterior/calibration work
    from jax.custom_derivatives import SymbolicZero  # optional weight: as above

    @jax.custom_jvp
    def kalman(z, r):
        return _kalman_scan(z, r, False)[0]

    def jvp(primals, tangents):
        z, r = primals
        z_dot, r_dot = tangents
        through_r = not isinstance(r_dot, SymbolicZero)
        mus, dmus = _kalman_scan(z, r, through_r)  # the derivative only where it is asked for
        terms = [dmus * r_dot[..., None]] if through_r else []
        if not isinstance(z_dot, SymbolicZero):  # the means are linear in z, gains fixed by r
            terms.append(jax.jvp(lambda q: _kalman_scan(q, r, False)[0], (z,), (z_dot,))[1])
        # neither perturbed: JAX does not ask, but a zero tangent is the answer
        return mus, sum(terms[1:], terms[0]) if terms else jax.numpy.zeros_like(mus)

    kalman.defjvp(jvp, symbolic_zeros=True)
    return kalman


def _kalman_jax(z, rho):
    """:func:`kalman_means` for JAX arrays (``lax.scan`` over time; finite ``rho``)."""
    import jax.numpy as jnp  # optional weight: JAX loads only for posterior/calibration work

    r = jnp.broadcast_to(rho, z.shape[:-1])
    return _kalman_filter_jax()(z, r)


def mean_padded(variant: Variant | str, params: dict, z, zbar, xp=np):
    """Predicted means ``m_t`` of every session run at once: the model's one definition.

    Parameters
    ----------
    variant : Variant or str
        One of the ten variants.
    params : dict
        Parameters by name; each a scalar or an array broadcasting against
        ``z.shape[:-1] + (1,)`` (e.g. one value per run, for hierarchical models).
    z : array, shape (runs, T)
        Transformed stimuli, one session run per row (rows padded at the end).
    zbar : array, shape (runs, 1)
        Mean of ``z`` over each run's real trials.
    xp : module
        ``numpy`` or ``jax.numpy``; with JAX the Kalman filter is a ``lax.scan``.

    Returns
    -------
    array, shape (runs, T)
        The predicted means on the model's scale.
    """
    variant = get_variant(variant) if isinstance(variant, str) else variant
    if variant.family == "linear":
        return params["w"] * z + params["b"]
    if variant.family == "static":
        w = params["w_prior"]
        m = (1.0 - w) * z + w * zbar
    elif xp is np:
        rho = np.asarray(params["rho"], dtype=float)
        m = kalman_means(z, rho[..., 0] if rho.ndim else rho)
    else:
        rho = params["rho"]
        m = _kalman_jax(z, rho[..., 0] if getattr(rho, "ndim", 0) else rho)
    if variant.gain:
        m = params["g"] * m + params["delta"]
    return m


def pad_runs(
    values: np.ndarray, run: np.ndarray
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Flat per-trial values to a ``(runs, T)`` array (runs in order of first appearance).

    Parameters
    ----------
    values : array
        One value per trial.
    run : array
        Each trial's session-run label.

    Returns
    -------
    padded : ndarray, shape (runs, T)
        The values, 0 where padded.
    present : bool ndarray, shape (runs, T)
        Which entries are trials.
    index : list of ndarray
        Each run's trial indices, so results can be scattered back.
    """
    groups = _run_groups(run)
    T = max(len(g) for g in groups)
    out = np.zeros((len(groups), T))
    present = np.zeros((len(groups), T), dtype=bool)
    for i, g in enumerate(groups):
        out[i, : len(g)] = values[g]
        present[i, : len(g)] = True
    return out, present, groups


def _run_groups(run: np.ndarray) -> list[np.ndarray]:
    run = np.asarray(run)
    _, inverse = np.unique(run, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    counts = np.bincount(inverse)
    return np.split(order, np.cumsum(counts)[:-1])


def _as_params(variant: Variant, params) -> Params:
    cls = {"linear": LinearParams, "static": StaticParams, "kalman": KalmanParams}[variant.family]
    if isinstance(params, dict):
        return cls(**{k: v for k, v in params.items() if k in cls._fields})
    if not isinstance(params, cls):
        raise TypeError(f"{variant.name} takes {cls.__name__}, got {type(params).__name__}")
    return params


def predict_mean(
    variant: Variant | str,
    params,
    x: np.ndarray,
    run: np.ndarray | None = None,
    eps: float | None = None,
) -> np.ndarray:
    """Predicted mean ``m_t`` of ``u_t = h(y_t)`` in the variant's own space.

    Parameters
    ----------
    variant : Variant or str
        One of the ten variants.
    params : LinearParams, StaticParams, KalmanParams or dict
        Parameters in natural units (log variants: in log space).
    x : array
        Stimuli in presentation order.
    run : array, optional
        Session-run label of each trial (default: one run).
    eps : float, optional
        Log offset; default ``1e-3 * max(x)``.

    Returns
    -------
    ndarray
        One predicted mean per trial, on the variant's scale.
    """
    variant = get_variant(variant) if isinstance(variant, str) else variant
    p = _as_params(variant, params)
    x = np.asarray(x, dtype=float)
    run = np.zeros(x.shape, dtype=int) if run is None else np.asarray(run)
    if eps is None:
        eps = log_epsilon(x)
    z = transform(x, eps, variant.log)
    zp, present, groups = pad_runs(z, run)
    zbar = (zp.sum(1) / present.sum(1))[:, None]
    mp = mean_padded(variant, p._asdict(), zp, zbar)
    m = np.empty_like(z)
    for i, idx in enumerate(groups):
        m[idx] = mp[i, : len(idx)]
    return m


def predict_response(variant, params, x, run=None, eps=None) -> np.ndarray:
    """Central predicted response on the response scale.

    The mean for identity variants; for log variants ``exp(m_t) - eps``
    (the median of the log-normal response).

    Parameters
    ----------
    variant : Variant or str
        One of the ten variants.
    params : LinearParams, StaticParams, KalmanParams or dict
        Parameters in natural units (log variants: in log space).
    x : array
        Stimuli in presentation order.
    run : array, optional
        Session-run label of each trial (default: one run).
    eps : float, optional
        Log offset; default ``1e-3 * max(x)``.

    Returns
    -------
    ndarray
        One predicted response per trial.
    """
    variant = get_variant(variant) if isinstance(variant, str) else variant
    x = np.asarray(x, dtype=float)
    eps = log_epsilon(x) if eps is None else eps
    m = predict_mean(variant, params, x, run, eps)
    return np.exp(m) - eps if variant.log else m


def loglik(variant, params, x, y, run=None, eps=None) -> float:
    """Log-likelihood of responses ``y`` on the response scale (METHOD §2).

    Missing responses (NaN) stay in the observer's sequence but add no term.
    Log variants include the Jacobian ``-sum(log(y + eps))``.

    Parameters
    ----------
    variant : Variant or str
        One of the ten variants.
    params : LinearParams, StaticParams, KalmanParams or dict
        Parameters in natural units (log variants: in log space).
    x : array
        Stimuli in presentation order.
    y : array
        Responses (NaN where missing).
    run : array, optional
        Session-run label of each trial (default: one run).
    eps : float, optional
        Log offset; default ``1e-3 * max(x)``.

    Returns
    -------
    float
        The log-likelihood.
    """
    variant = get_variant(variant) if isinstance(variant, str) else variant
    p = _as_params(variant, params)
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    eps = log_epsilon(x) if eps is None else eps
    m = predict_mean(variant, p, x, run, eps)
    obs = ~np.isnan(y)
    u = transform(y[obs], eps, variant.log)
    r = u - m[obs]
    ll = -0.5 * np.sum(np.log(2 * np.pi * p.sigma**2) + (r / p.sigma) ** 2)
    if variant.log:
        ll -= np.sum(np.log(y[obs] + eps))
    return float(ll)


def simulate(variant, params, x, run=None, eps=None, rng=None) -> np.ndarray:
    """Draw responses ``y`` from the observer: ``h(y) ~ Normal(m_t, sigma^2)``.

    Parameters
    ----------
    variant : Variant or str
        One of the ten variants.
    params : LinearParams, StaticParams, KalmanParams or dict
        Parameters in natural units (log variants: in log space).
    x : array
        Stimuli in presentation order.
    run : array, optional
        Session-run label of each trial (default: one run).
    eps : float, optional
        Log offset; default ``1e-3 * max(x)``.
    rng : numpy.random.Generator, optional
        Random stream (default: a fresh one).

    Returns
    -------
    ndarray
        One simulated response per trial.
    """
    variant = get_variant(variant) if isinstance(variant, str) else variant
    p = _as_params(variant, params)
    rng = np.random.default_rng(rng)
    x = np.asarray(x, dtype=float)
    eps = log_epsilon(x) if eps is None else eps
    m = predict_mean(variant, p, x, run, eps)
    u = m + p.sigma * rng.standard_normal(m.shape)
    return np.exp(u) - eps if variant.log else u
