"""What ArviZ's checks need beside the draws: observed data, constant data and posterior predictive draws."""

from __future__ import annotations

import numpy as np

from ...seeds import stable_rng
from ..observers.models import mean_padded

CORES = ("w", "w_prior", "rho")  # the core parameter of the linear, static and Kalman families


def _response_scale(values: np.ndarray, data, log: bool) -> np.ndarray:
    """Observed-trial values ``(..., obs)`` of the standardised model scale on the response scale."""
    sub = np.broadcast_to(data.subject[:, None], data.obs.shape)[data.obs]
    out = values * data.s[sub] + data.c[sub]
    return np.exp(out) - data.eps[sub] if log else out


def predictive_groups(variant, draws: dict, data, seed: int = 0) -> dict:
    """``observed_data``, ``constant_data`` and ``posterior_predictive`` of one fit.

    Parameters
    ----------
    variant : Variant
        The observer variant fitted.
    draws : dict of str to ndarray
        The model's sites on its own (standardised) scale, ``(chains, draws, S)``.
    data : Data
        The fit's data (:func:`~bayesobs.fits.posterior.model.prepare` or
        ``prepare_cells``), with ``eps`` for a log variant.
    seed : int
        Seed of the predictive draws, with the fit's subjects.

    Returns
    -------
    dict of str to xarray.Dataset
        ``y`` on the response scale along ``y_dim_0``, the observed trials in the
        order of the log-likelihood: the observed responses, ``(chain, draw)`` draws
        of new responses given each posterior draw (float32: seven digits, half the
        size of the log-likelihood they sit beside), and the constant data ``x``
        (stimulus), ``run`` and ``trial`` (position in its run), and
        ``subject_index`` when the fit has several subjects.
    """
    import xarray as xr  # start-up time: xarray loads only to build a posterior

    idx = data.subject
    params = {
        k: np.asarray(draws[k])[..., idx][..., None]
        for k in (*CORES, "b_std", "g", "delta_std")
        if k in draws
    }
    for std, name in (("b_std", "b"), ("delta_std", "delta")):
        if std in params:
            params[name] = params.pop(std)
    mean = mean_padded(variant, params, data.z, data.zbar)[..., data.obs]
    sigma = np.asarray(draws["sigma_std"])[..., idx][..., None]
    sigma = np.broadcast_to(sigma, sigma.shape[:-1] + data.obs.shape[-1:])[..., data.obs]
    rng = stable_rng((seed, "posterior_predictive", *map(str, data.subjects)))
    new = mean + sigma * rng.standard_normal(mean.shape)
    run, trial = np.nonzero(data.obs)
    const = {
        "x": _response_scale(data.z[data.obs], data, variant.log),
        "run": run,
        "trial": trial,
    }
    if len(data.subjects) > 1:
        const["subject_index"] = idx[run]
    y = ("y_dim_0",)
    return {
        "observed_data": xr.Dataset(
            {"y": (y, _response_scale(data.u[data.obs], data, variant.log))}
        ),
        "constant_data": xr.Dataset({k: (y, v) for k, v in const.items()}),
        "posterior_predictive": xr.Dataset(
            {
                "y": (
                    ("chain", "draw", *y),
                    _response_scale(new, data, variant.log).astype(np.float32),
                )
            },
            coords={"chain": np.arange(new.shape[0]), "draw": np.arange(new.shape[1])},
        ),
    }
