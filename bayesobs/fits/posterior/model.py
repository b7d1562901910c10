"""The NumPyro model of the observer variants, its data and per-fit sampling (``MCMC``) and mode."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...trials import CELL_KEYS
from ..observers.models import mean_padded
from ..observers.scale import cell_moments, model_scale
from ..observers.variants import Variant, get_variant
from ..runtable import build_runs
from .predictive import predictive_groups

CORE = {"linear": "w", "static": "w_prior", "kalman": "rho"}


@dataclass
class Data:
    """Padded, standardised arrays of one or several cells (one subject each)."""

    z: np.ndarray  # (R, T)
    u: np.ndarray  # (R, T), 0 where missing/padded
    obs: np.ndarray  # (R, T) bool
    zbar: np.ndarray  # (R, 1)
    subject: np.ndarray  # (R,) subject index
    const: np.ndarray  # (R, T) per-trial log-likelihood offset to the response scale
    c: np.ndarray  # (S,) centre per subject
    s: np.ndarray  # (S,) scale per subject
    subjects: list
    eps: np.ndarray | None = (
        None  # (S,) log offset per subject (the response scale of a log variant)
    )


def prepare(trials: pd.DataFrame, variant: Variant) -> Data:
    """Standardised padded arrays; one subject per cell of ``trials``.

    Parameters
    ----------
    trials : pandas.DataFrame
        Normalised trial table; every cell (``subject, task, modality,
        condition``) becomes one subject of the returned data.
    variant : Variant
        The observer variant; a log variant takes logs of stimuli and
        responses (with the cell's ``eps``).

    Returns
    -------
    Data
        Runs padded to the longest run, ``z`` and ``u`` standardised per
        subject by the mean and SD of its stimuli (``c``, ``s``), and the
        per-trial offset ``const`` back to the response scale.

    Raises
    ------
    ValueError
        When ``variant`` is a log variant and a cell cannot take logs
        (its ``log_skipped`` reason).
    """
    cells, runs = build_runs(trials)
    present = runs.present
    eps_run = cells["eps"].to_numpy()[runs.cell][:, None]
    if variant.log and (cells["log_skipped"] != "").any():
        raise ValueError(f"{variant.name}: not applicable ({cells['log_skipped'].iloc[0]})")
    z, u, obs, jac = model_scale(runs.x, runs.y, present, eps_run, variant.log)
    S = len(cells)
    c, s = cell_moments(z, present, runs.cell, S)
    s = np.where(s > 0, s, 1.0)
    cr, sr = c[runs.cell][:, None], s[runs.cell][:, None]
    zs = np.where(present, (z - cr) / sr, 0.0)
    us = np.where(obs, (u - cr) / sr, 0.0)
    zbar = (zs.sum(1) / present.sum(1))[:, None]
    const = np.where(obs, -np.log(sr) - jac, 0.0)
    subjects = [tuple(cells.loc[k, list(CELL_KEYS)]) for k in range(S)]
    eps = cells["eps"].to_numpy(dtype=float)
    return Data(zs, us, obs, zbar, runs.cell, const, c, s, subjects, eps)


def model(variant: Variant, data: Data, hierarchical: bool = False, prior_scale: float = 1.0):
    """The NumPyro model of ``variant`` for ``data`` (several subjects if hierarchical).

    With ``data.u`` set to ``None`` the responses are drawn rather than
    observed (prior predictive draws, simulation-based calibration).
    ``prior_scale`` multiplies the scale of every Normal and half-Normal
    prior (not the Beta prior of ``w_prior``); anything but 1 is a
    deliberately wrong prior, used to show that the calibration check
    (:mod:`bayesobs.calibration`) detects one.

    Parameters
    ----------
    variant : Variant
        The observer variant (its family sets the core parameter; ``gain``
        adds ``g`` and ``delta``).
    data : Data
        Standardised arrays from :func:`prepare` or :func:`prepare_cells`.
    hierarchical : bool, default False
        Draw each subject's core parameter (on its unconstrained scale) from
        a population ``Normal(mu_pop, tau_pop)``; needs more than one subject.
    prior_scale : float, default 1.0
        Factor on the scale of every Normal and half-Normal prior.

    Returns
    -------
    None
        A NumPyro model: it records sample sites (the parameters, the
        responses ``u``) when run under a NumPyro handler.
    """
    import jax.numpy as jnp  # optional weight: JAX loads only for posterior/calibration work
    import numpyro  # optional weight: NumPyro loads only for posterior/calibration work
    import numpyro.distributions as dist  # optional weight: NumPyro loads only for posterior/calibration work

    S = len(data.subjects)
    fam = variant.family
    pooled = hierarchical and S > 1
    if pooled:  # one population for every subject: outside the subject plate
        mu = numpyro.sample(
            "mu_pop", dist.Normal(0.0 if fam != "linear" else 1.0, 1.5 * prior_scale)
        )
        tau = numpyro.sample("tau_pop", dist.HalfNormal(1.0 * prior_scale))
    with numpyro.plate("subject", S):
        if pooled:
            eta = numpyro.sample("eta", dist.Normal(0.0, 1.0))
            raw = mu + tau * eta
            core = {"linear": raw, "static": 1 / (1 + jnp.exp(-raw)), "kalman": jnp.exp(raw)}[fam]
            numpyro.deterministic(CORE[fam], core)
        elif fam == "linear":
            core = numpyro.sample("w", dist.Normal(1.0, 1.0 * prior_scale))
        elif fam == "static":
            core = numpyro.sample("w_prior", dist.Beta(1.1, 1.1))
        else:
            core = jnp.exp(numpyro.sample("log_rho", dist.Normal(0.0, 3.0 * prior_scale)))
            numpyro.deterministic("rho", core)
        params = {CORE[fam]: core}
        if fam == "linear":
            params["b"] = numpyro.sample("b_std", dist.Normal(0.0, 2.0 * prior_scale))
        if variant.gain:
            params["g"] = numpyro.sample("g", dist.HalfNormal(2.0 * prior_scale))
            params["delta"] = numpyro.sample("delta_std", dist.Normal(0.0, 2.0 * prior_scale))
        sigma = numpyro.sample("sigma_std", dist.HalfNormal(1.0 * prior_scale))
    idx = jnp.asarray(data.subject)
    per_run = {k: v[idx][:, None] for k, v in params.items()}
    m = mean_padded(variant, per_run, jnp.asarray(data.z), jnp.asarray(data.zbar), xp=jnp)
    numpyro.sample(
        "u",
        dist.Normal(m, sigma[idx][:, None]).mask(jnp.asarray(data.obs)),
        obs=None if data.u is None else jnp.asarray(data.u),
    )


def natural_params(variant: Variant, samples: dict, data: Data) -> dict[str, np.ndarray]:
    """Posterior draws in natural units (``(..., S)`` arrays)."""
    fam = variant.family
    out = {CORE[fam]: np.asarray(samples[CORE[fam]])}
    c, s = data.c, data.s
    g = np.asarray(samples["g"]) if variant.gain else 1.0
    if fam == "linear":
        w = out["w"]
        out["b"] = s * np.asarray(samples["b_std"]) + c - w * c  # u = w z + b in natural units
    if variant.gain:
        out["g"] = g
        out["delta"] = s * np.asarray(samples["delta_std"]) + c * (1 - g)
    out["sigma"] = s * np.asarray(samples["sigma_std"])
    for k in ("mu_pop", "tau_pop"):  # the population (hierarchical), on every subject's row
        if k in samples:
            out[k] = np.broadcast_to(np.asarray(samples[k])[..., None], out["sigma"].shape)
    return out


def _rng_key(seed: int):
    import jax  # optional weight: JAX loads only for posterior/calibration work

    return jax.random.PRNGKey(seed)


def sample(
    variant, data: Data, hierarchical=False, chains=4, warmup=500, draws=500, seed=0, progress=False
):
    """NUTS draws of one variant; returns an ArviZ InferenceData with pointwise log-likelihood.

    Parameters
    ----------
    variant : Variant or str
        The variant, or its name.
    data : Data
        Standardised arrays from :func:`prepare`.
    hierarchical : bool, default False
        Fit the subjects jointly with a population distribution
        (:func:`model`).
    chains, warmup, draws : int, default 4, 500, 500
        NUTS chains (run vectorised), warm-up and kept draws per chain.
    seed : int, default 0
        Seed of the sampler's PRNG key.
    progress : bool, default False
        Show NumPyro's progress bar.

    Returns
    -------
    arviz.InferenceData
        ``posterior`` in natural units (:func:`natural_params`, one
        ``subject`` dimension; a hierarchical fit adds the population's
        ``mu_pop`` and ``tau_pop`` on the core parameter's unconstrained scale,
        logit ``w_prior``, log ``rho`` or ``w``, the same on every subject), ``log_likelihood`` ``y`` on the response
        scale (observed trials only) and ``sample_stats`` ``diverging``.
    """
    import arviz as az  # start-up time: ArviZ loads only when posteriors are summarised

    # optional weight: NumPyro loads only for posterior/calibration work
    from numpyro.infer import MCMC, NUTS, log_likelihood

    variant = get_variant(variant) if isinstance(variant, str) else variant
    mcmc = MCMC(
        # a population's funnel (small tau_pop) wants smaller steps than one subject alone
        NUTS(model, target_accept_prob=0.95 if hierarchical else 0.8),
        num_warmup=warmup,
        num_samples=draws,
        num_chains=chains,
        chain_method="vectorized",
        progress_bar=progress,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # numpyro: "There are not enough devices ..."
        mcmc.run(_rng_key(seed), variant, data, hierarchical)
    post = mcmc.get_samples(group_by_chain=True)
    ll = np.asarray(log_likelihood(model, mcmc.get_samples(), variant, data, hierarchical)["u"])
    ll = ll + data.const  # response scale
    ll = ll[:, data.obs].reshape(chains, draws, -1)
    nat = natural_params(variant, post, data)
    extra = mcmc.get_extra_fields(group_by_chain=True)
    idata = az.from_dict(
        posterior={k: np.asarray(v) for k, v in nat.items()},
        log_likelihood={"y": ll},
        sample_stats={"diverging": np.asarray(extra["diverging"])},
        coords={"subject": ["/".join(map(str, s)) for s in data.subjects]},
        dims={k: ["subject"] for k in nat},
    )
    idata.add_groups(predictive_groups(variant, post, data, seed))
    return idata


def _map_start(info):
    """Minimise the potential (negative log posterior) from one NumPyro initialisation."""
    import jax  # optional weight: JAX loads only for posterior/calibration work

    # start-up time: this part of SciPy loads only where it is used
    from scipy.optimize import minimize

    flat, unravel = jax.flatten_util.ravel_pytree(info.param_info.z)
    pot = jax.jit(lambda v: info.potential_fn(unravel(v)))
    grad = jax.jit(jax.grad(lambda v: info.potential_fn(unravel(v))))
    res = minimize(
        lambda v: float(pot(v)),
        np.asarray(flat, dtype=float),
        jac=lambda v: np.asarray(grad(v), dtype=float),
        method="L-BFGS-B",
    )
    return res.fun, unravel(res.x)


def posterior_mode(
    variant, data: Data, hierarchical=False, starts=4, seed=0
) -> dict[str, np.ndarray]:
    """Maximum a posteriori parameters (natural units), multi-start L-BFGS on the unconstrained scale.

    Parameters
    ----------
    variant : Variant or str
        The variant, or its name.
    data : Data
        Standardised arrays from :func:`prepare`.
    hierarchical : bool, default False
        Use the hierarchical :func:`model`.
    starts : int, default 4
        NumPyro initialisations (seeds ``seed``, ``seed + 1``, ...); the
        lowest minimum wins.
    seed : int, default 0
        Seed of the first start.

    Returns
    -------
    dict of str to ndarray
        :func:`natural_params` of the mode.
    """
    # optional weight: NumPyro loads only for posterior/calibration work
    from numpyro.infer.util import constrain_fn, initialize_model

    variant = get_variant(variant) if isinstance(variant, str) else variant
    best = None
    for k in range(starts):
        info = initialize_model(_rng_key(seed + k), model, model_args=(variant, data, hierarchical))
        fun, start = _map_start(info)
        if best is None or fun < best[0]:
            best = (fun, start)
    constrained = constrain_fn(
        model, (variant, data, hierarchical), {}, best[1], return_deterministic=True
    )
    return {k: np.asarray(v) for k, v in natural_params(variant, constrained, data).items()}


def prepare_cells(trials: pd.DataFrame, variant: Variant) -> list[tuple[tuple, Data | str]]:
    """:func:`prepare` of every cell of ``trials`` at once: ``(cell key, Data or skip reason)``.

    The arrays are exactly those :func:`prepare` gives for the cell alone
    (one run table for all cells, each cell trimmed to its own longest run).

    Parameters
    ----------
    trials : pandas.DataFrame
        Normalised trial table.
    variant : Variant
        The variant (a log variant skips cells that cannot take logs).

    Returns
    -------
    list of (tuple, Data or str)
        Per cell, in run-table order: its key ``(subject, task, modality,
        condition)`` and its :class:`Data`, or the reason it was skipped.
    """
    cells, runs = build_runs(trials)
    x, y, present = runs.x, runs.y, runs.present
    obs_all = present & ~np.isnan(y)
    order = np.argsort(runs.cell, kind="stable")
    bounds = np.searchsorted(runs.cell[order], np.arange(len(cells) + 1))
    out = []
    for k in range(len(cells)):
        key = tuple(cells.loc[k, list(CELL_KEYS)])
        if variant.log and cells.at[k, "log_skipped"] != "":
            out.append((key, f"{variant.name}: not applicable ({cells.at[k, 'log_skipped']})"))
            continue
        rows = order[bounds[k] : bounds[k + 1]]
        pres = present[rows]
        T = int(pres.sum(1).max())
        pres, ob = pres[:, :T], obs_all[rows, :T]
        xr, yr = x[rows, :T], y[rows, :T]
        eps = cells.at[k, "eps"]
        z, u, ob, jac = model_scale(xr, yr, pres, eps, variant.log)
        mean, sdev = cell_moments(z, pres, np.zeros(len(rows), dtype=np.int64), 1)
        c, sd = float(mean[0]), float(sdev[0])
        sd = sd if sd > 0 else 1.0
        zs = np.where(pres, (z - c) / sd, 0.0)
        us = np.where(ob, (u - c) / sd, 0.0)
        zbar = (zs.sum(1) / pres.sum(1))[:, None]
        const = np.where(ob, -np.log(sd) - jac, 0.0)
        data = Data(
            zs,
            us,
            ob,
            zbar,
            np.zeros(len(rows), dtype=np.int64),
            const,
            np.array([c]),
            np.array([sd]),
            [key],
            np.array([eps], dtype=float),
        )
        out.append((key, data))
    return out
