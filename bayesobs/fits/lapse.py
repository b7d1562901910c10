"""Lapses (METHOD §11): a uniform lapse rate beside every observer variant.

``p(y_t) = (1 - lambda) N(u_t; m_t, sigma^2) J_t + lambda / (y_max - y_min)``
on the response scale, ``lambda`` in [0, 0.2], ``y_min``/``y_max`` the range of
the cell's observed responses.  Fitted by EM, vectorised over every dataset
(cell or bootstrap replicate) of a chunk:

* E-step: the responsibility ``r_t`` of the observer for each response.
* M-step: ``lambda`` is the mean non-responsibility (clipped to [0, 0.2]); the
  observer's parameters are the closed forms of :mod:`bayesobs.fits.kernel` on
  ``r``-weighted sufficient statistics, and for the Kalman variants a
  golden-section search of ``log rho`` around the current value (a
  generalised EM step: a new value is kept only where it lowers the weighted
  residual sum of squares).

Two starts, as METHOD says: the no-lapse fit with a small initial
``lambda`` (0.01), and ``lambda = 0.1``.  The better one is kept, and where
neither beats the no-lapse fit itself (``lambda = 0``) that fit is reported
with ``lapse = 0``.  Work happens on the (dataset, run) pairs of the
bootstrap count matrix, like the golden-section refinement of the engine.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .kernel import closed_forms, golden, gram_stats, kalman_moments, rss_kalman
from .levels import level_evaluator, newton_levels

LAPSE_MAX = 0.2
LAPSE_STARTS = (0.01, 0.1)
EM_ITERATIONS = 200
EM_TOLERANCE = 1e-9  # relative change of the log-likelihood
KALMAN_BRACKET = 2.0  # half-width of the log-rho search of one M-step
_LOG_2PI = np.log(2 * np.pi)


def _pairs(W):
    coo = W.tocoo()
    return coo.row, coo.col, coo.data


def _to_dataset(values, d_p, w_p, D):
    """Sum ``values`` (one per pair) into datasets with the bootstrap multiplicities."""
    return np.bincount(d_p, weights=w_p * values, minlength=D)


class Pairs:
    """Per-pair trial arrays of one transform (identity or log), ``(P, T)``."""

    def __init__(self, W, z, u, obs, present, jac_trial, uniform, floor, D):
        self.d_p, self.r_p, self.w_p = _pairs(W)
        self.D = D
        self.z = z[self.r_p]
        self.u = u[self.r_p]
        self.obs = obs[self.r_p]
        self.present = present[self.r_p]
        self.zbar = (self.z.sum(1) / self.present.sum(1))[:, None]
        self.jac = jac_trial[self.r_p]  # log(y + eps) for log variants, else 0
        self.uniform = uniform[self.d_p][:, None]  # 1 / (y_max - y_min), response scale
        self.floor = floor  # (D,) variance floor
        self.gram = gram_stats

    def stats(self, r):
        """``r``-weighted Gram statistics per dataset, ``(D, 10)``.

        Parameters
        ----------
        r : ndarray, shape (P, T)
            Weight of each pair-trial (the observer's responsibilities).

        Returns
        -------
        ndarray, shape (D, 10)
            :func:`bayesobs.fits.kernel.gram_stats` summed over each dataset's
            pairs with their bootstrap multiplicities.
        """
        G = self.gram(self.z, self.u, self.present, r)
        return np.stack(
            [_to_dataset(G[:, j], self.d_p, self.w_p, self.D) for j in range(G.shape[1])], axis=1
        )

    def kalman_moments(self, r, log_rho):
        """``r``-weighted ``sum mu``, ``sum mu^2``, ``sum mu u`` per dataset.

        Parameters
        ----------
        r : ndarray, shape (P, T)
            Weight of each pair-trial.
        log_rho : ndarray, shape (D,)
            ``log rho`` of each dataset.

        Returns
        -------
        list of ndarray
            ``[s1, s2, s3]``, each of shape ``(D,)``.
        """
        s = kalman_moments(self.z.T.copy(), self.u.T.copy(), r.T.copy(), np.exp(log_rho)[self.d_p])
        return [_to_dataset(m, self.d_p, self.w_p, self.D) for m in s]

    def kalman_mean(self, log_rho):
        """Filter means ``mu_t`` of every pair at ``log_rho`` (one value per dataset).

        Parameters
        ----------
        log_rho : ndarray, shape (D,)
            ``log rho`` of each dataset.

        Returns
        -------
        ndarray, shape (P, T)
            The Kalman filter's mean after each trial of each pair's run.
        """
        T, P = self.z.shape[1], self.z.shape[0]
        rho = np.exp(log_rho)[self.d_p]
        mu = np.empty((P, T))
        mu[:, 0] = self.z[:, 0]
        k = np.ones(P)
        for t in range(1, T):
            k = (k + rho) / (k + rho + 1.0)
            mu[:, t] = mu[:, t - 1] + k * (self.z[:, t] - mu[:, t - 1])
        return mu


def _m_step(variant, pairs: Pairs, r, state):
    """Observer parameters (centred) from ``r``-weighted statistics; returns ``(state, rss, n)``."""
    G = pairs.stats(r)
    n = G[:, 0]
    if variant.family != "kalman":
        base = (
            variant.family
            if variant.family == "linear"
            else variant.family + ("_gain" if variant.gain else "")
        )
        rss, p = closed_forms(G)[base]
        return {**state, **p}, rss, n
    j = 1 if variant.gain else 0

    def rss_at(th):
        return rss_kalman(G, *pairs.kalman_moments(r, th))[j]

    th = state["log_rho"]
    current = rss_at(th)
    lo = np.maximum(th - KALMAN_BRACKET, -18.0)
    hi = np.minimum(th + KALMAN_BRACKET, 18.0)
    x, f = golden(rss_at, lo, hi, iterations=24)
    better = f < current
    th = np.where(better, x, th)
    rk, rg, g, delta = rss_kalman(G, *pairs.kalman_moments(r, th))
    out = {**state, "log_rho": th}
    if variant.gain:
        out.update(g=g, delta=delta)
        return out, rg, n
    return out, rk, n


def _mean(variant, pairs: Pairs, state):
    """Predicted ``m_t`` of every pair-trial (centred coordinates)."""
    d = pairs.d_p
    if variant.family == "linear":
        return state["w"][d, None] * pairs.z + state["b"][d, None]
    if variant.family == "static":
        om = state["w_prior"][d, None]
        core = (1 - om) * pairs.z + om * pairs.zbar
    else:
        core = pairs.kalman_mean(state["log_rho"])
    if variant.gain:
        return state["g"][d, None] * core + state["delta"][d, None]
    return core


def _sigma2(rss, n, floor):
    """The M-step's noise variance: weighted RSS over weighted count, at least the floor."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.maximum(np.maximum(rss, 0.0) / np.where(n > 0, n, 1.0), floor)


def _lapse_rate(pairs, r, n_obs, D):
    """The M-step's lapse rate per dataset: the mean lapse responsibility, within [0, LAPSE_MAX]."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.clip(
            _to_dataset((pairs.obs - r).sum(1), pairs.d_p, pairs.w_p, D) / n_obs, 0.0, LAPSE_MAX
        )


def _e_step(pairs: Pairs, m, sigma2, lam):
    """Responsibilities and the mixture log-likelihood per dataset."""
    d = pairs.d_p
    s2 = sigma2[d, None] if sigma2.ndim == 1 else sigma2
    lam_p = lam[d, None]
    with np.errstate(divide="ignore", invalid="ignore", under="ignore"):
        log_obs = np.log1p(-lam_p) - 0.5 * (_LOG_2PI + np.log(s2)) - 0.5 * (pairs.u - m) ** 2 / s2
        log_obs = log_obs - pairs.jac
        log_lap = np.log(lam_p * pairs.uniform)
        top = np.maximum(log_obs, log_lap)
        log_mix = top + np.log(np.exp(log_obs - top) + np.exp(log_lap - top))
        r = np.where(pairs.obs, np.exp(log_obs - log_mix), 0.0)
    ll_pair = np.where(pairs.obs, log_mix, 0.0).sum(1)
    return r, _to_dataset(ll_pair, d, pairs.w_p, pairs.D)


def fit_lapse(variant, pairs: Pairs, log_rho0):
    """EM over every dataset for one variant; returns ``(ll, params, lapse)``.

    ``log_rho0``: the no-lapse fit's ``log rho`` (Kalman variants).  The
    parameters are in the centred coordinates of the engine (``b`` and
    ``delta`` still to be shifted back), with ``sigma`` and, for the Kalman
    variants, ``log_rho``.

    Parameters
    ----------
    variant : Variant
        The observer variant (:data:`bayesobs.fits.observers.variants.VARIANTS`).
    pairs : Pairs
        The (dataset, run) pairs' trial arrays on the variant's scale.
    log_rho0 : ndarray, shape (D,)
        Start of ``log rho`` (clipped to [-18, 18]); unused for non-Kalman variants.

    Returns
    -------
    ll : ndarray, shape (D,)
        The mixture log-likelihood of the better EM start per dataset.
    params : dict of str to ndarray
        Its parameters per dataset (centred), with ``sigma``.
    lapse : ndarray, shape (D,)
        Its lapse rate ``lambda`` in [0, LAPSE_MAX].
    """
    D = pairs.D
    n_obs = _to_dataset(pairs.obs.sum(1).astype(float), pairs.d_p, pairs.w_p, D)
    best_ll = np.full(D, -np.inf)
    best_state: dict[str, np.ndarray] = {}
    best_lam = np.zeros(D)
    for lam0 in LAPSE_STARTS:
        lam = np.full(D, lam0)
        state = {"log_rho": np.clip(log_rho0, -18.0, 18.0)} if variant.family == "kalman" else {}
        r = pairs.obs.astype(float)  # the first M-step: the no-lapse fit
        prev = np.full(D, -np.inf)
        for _ in range(EM_ITERATIONS):
            state, rss, n = _m_step(variant, pairs, r, state)
            sigma2 = _sigma2(rss, n, pairs.floor)
            m = _mean(variant, pairs, state)
            r, ll = _e_step(pairs, m, sigma2, lam)
            lam = _lapse_rate(pairs, r, n_obs, D)
            done = np.abs(ll - prev) <= EM_TOLERANCE * np.maximum(np.abs(ll), 1.0)
            prev = ll
            if done.all():
                break
        # the log-likelihood of the final (state, sigma, lambda)
        state, rss, n = _m_step(variant, pairs, r, state)
        sigma2 = _sigma2(rss, n, pairs.floor)
        _, ll = _e_step(pairs, _mean(variant, pairs, state), sigma2, lam)
        better = ll > best_ll
        best_ll = np.where(better, ll, best_ll)
        best_lam = np.where(better, lam, best_lam)
        full = {**state, "sigma": np.sqrt(sigma2)}
        for k, v in full.items():
            best_state[k] = np.where(better, v, best_state.get(k, v))
    return best_ll, best_state, best_lam


# ------------------------------------------------- interleaved levels (§10)
LEVEL_NEWTON_STEPS = 1  # Newton steps of log rho_c per M-step (a generalised EM step)


class LevelPairs(Pairs):
    """:class:`Pairs` with an interleaved column's level codes (METHOD §10 with §11).

    ``floor`` is ``(L, D)``: one variance floor per level and dataset.
    """

    def __init__(self, W, z, u, obs, present, jac_trial, uniform, floor, D, lev, L):
        super().__init__(W, z, u, obs, present, jac_trial, uniform, floor, D)
        self.lev = lev[self.r_p]  # (P, T)
        self.L = L
        P = len(self.d_p)
        # datasets x pairs: each pair is its own "run" for the level evaluator
        self.pair_matrix = sp.csr_matrix(
            (self.w_p.astype(float), (self.d_p, np.arange(P))), shape=(D, P)
        )
        self.zt, self.ut, self.levt = self.z.T.copy(), self.u.T.copy(), self.lev.T.copy()

    def level_stats(self, r):
        """``r``-weighted Gram statistics per level and dataset, ``(L, D, 10)``.

        Parameters
        ----------
        r : ndarray, shape (P, T)
            Weight of each pair-trial.

        Returns
        -------
        ndarray, shape (L, D, 10)
            :meth:`Pairs.stats` of the trials of each level.
        """
        return np.stack([self.stats(np.where(self.lev == c, r, 0.0)) for c in range(self.L)])

    def level_mean(self, log_rho):
        """Filter means ``mu_t`` of every pair at ``log_rho`` (``(D, L)``, one vector per dataset).

        Parameters
        ----------
        log_rho : ndarray, shape (D, L)
            ``log rho`` of each level of each dataset; each trial's gain uses
            its own level's ``rho``.

        Returns
        -------
        ndarray, shape (P, T)
            The filter's mean after each trial of each pair's run.
        """
        rho = np.exp(log_rho)[self.d_p]  # (P, L)
        P, T = self.z.shape
        rows = np.arange(P)
        mu = np.empty((P, T))
        mu[:, 0] = self.z[:, 0]
        var = 1.0 / rho[rows, self.lev[:, 0]]
        for t in range(1, T):
            r = rho[rows, self.lev[:, t]]
            pm = var + 1.0
            denom = r * pm + 1.0
            var = pm / denom
            mu[:, t] = mu[:, t - 1] + (r * pm / denom) * (self.z[:, t] - mu[:, t - 1])
        return mu


def _base(variant) -> str:
    if variant.family == "linear":
        return "linear"
    return variant.family + ("_gain" if variant.gain else "")


def _m_step_levels(variant, pairs: LevelPairs, r, state):
    """Per-level observer parameters from ``r``-weighted statistics: ``(state, rss (L, D), n)``."""
    G = pairs.level_stats(r)
    n = G[..., 0]
    L, D = pairs.L, pairs.D
    if variant.family != "kalman":
        res = [closed_forms(G[c])[_base(variant)] for c in range(L)]
        p = {k: np.stack([x[1][k] for x in res]) for k in res[0][1]}
        return {**state, **p}, np.stack([x[0] for x in res]), n
    evaluate = level_evaluator(
        pairs.pair_matrix, G, pairs.floor, pairs.zt, pairs.ut, r.T.copy(), pairs.levt, L
    )
    jj = np.full(D, 1 if variant.gain else 0)

    def objective(th, items):
        return evaluate(th, jj[items], items)[0]

    th = state["log_rho"]
    th, _ = newton_levels(objective, th, objective(th, np.arange(D)), LEVEL_NEWTON_STEPS)
    _, rss, g, delta = evaluate(th, jj, np.arange(D))
    out = {**state, "log_rho": th}
    if variant.gain:
        out.update(g=g, delta=delta)
    return out, rss, n


def _mean_levels(variant, pairs: LevelPairs, state):
    """Predicted ``m_t`` of every pair-trial under its own level's parameters (centred)."""
    d = pairs.d_p[:, None]

    def at(name):
        return state[name][pairs.lev, d]  # (L, D) -> (P, T)

    if variant.family == "linear":
        return at("w") * pairs.z + at("b")
    if variant.family == "static":
        om = at("w_prior")
        core = (1 - om) * pairs.z + om * pairs.zbar
    else:
        core = pairs.level_mean(state["log_rho"])
    if variant.gain:
        return at("g") * core + at("delta")
    return core


def fit_lapse_levels(variant, pairs: LevelPairs, log_rho0):
    """EM over every dataset of an interleaved fit; returns ``(ll, params, lapse)``.

    The model: ``(1 - lambda) N(u_t; m_t, sigma_c(t)^2) J_t + lambda / (y_max - y_min)``
    with each level's mean parameters and ``sigma_c``, and one ``lambda``
    per dataset.  Starts and stopping as :func:`fit_lapse`.  ``log_rho0``:
    ``(D, L)``, the no-lapse fit's (Kalman variants).  Parameters come back
    as ``(L, D)`` arrays in centred coordinates (``log_rho``: ``(D, L)``).

    Parameters
    ----------
    variant : Variant
        The observer variant.
    pairs : LevelPairs
        The (dataset, run) pairs with their level codes.
    log_rho0 : ndarray, shape (D, L)
        Start of ``log rho`` (clipped to [-18, 18]); unused for non-Kalman variants.

    Returns
    -------
    ll : ndarray, shape (D,)
        The mixture log-likelihood of the better EM start per dataset.
    params : dict of str to ndarray
        Its per-level parameters (centred), with ``sigma``.
    lapse : ndarray, shape (D,)
        Its lapse rate ``lambda`` in [0, LAPSE_MAX].
    """
    D = pairs.D
    n_obs = _to_dataset(pairs.obs.sum(1).astype(float), pairs.d_p, pairs.w_p, D)
    best_ll = np.full(D, -np.inf)
    best_state: dict[str, np.ndarray] = {}
    best_lam = np.zeros(D)

    for lam0 in LAPSE_STARTS:
        lam = np.full(D, lam0)
        state = {"log_rho": np.clip(log_rho0, -18.0, 18.0)} if variant.family == "kalman" else {}
        r = pairs.obs.astype(float)  # the first M-step: the no-lapse fit
        prev = np.full(D, -np.inf)
        for _ in range(EM_ITERATIONS):
            state, rss, n = _m_step_levels(variant, pairs, r, state)
            sigma2 = _sigma2(rss, n, pairs.floor)
            m = _mean_levels(variant, pairs, state)
            r, ll = _e_step(pairs, m, sigma2[pairs.lev, pairs.d_p[:, None]], lam)
            lam = _lapse_rate(pairs, r, n_obs, D)
            done = np.abs(ll - prev) <= EM_TOLERANCE * np.maximum(np.abs(ll), 1.0)
            prev = ll
            if done.all():
                break
        state, rss, n = _m_step_levels(variant, pairs, r, state)
        sigma2 = _sigma2(rss, n, pairs.floor)
        m = _mean_levels(variant, pairs, state)
        _, ll = _e_step(pairs, m, sigma2[pairs.lev, pairs.d_p[:, None]], lam)
        better = ll > best_ll
        best_ll = np.where(better, ll, best_ll)
        best_lam = np.where(better, lam, best_lam)
        for k, v in {**state, "sigma": np.sqrt(sigma2)}.items():
            mask = better[:, None] if k == "log_rho" else better[None, :]
            best_state[k] = np.where(mask, v, best_state.get(k, v))
    return best_ll, best_state, best_lam
