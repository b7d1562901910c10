"""Cross-condition transfer: parameters fitted on condition A, tested on condition B.

An AIC winner is the best description of the data it was fitted to, not
evidence of mechanism.  ``fit --transfer A:B`` takes every variant's
maximum-likelihood parameters of a cell in condition ``A`` and applies them,
unchanged, to the same subject, task and modality in condition ``B``:

* the predicted response of each B trial is the variant's central prediction
  (:func:`bayesobs.fits.observers.predict_response`: the mean, or
  ``exp(m_t) - eps`` for log variants) on B's stimuli, run by run (``zbar_r``
  and the Kalman filter over B's own runs), with A's ``eps``;
* ``slope_predicted`` is the OLS slope of that prediction on the stimulus
  and ``slope_observed`` the OLS slope of B's responses on the stimulus,
  both over B's trials with an observed response;
* ``loglik_target`` is the log-likelihood of B's responses under A's
  parameters, ``sigma`` included (METHOD §2, with the Jacobian for log
  variants, and with A's lapse rate over B's response range when the fit has
  one, METHOD §11).

Formulas are in ``docs/method.md`` (Cross-condition transfer).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import BayesobsInputError
from ..trials import CELL_KEYS
from .fitresults import decode_params
from .observers.models import log_epsilon, predict_mean, transform
from .observers.variants import FACTORS, VARIANTS

GROUP_KEYS = tuple(k for k in CELL_KEYS if k != "condition")
COLUMNS = (
    *GROUP_KEYS,
    "source",
    "target",
    "variant",
    *FACTORS,
    "n_source",
    "aic_source",
    "n_target",
    "slope_observed",
    "slope_predicted",
    "slope_error",
    "loglik_target",
    "note",
)


def parse_transfer(spec: str) -> tuple[str, str]:
    """``"A:B"`` -> ``("A", "B")``; a malformed spec is a :class:`BayesobsInputError`.

    Parameters
    ----------
    spec : str
        The ``--transfer`` value, ``SOURCE:TARGET``.

    Returns
    -------
    tuple of str
        The source and target conditions, stripped.

    Raises
    ------
    BayesobsInputError
        Unless ``spec`` names two different, non-empty conditions.
    """
    parts = spec.split(":")
    if len(parts) != 2 or not all(p.strip() for p in parts):
        raise BayesobsInputError(
            f"--transfer {spec}: give two conditions as SOURCE:TARGET (e.g. --transfer short:long)"
        )
    a, b = (p.strip() for p in parts)
    if a == b:
        raise BayesobsInputError(f"--transfer {spec}: source and target are the same condition")
    return a, b


def check_conditions(trials: pd.DataFrame, source: str, target: str) -> None:
    """Refuse a condition the trials do not have, naming the ones they do.

    Parameters
    ----------
    trials : DataFrame
        The normalised trials.
    source, target : str
        The two conditions of ``--transfer``.

    Raises
    ------
    BayesobsInputError
        When either condition is not in ``trials["condition"]``.
    """
    have = sorted(map(str, trials["condition"].unique()))
    for c in (source, target):
        if c not in have:
            raise BayesobsInputError(
                f"--transfer {source}:{target}: no condition {c!r} in the trials "
                f"(conditions: {', '.join(have)})"
            )


def ols_slope(x: np.ndarray, y: np.ndarray) -> float:
    """OLS slope of ``y`` on ``x`` (NaN with fewer than two distinct ``x``).

    Parameters
    ----------
    x : numpy.ndarray
        The predictor.
    y : numpy.ndarray
        The outcome (same length).

    Returns
    -------
    float
        The slope.
    """
    xc = x - x.mean()
    sxx = float(xc @ xc)
    if len(x) < 2 or sxx <= 0:
        return float("nan")
    return float(xc @ (y - y.mean())) / sxx


def transfer_loglik(variant, params: dict, x, y, run, eps: float) -> tuple[np.ndarray, float]:
    """Central predictions of every trial and the LL of the observed ``y`` under ``params``.

    ``LL = sum log[(1 - lambda) N(u_t; m_t, sigma^2) J_t + lambda / (y_max - y_min)]``
    over observed responses, ``J_t = 1 / (y_t + eps)`` for log variants,
    ``lambda = params.get("lapse", 0)``; predictions on the response scale.

    Parameters
    ----------
    variant : Variant
        One of the ten variants.
    params : dict
        Its parameters in natural units (``sigma``, and ``lapse`` if fitted).
    x : numpy.ndarray
        Stimuli of the target trials in presentation order.
    y : numpy.ndarray
        Their responses, NaN where missing.
    run : numpy.ndarray
        Session-run label of each trial.
    eps : float
        The log offset (the source cell's).

    Returns
    -------
    pred : numpy.ndarray
        The central prediction of every trial.
    loglik : float
        The log-likelihood of the observed responses.
    """
    m = predict_mean(variant, params, x, run, eps)
    pred = np.exp(m) - eps if variant.log else m
    obs = ~np.isnan(y)
    yo = y[obs]
    with np.errstate(invalid="ignore", divide="ignore"):
        u = transform(yo, eps, variant.log)
        s = params["sigma"]
        log_n = -0.5 * np.log(2 * np.pi * s * s) - 0.5 * ((u - m[obs]) / s) ** 2
        if variant.log:
            log_n = log_n - np.log(yo + eps)
    lam = float(params.get("lapse", 0.0) or 0.0)
    if lam > 0:
        span = float(yo.max() - yo.min()) if len(yo) else 0.0
        lap = np.log(lam / span) if span > 0 else -np.inf
        log_n = np.logaddexp(np.log1p(-lam) + log_n, lap)
    return pred, float(np.sum(log_n))


def transfer_table(
    trials: pd.DataFrame, fits: pd.DataFrame, source: str, target: str
) -> pd.DataFrame:
    """``transfer.csv``: one row per cell present in both conditions and variant.

    ``trials``: the normalised trials that were fitted; ``fits``: their
    ``fits.csv`` rows (:func:`bayesobs.fits.fitting.fits_table`).

    Parameters
    ----------
    trials : DataFrame
        The normalised trials that were fitted.
    fits : DataFrame
        Their ``fits.csv`` rows (every variant of every source cell).
    source, target : str
        The conditions parameters are taken from and applied to.

    Returns
    -------
    DataFrame
        The :data:`COLUMNS`; ``note`` says why a variant has no prediction
        (not fitted on the source, or a log variant not applicable to the target).
    """
    trials = trials.assign(condition=trials["condition"].astype(str))
    fits = fits.assign(condition=fits["condition"].astype(str))
    by_cell = {k: g for k, g in trials.groupby(list(CELL_KEYS), sort=True)}
    fit_rows = fits.set_index([*CELL_KEYS, "variant"])
    rows = []
    for key, src in by_cell.items():
        group = dict(zip(CELL_KEYS, key, strict=True))
        if group["condition"] != source:
            continue
        tkey = tuple(target if k == "condition" else group[k] for k in CELL_KEYS)
        tgt = by_cell.get(tkey)
        if tgt is None:
            continue
        tgt = tgt.sort_values(["session", "run", "trial"])
        x = tgt["stimulus"].to_numpy(float)
        y = tgt["response"].to_numpy(float)
        run = (tgt["session"].astype(str) + "/" + tgt["run"].astype(str)).to_numpy()
        obs = ~np.isnan(y)
        eps = log_epsilon(src["stimulus"].to_numpy(float))
        slope_obs = ols_slope(x[obs], y[obs])
        for v in VARIANTS:
            fit = fit_rows.loc[(*key, v.name)]
            params = decode_params(fit["params"])
            row = {
                **{k: group[k] for k in GROUP_KEYS},
                "source": source,
                "target": target,
                "variant": v.name,
                **{f: bool(getattr(v, f)) for f in FACTORS},
                "n_source": int(fit["n"]),
                "aic_source": fit["aic"],
                "n_target": int(obs.sum()),
                "slope_observed": slope_obs,
                "slope_predicted": np.nan,
                "slope_error": np.nan,
                "loglik_target": np.nan,
                "note": "",
            }
            if "skipped" in params:
                row["note"] = f"not fitted on {source}: {params['skipped']}"
            elif v.log and ((x <= 0).any() or (y[obs] <= -eps).any()):
                row["note"] = (
                    f"log variant not applicable to {target}: a stimulus <= 0 or a response <= -eps"
                )
            else:
                pred, ll = transfer_loglik(v, params, x, y, run, eps)
                row["slope_predicted"] = ols_slope(x[obs], pred[obs])
                row["slope_error"] = row["slope_predicted"] - slope_obs
                row["loglik_target"] = ll
            rows.append(row)
    return pd.DataFrame(rows, columns=list(COLUMNS))


def transfer_summary(table: pd.DataFrame, source: str, target: str) -> str:
    """One line: cells, the AIC winner on the source and the best variant on the target.

    Parameters
    ----------
    table : DataFrame
        :func:`transfer_table` rows.
    source, target : str
        The two conditions.

    Returns
    -------
    str
        The line; sums of ``aic_source`` and ``loglik_target`` over the cells
        pick the two variants, each with its median absolute slope error.
    """
    if table.empty:
        return f"transfer {source} -> {target}: no cell has both conditions"
    total = table.groupby("variant", sort=False).agg(
        aic=("aic_source", "sum"),
        ll=("loglik_target", "sum"),
        err=("slope_error", lambda e: e.abs().median()),
    )
    n = len(table.drop_duplicates(list(GROUP_KEYS)))
    best_aic = total["aic"].idxmin()
    best_ll = total["ll"].idxmax()
    return (
        f"transfer {source} -> {target}: {n} cell(s); best AIC on {source}: {best_aic} "
        f"(median |slope error| on {target} {total.loc[best_aic, 'err']:.3f}); "
        f"best LL on {target}: {best_ll} (median |slope error| {total.loc[best_ll, 'err']:.3f})"
    )
