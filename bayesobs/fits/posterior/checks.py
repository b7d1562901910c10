"""Posterior and prior predictive checks."""

from __future__ import annotations

import warnings
from functools import lru_cache

import numpy as np
import pandas as pd

from ...trials import CELL_KEYS, normalize_trials
from ..observers.models import mean_padded
from ..observers.variants import VARIANTS, get_variant
from ..runtable import build_runs
from .batching import (
    _padded,
    _traced_data,
    canonical_shape,
)
from .model import _rng_key, model, prepare, prepare_cells


def ppc_table(
    trials_cell: pd.DataFrame, variant, idata, draws: int = 200, seed: int = 0
) -> pd.DataFrame:
    """Posterior predictive check of one cell: observed responses beside the model's predictive band.

    Simulates ``draws`` response sequences from posterior draws (through
    :func:`bayesobs.fits.observers.simulate`'s model, :func:`mean_padded`) and
    returns per trial the observed ``response`` and the predictive median,
    5% and 95% quantiles on the response scale.

    Parameters
    ----------
    trials_cell : pandas.DataFrame
        The trials of one cell.
    variant : Variant or str
        The fitted variant, or its name.
    idata : arviz.InferenceData
        The cell's fit (its ``posterior`` in natural units).
    draws : int, default 200
        Posterior draws simulated (at most the fit's number of draws).
    seed : int, default 0
        Seed of the draw choice and the response noise.

    Returns
    -------
    pandas.DataFrame
        One row per observed trial: ``variant``, ``session``, ``run``,
        ``trial``, ``stimulus``, ``response``, ``pred_q05``,
        ``pred_median``, ``pred_q95``.
    """
    variant = get_variant(variant) if isinstance(variant, str) else variant
    data = prepare(trials_cell, variant)
    post = idata.posterior
    rng = np.random.default_rng(seed)
    flat = {
        k: np.asarray(post[k]).reshape(-1, np.asarray(post[k]).shape[-1])[:, 0]
        for k in post.data_vars
    }
    pick = rng.choice(len(flat["sigma"]), size=min(draws, len(flat["sigma"])), replace=False)
    c, sc = data.c[0], data.s[0]
    z_nat = data.z * sc + c
    zbar_nat = data.zbar * sc + c
    sims = []
    for i in pick:
        params = {k: v[i] for k, v in flat.items()}
        m = mean_padded(variant, params, z_nat, zbar_nat)
        u = m + params["sigma"] * rng.standard_normal(m.shape)
        sims.append(u)
    sims = np.array(sims)

    cells, runs = build_runs(trials_cell)
    eps = float(cells["eps"].iloc[0])
    y_sim = np.exp(sims) - eps if variant.log else sims
    q = np.quantile(y_sim, [0.05, 0.5, 0.95], axis=0)
    present = runs.present
    out = pd.DataFrame(
        {
            "session": np.repeat(runs.session, present.sum(1)),
            "run": np.repeat(runs.run, present.sum(1)),
            "trial": np.concatenate([np.arange(k) for k in present.sum(1)]),
            "stimulus": runs.x[present],
            "response": runs.y[present],
            "pred_q05": q[0][present],
            "pred_median": q[1][present],
            "pred_q95": q[2][present],
        }
    )
    out.insert(0, "variant", variant.name)
    return out


PRIOR_PREDICTIVE_QUANTILES = (0.01, 0.05, 0.5, 0.95, 0.99)


@lru_cache(maxsize=64)
def _prior_sampler(name: str, draws: int):
    """One compiled function: ``draws`` response sequences of ``name`` from its priors."""
    import jax  # optional weight: JAX loads only for posterior/calibration work

    # optional weight: NumPyro loads only for posterior/calibration work
    from numpyro.infer import Predictive

    variant = get_variant(name)

    def draw(key, z, obs, zbar):
        data = _traced_data(z, None, obs, zbar)
        return Predictive(model, num_samples=draws)(key, variant, data, False)["u"]

    return jax.jit(draw)


def prior_predictive(
    trials: pd.DataFrame, variants=None, draws: int = 500, seed: int = 0
) -> pd.DataFrame:
    """Prior predictive check: whether responses drawn from the priors cover the observed range.

    For each cell and variant, ``draws`` response sequences are drawn from
    :func:`model` with every parameter from its prior (the cell's own
    stimuli, standardised as the fit standardises them) and mapped back to
    the response scale.  One row per (cell, variant): the pooled prior
    predictive quantiles ``q01, q05, q50, q95, q99`` of the responses at the
    observed trials; ``sim_min_q01``, the 1% quantile of each simulated data
    set's smallest response, and ``sim_max_q99``, the 99% quantile of its
    largest; the observed ``observed_min`` and ``observed_max``; and
    ``covers``: ``sim_min_q01 <= observed_min`` and ``sim_max_q99 >=
    observed_max`` (the priors make a range as wide as the observed one
    plausible; pooled quantiles would be too strict, as the extremes of
    many trials lie beyond them).  Cells where a log variant does not apply
    are left out.

    Parameters
    ----------
    trials : pandas.DataFrame
        Trial table (normalised here).
    variants : list of str, optional
        Variant names; default all ten.
    draws : int, default 500
        Response sequences drawn per cell and variant.
    seed : int, default 0
        Seed of the prior draws.

    Returns
    -------
    pandas.DataFrame
        One row per (cell, variant): the cell keys, ``variant``, ``draws``,
        ``q01``, ``q05``, ``q50``, ``q95``, ``q99``, ``sim_min_q01``,
        ``sim_max_q99``, ``observed_min``, ``observed_max``, ``covers``.
    """
    trials = normalize_trials(trials)
    cells, _ = build_runs(trials)
    eps = {tuple(r[list(CELL_KEYS)]): float(r["eps"]) for _, r in cells.iterrows()}
    names = list(variants or [v.name for v in VARIANTS])
    rows = []
    for name in names:
        v = get_variant(name)
        for key, data in prepare_cells(trials, v):
            if isinstance(data, str):
                continue
            shape = canonical_shape(data)
            z, _, obs, zbar = _padded(data, shape)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                u = np.asarray(_prior_sampler(name, draws)(_rng_key(seed), z, obs, zbar))
            u = u[:, : data.z.shape[0], : data.z.shape[1]]  # padding is past the real trials
            c, sd = data.c[0], data.s[0]
            u_nat = u[:, data.obs] * sd + c
            y_obs = data.u[data.obs] * sd + c
            if v.log:
                with np.errstate(over="ignore"):
                    u_nat, y_obs = np.exp(u_nat) - eps[key], np.exp(y_obs) - eps[key]
            q = np.quantile(u_nat, PRIOR_PREDICTIVE_QUANTILES)
            lo, hi = float(y_obs.min()), float(y_obs.max())
            # the flag compares like with like: a data set's extremes with simulated data sets' extremes
            sim_lo = float(np.quantile(u_nat.min(axis=1), 0.01))
            sim_hi = float(np.quantile(u_nat.max(axis=1), 0.99))
            rows.append(
                {
                    **dict(zip(CELL_KEYS, key, strict=True)),
                    "variant": name,
                    "draws": draws,
                    **{
                        f"q{round(p * 100):02d}": float(x)
                        for p, x in zip(PRIOR_PREDICTIVE_QUANTILES, q, strict=True)
                    },
                    "sim_min_q01": sim_lo,
                    "sim_max_q99": sim_hi,
                    "observed_min": lo,
                    "observed_max": hi,
                    "covers": bool(sim_lo <= lo and sim_hi >= hi),
                }
            )
    return pd.DataFrame(rows)
