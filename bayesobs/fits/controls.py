"""Sequential controls (METHOD §12): the ``anchor`` observer and its log twin.

The anchoring control copies part of the subject's own previous answer:
``m_t = (1 - a) z_t + a u_{t-1}``, ``a`` in [0, 1], with ``u_{t-1}`` the
previous response transformed like the family (identity, or ``log(y + eps)``
for ``anchor_log``).  The first trial of each session run and a trial that
follows a missing response use ``a = 0``.  ``k = 2`` (``a`` and ``sigma``).

It is not a Bayesian observer and not one of the ten variants: it never
enters factor evidence or BayesBench.  It answers one question: does a
non-Bayesian copy of the last answer explain the data as well as the Kalman
observer?  ``controls.csv`` reports its AIC and ``delta_aic``, its AIC minus
the best AIC of the ten variants in the same cell.

Exact fit: with ``e_t = u_t - z_t`` and ``d_t = u_{t-1} - z_t`` (0 where
``a`` is forced to 0), the mean residual is ``e_t - a d_t``, so the least
squares ``a = sum(d e) / sum(d d)`` clipped to [0, 1] is the global optimum
of the profiled likelihood (the residual sum of squares is a convex
quadratic in ``a``).  The three sums are additive over session runs, so
every cell and bootstrap replicate is one sparse product with the count
matrix of :func:`bayesobs.fits.fitting.dataset_matrix`, as in the engine.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from ..trials import CELL_KEYS
from .fitresults import encode_params
from .kernel import gram_stats, quantum_floor, transformed, variance_floor
from .observers.models import log_epsilon, pad_runs
from .runtable import build_runs, dataset_matrix

CONTROLS: tuple[tuple[str, bool], ...] = (("anchor", False), ("anchor_log", True))
CONTROL_K = 2
CONTROL_COLUMNS = (
    "subject",
    "task",
    "modality",
    "condition",
    "control",
    "n",
    "k",
    "loglik",
    "aic",
    "params",
    "delta_aic",
)
KALMAN_VARIANTS = ("kalman", "kalman_gain", "kalman_log", "kalman_log_gain")


class ControlBatch(NamedTuple):
    """Fits of the controls for every cell and bootstrap replicate.

    Arrays have shape ``(cells, 1 + B, len(CONTROLS))``; replicate 0 is the
    full data.  ``skipped`` is ``(cells, len(CONTROLS))``, a reason or ``""``.
    """

    cells: pd.DataFrame
    loglik: np.ndarray
    aic: np.ndarray
    n: np.ndarray
    a: np.ndarray
    sigma: np.ndarray
    skipped: np.ndarray


def anchor_statistics(z, u, obs, present) -> np.ndarray:
    """Per-run sums ``(n, sum d^2, sum d e, sum e^2)`` of the anchoring control.

    Parameters
    ----------
    z, u : ndarray, shape (runs, T)
        Transformed (and equally centred) stimuli and responses.
    obs, present : ndarray of bool, shape (runs, T)
        Observed responses; trials that exist.

    Returns
    -------
    ndarray, shape (runs, 4)
    """
    e = np.where(obs, u - z, 0.0)
    prev_ok = np.zeros_like(obs)
    prev_ok[:, 1:] = obs[:, :-1] & present[:, 1:]  # a previous response exists
    u_prev = np.zeros_like(u)
    u_prev[:, 1:] = u[:, :-1]
    d = np.where(obs & prev_ok, u_prev - z, 0.0)
    return np.stack(
        [obs.sum(1).astype(float), (d * d).sum(1), (d * e).sum(1), (e * e).sum(1)], axis=1
    )


def fit_controls(
    trials: pd.DataFrame, bootstrap: int = 0, seed: int = 0, resample: str = "pooled"
) -> ControlBatch:
    """Maximum-likelihood fits of ``anchor`` and ``anchor_log`` (METHOD §12).

    Parameters
    ----------
    trials : DataFrame
        A normalised trial table (:func:`bayesobs.trials.normalize_trials`).
    bootstrap : int
        Session-run bootstrap replicates, drawn exactly as
        :func:`bayesobs.fits.fitting.fit_batch` draws them with the same ``seed``.
    seed : int
        Seed of the bootstrap draws.
    resample : {"pooled", "stratified"}
        Bootstrap scheme.

    Returns
    -------
    ControlBatch
    """
    cells, runs = build_runs(trials)
    B = int(bootstrap)
    W = dataset_matrix(trials, cells, runs, B, seed, resample)
    C = len(cells)
    cell_of = np.repeat(np.arange(C), 1 + B)
    shape = (C, 1 + B, len(CONTROLS))
    ll, n_out, a_out, s_out = (np.full(shape, np.nan) for _ in range(4))
    skipped = np.full((C, len(CONTROLS)), "", dtype=object)
    constant = cells["constant"].to_numpy(bool)
    for j, (_, log) in enumerate(CONTROLS):
        z, u, obs, jac_run, _ = transformed(runs, cells, log)
        S = np.asarray(W @ anchor_statistics(z, u, obs, runs.present))
        Gd = np.asarray(W @ gram_stats(z, u, runs.present, obs))
        jac = np.asarray(W @ jac_run)
        floor = variance_floor(Gd, quantum_floor(cells, log)[cell_of])
        n, sdd, sde, see = S.T
        with np.errstate(invalid="ignore", divide="ignore"):
            a = np.clip(np.where(sdd > 0, sde / np.where(sdd > 0, sdd, 1.0), 0.0), 0.0, 1.0)
            rss = np.maximum(see - 2 * a * sde + a * a * sdd, 0.0)
            s2 = np.maximum(rss / n, floor)
            loglik = -0.5 * n * np.log(2 * np.pi * s2) - 0.5 * rss / s2 - jac
        reason = cells["log_skipped"].to_numpy().astype(object) if log else np.full(C, "", object)
        few = (n.reshape(C, 1 + B)[:, 0] <= CONTROL_K) & (reason == "")
        reason = np.where(
            few, f"skipped: {CONTROL_K + 1} or more observed responses needed", reason
        )
        reason = np.where(constant, "constant responses", reason)
        skipped[:, j] = reason
        ok = (reason == "")[cell_of] & (n > CONTROL_K)
        ll[:, :, j] = np.where(ok, loglik, np.nan).reshape(C, 1 + B)
        a_out[:, :, j] = np.where(ok, a, np.nan).reshape(C, 1 + B)
        s_out[:, :, j] = np.where(ok, np.sqrt(s2), np.nan).reshape(C, 1 + B)
        n_out[:, :, j] = n.reshape(C, 1 + B)
    aic = 2 * CONTROL_K - 2 * ll
    return ControlBatch(cells, ll, aic, n_out, a_out, s_out, skipped)


def controls_table(controls: ControlBatch, fits: pd.DataFrame) -> pd.DataFrame:
    """``controls.csv``: one row per cell and control, full-data fits.

    Parameters
    ----------
    controls : ControlBatch
        From :func:`fit_controls`.
    fits : DataFrame
        ``fits.csv`` rows of the same trials (:func:`bayesobs.fits.fitting.fits_table`);
        with interleaved levels the joint AIC is the same on every level row.

    Returns
    -------
    DataFrame
        Columns :data:`CONTROL_COLUMNS`, then ``delta_aic_kalman`` (AIC minus
        the best Kalman variant's) and ``beats_kalman`` (``delta_aic_kalman < 0``).
        ``delta_aic`` is the AIC minus the best AIC of the ten variants; NaN
        where the control or every variant was skipped.
    """
    keys = list(CELL_KEYS)
    f = fits.drop_duplicates([*keys, "variant"])
    best = f.groupby(keys, sort=False)["aic"].min().rename("best_aic")
    kal = f[f["variant"].isin(KALMAN_VARIANTS)].groupby(keys, sort=False)["aic"].min()
    rows = []
    cells = controls.cells
    key_cols = {k: list(cells[k]) for k in keys}  # read once (Arrow element access is slow)
    for c in range(len(cells)):
        key = {k: col[c] for k, col in key_cols.items()}
        for j, (name, _) in enumerate(CONTROLS):
            reason = controls.skipped[c, j]
            if reason:
                params = {"skipped": reason}
            else:
                params = {"a": float(controls.a[c, 0, j]), "sigma": float(controls.sigma[c, 0, j])}
            rows.append(
                {
                    **key,
                    "control": name,
                    "n": int(controls.n[c, 0, j]),
                    "k": CONTROL_K,
                    "loglik": controls.loglik[c, 0, j],
                    "aic": controls.aic[c, 0, j],
                    "params": encode_params(params),
                }
            )
    out = pd.DataFrame(rows, columns=list(CONTROL_COLUMNS[:-1]))
    idx = pd.MultiIndex.from_frame(out[keys])
    out["delta_aic"] = out["aic"].to_numpy() - best.reindex(idx).to_numpy()
    out["delta_aic_kalman"] = out["aic"].to_numpy() - kal.reindex(idx).to_numpy()
    out["beats_kalman"] = out["delta_aic_kalman"] < 0
    return out


def anchoring_lines(controls: pd.DataFrame) -> list[str]:
    """One report line per cell where a control beats every Kalman observer by AIC.

    Parameters
    ----------
    controls : DataFrame or None
        The controls table (:func:`controls_table`): cell keys, ``control``,
        ``delta_aic`` and ``delta_aic_kalman``.

    Returns
    -------
    list of str
        One line per row with ``delta_aic_kalman < 0``; empty when
        ``controls`` is None, empty or has no ``delta_aic_kalman`` column.
    """
    if controls is None or controls.empty or "delta_aic_kalman" not in controls:
        return []
    hits = controls[controls["delta_aic_kalman"] < 0]
    lines = []
    for r in hits.itertuples(index=False):
        lines.append(
            f"{r.subject} / {r.task} / {r.modality} / {r.condition}: the {r.control} control "
            f"(copies part of the previous answer) beats the Kalman observers by "
            f"{-r.delta_aic_kalman:.1f} AIC (ΔAIC to the best variant {r.delta_aic:+.1f}); "
            "its sequential evidence may be anchoring, not updating"
        )
    return lines


def simulate_anchor(
    a: float,
    sigma: float,
    x: np.ndarray,
    run: np.ndarray | None = None,
    log: bool = False,
    eps: float | None = None,
    rng=None,
) -> np.ndarray:
    """Draw responses of the anchoring observer (``anchor`` or, with ``log``, ``anchor_log``).

    ``h(y_t) ~ Normal((1 - a) z_t + a h(y_{t-1}), sigma^2)`` inside each
    session run, ``a = 0`` on the first trial of a run.

    Parameters
    ----------
    a, sigma : float
        Anchoring weight in [0, 1] and the noise SD (in log space for ``log``).
    x : array
        Stimuli in presentation order.
    run : array, optional
        Session-run label of each trial (default: one run).
    log : bool
        The log twin: ``h(v) = log(v + eps)``.
    eps : float, optional
        Log offset; default ``1e-3 * max(x)`` (METHOD §2).
    rng : int or Generator, optional

    Returns
    -------
    ndarray
        Responses on the response scale.
    """
    rng = np.random.default_rng(rng)
    x = np.asarray(x, dtype=float)
    run = np.zeros(x.shape, dtype=int) if run is None else np.asarray(run)
    eps = log_epsilon(x) if eps is None else eps
    z = np.log(x + eps) if log else x
    zp, _, groups = pad_runs(z, run)
    noise = sigma * rng.standard_normal(zp.shape)
    u = np.empty_like(zp)
    u[:, 0] = zp[:, 0] + noise[:, 0]
    for t in range(1, zp.shape[1]):
        u[:, t] = (1 - a) * zp[:, t] + a * u[:, t - 1] + noise[:, t]
    out = np.empty_like(z)
    for i, idx in enumerate(groups):
        out[idx] = u[i, : len(idx)]
    return np.exp(out) - eps if log else out
