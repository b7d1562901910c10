"""Full posterior fits of the ten observer variants with NumPyro (NUTS), ArviZ and PSIS-LOO.

Each variant's mean is :func:`bayesobs.fits.observers.models.mean_padded` — the same
pure function the NumPy observer functions use — evaluated with ``jax.numpy``.

Scales: within a dataset, ``z`` and ``u`` are standardised by the mean and SD
of ``z`` (``z' = (z - c) / s``).  Static and Kalman means are shift- and
scale-equivariant, so ``w_prior`` and ``rho`` are unchanged; ``g`` is
unchanged; ``b``, ``delta`` and ``sigma`` are mapped back to natural units
for reporting.  Log-likelihoods (and so LOO) are on the response scale:
``log p(y) = log p(u') - log s - log(y + eps)`` (the last term for log variants).

Priors (standardised scale, weakly informative): ``w_prior ~ Beta(1.1, 1.1)``,
``log rho ~ Normal(0, 3)``, ``g ~ HalfNormal(2)``, ``delta', b' ~ Normal(0, 2)``,
``w ~ Normal(1, 1)``, ``sigma' ~ HalfNormal(1)``.  Hierarchical models draw
each subject's ``logit w_prior``, ``log rho`` or ``w`` from a population
``Normal(mu, tau)`` with ``tau ~ HalfNormal(1)`` (non-centred).

Single-cell fits are batched (:func:`sample_batch`): one compiled sampler per
variant and cell shape, ``vmap`` over cells and chains of NumPyro's NUTS
kernel, each cell with its own adaptation and diagnostics; the batches run
here or on a Dask cluster (:mod:`bayesobs.distributed`).
"""

from __future__ import annotations

import datetime
import multiprocessing as mp
import os
import sys
import tempfile
import warnings
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from ..compile_cache import ENV, enable
from ..distributed import (
    available_cores,
    iter_tasks,
    scheduler_address,
    thread_env,
    trim_memory,
    worker_cores,
)
from ..trials import CELL_KEYS, normalize_trials
from .mcmcstats import summary_stats
from .observers.models import mean_padded
from .observers.scale import cell_moments, model_scale
from .observers.variants import VARIANTS, Variant, get_variant
from .psis import loo_many
from .runtable import build_runs

CORE = {"linear": "w", "static": "w_prior", "kalman": "rho"}
RHAT_MAX = 1.01
PARETO_K_MAX = 0.7  # Vehtari et al. (2017): PSIS-LOO unreliable above
ESS_PER_CHAIN = 100  # Vehtari et al. (2021): bulk ESS above 100 per chain
# the decimals arviz.summary rounds its columns to (ESS to integers, R-hat to 2, the rest to 3)
SUMMARY_DECIMALS = {
    "mean": 3,
    "sd": 3,
    "hdi_3%": 3,
    "hdi_97%": 3,
    "mcse_mean": 3,
    "mcse_sd": 3,
    "ess_bulk": 0,
    "ess_tail": 0,
    "r_hat": 2,
}


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
    eps = cells["eps"].to_numpy()[runs.cell][:, None]
    if variant.log and (cells["log_skipped"] != "").any():
        raise ValueError(f"{variant.name}: not applicable ({cells['log_skipped'].iloc[0]})")
    z, u, obs, jac = model_scale(runs.x, runs.y, present, eps, variant.log)
    S = len(cells)
    c, s = cell_moments(z, present, runs.cell, S)
    s = np.where(s > 0, s, 1.0)
    cr, sr = c[runs.cell][:, None], s[runs.cell][:, None]
    zs = np.where(present, (z - cr) / sr, 0.0)
    us = np.where(obs, (u - cr) / sr, 0.0)
    zbar = (zs.sum(1) / present.sum(1))[:, None]
    const = np.where(obs, -np.log(sr) - jac, 0.0)
    subjects = [tuple(cells.loc[k, list(CELL_KEYS)]) for k in range(S)]
    return Data(zs, us, obs, zbar, runs.cell, const, c, s, subjects)


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
    with numpyro.plate("subject", S):
        if hierarchical and S > 1:
            mu = numpyro.sample(
                "mu_pop", dist.Normal(0.0 if fam != "linear" else 1.0, 1.5 * prior_scale)
            )
            tau = numpyro.sample("tau_pop", dist.HalfNormal(1.0 * prior_scale))
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
    """Posterior draws in natural units (``(..., S)`` arrays).

    Parameters
    ----------
    variant : Variant
        The variant the draws come from.
    samples : dict
        Draws of :func:`model`'s sites on the standardised scale (the core
        parameter, ``b_std``, ``g``, ``delta_std``, ``sigma_std``).
    data : Data
        Supplies the per-subject centre ``c`` and scale ``s`` (anything with
        those two attributes will do).

    Returns
    -------
    dict of str to ndarray
        The core parameter (``w``, ``w_prior`` or ``rho``, unchanged by the
        scaling), ``b`` (linear), ``g`` and ``delta`` (gain variants) and
        ``sigma``, in the units of the stimuli.
    """
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
        ``subject`` dimension), ``log_likelihood`` ``y`` on the response
        scale (observed trials only) and ``sample_stats`` ``diverging``.
    """
    import arviz as az  # start-up time: ArviZ loads only when posteriors are summarised

    # optional weight: NumPyro loads only for posterior/calibration work
    from numpyro.infer import MCMC, NUTS, log_likelihood

    variant = get_variant(variant) if isinstance(variant, str) else variant
    mcmc = MCMC(
        NUTS(model),
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
    return idata


# ------------------------------------------------------------ batched fits
T_BUCKET = 8  # trials per run are padded up to a multiple of this (a cell's own canonical shape)
BATCH_CELLS = 128  # cells sampled together in one compiled call (memory: draws x trials x chains)
LOO_CELLS = 16  # cells whose PSIS-LOO is computed together (memory: cells x obs x draws doubles)


def canonical_shape(data: Data) -> tuple[int, int]:
    """The padded ``(runs, trials)`` shape a cell is sampled at, a function of the cell alone.

    Runs are kept exactly; trials per run are padded to a multiple of
    :data:`T_BUCKET`.  Because the shape depends on nothing but the cell, a
    cell's draws do not depend on which other cells share its batch.

    Parameters
    ----------
    data : Data
        One cell's arrays.

    Returns
    -------
    tuple of int
        ``(runs, trials)``, trials rounded up to a multiple of
        :data:`T_BUCKET`.
    """
    R, T = data.z.shape
    return R, -(-T // T_BUCKET) * T_BUCKET


def _padded(data: Data, shape: tuple[int, int]) -> tuple[np.ndarray, ...]:
    """``(z, u, obs, zbar)`` of one cell padded to ``shape`` (float32, as JAX computes)."""
    R, T = shape
    r, t = data.z.shape
    z = np.zeros((R, T), np.float32)
    u = np.zeros((R, T), np.float32)
    obs = np.zeros((R, T), bool)
    z[:r, :t], u[:r, :t], obs[:r, :t] = data.z, data.u, data.obs
    zbar = np.zeros((R, 1), np.float32)
    zbar[:r] = data.zbar
    return z, u, obs, zbar


def _traced_data(z, u, obs, zbar) -> Data:
    R = z.shape[0]
    return Data(z, u, obs, zbar, np.zeros(R, dtype=np.int64), None, None, None, [None])


@lru_cache(maxsize=64)
def _batched_sampler(name: str, chains: int, warmup: int, draws: int, prior_scale: float = 1.0):
    """One compiled function: NUTS chains of ``name`` for a batch of same-shape cells.

    Each cell and chain starts from NumPyro's ``NUTS.init`` (chain keys
    ``split(PRNGKey(seed), chains)``, as ``MCMC`` makes them, from one seed
    for every cell or one seed per cell) and runs NumPyro's NUTS transition with its own step-size and
    diagonal mass-matrix adaptation.  Every chain of every cell advances one
    leapfrog step per iteration of one loop (:mod:`bayesobs.fits.nuts`), so
    no chain waits for the longest trajectory of the others.
    ``prior_scale`` is :func:`model`'s (1: the variant's priors).
    """
    import jax  # optional weight: JAX loads only for posterior/calibration work
    import jax.numpy as jnp  # optional weight: JAX loads only for posterior/calibration work
    from jax import random  # optional weight: JAX loads only for posterior/calibration work

    # optional weight: NumPyro loads only for posterior/calibration work
    from numpyro.infer import NUTS

    # optional weight: NumPyro loads only for posterior/calibration work
    from numpyro.infer.util import constrain_fn, log_likelihood, potential_energy

    from .nuts import make_sampler  # optional weight: JAX loads only for posterior/calibration work

    variant = get_variant(name)

    def args_of(arrays):
        return (variant, _traced_data(*arrays), False, prior_scale)

    def init(key, arrays):
        return NUTS(model).init(key, warmup, model_args=args_of(arrays))

    def potential(params, arrays):
        return potential_energy(model, args_of(arrays), {}, params)

    def finish(zs, div, arrays):  # one chain's draws on the constrained scale, and their ll
        args = args_of(arrays)
        post = jax.vmap(lambda q: constrain_fn(model, args, {}, q, return_deterministic=True))(zs)
        return post, div, log_likelihood(model, post, *args)["u"]

    def chain_keys(seed):  # as MCMC makes them
        key = random.PRNGKey(seed)
        return random.split(key, chains) if chains > 1 else key[None]

    def cells(seed, *arrays):
        n = arrays[0].shape[0]
        keys = jax.vmap(chain_keys)(jnp.broadcast_to(seed, (n,)))  # one seed, or one per cell
        states = jax.vmap(lambda ks, *a: jax.vmap(lambda k: init(k, a))(ks))(keys, *arrays)
        lanes = jax.tree.map(lambda x: x.reshape(n * chains, *x.shape[2:]), states)
        data = tuple(jnp.repeat(a, chains, axis=0) for a in arrays)
        example = jax.tree.map(lambda x: x[0], lanes.z)
        _, _, run = make_sampler(potential, example, warmup, draws)
        zs, div, _ = run(lanes, data)
        zs, div = jax.tree.map(lambda x: x.reshape(n, chains, *x.shape[1:]), (zs, div))
        per_chain = jax.vmap(finish, in_axes=(0, 0, None))
        return jax.vmap(per_chain)(zs, div, arrays)

    return jax.jit(cells)


def sample_padded(
    variant, z, u, obs, zbar, chains=2, warmup=300, draws=200, seed=0, prior_scale=1.0
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """NUTS draws for many single-subject data sets of one padded shape, in one compiled call.

    The arrays are standardised as :func:`prepare` leaves them, stacked on a
    leading axis (``z``, ``u``, ``obs``: ``(n, runs, T)``; ``zbar``:
    ``(n, runs, 1)``).  Returns the draws of every site of :func:`model`
    on its own (standardised) scale, each ``(n, chains, draws, 1)``, and the
    divergent transitions ``(n, chains, draws)``.

    Parameters
    ----------
    variant : Variant or str
        The variant, or its name.
    z, u : array_like
        ``(n, runs, T)`` standardised stimuli and responses.
    obs : array_like of bool
        ``(n, runs, T)``: which trials are observed.
    zbar : array_like
        ``(n, runs, 1)`` mean standardised stimulus of each run.
    chains, warmup, draws : int, default 2, 300, 200
        NUTS chains, warm-up and kept draws per chain.
    seed : int or array_like of int, default 0
        Seed of the chains' keys: one for every data set, or ``(n,)``, one per
        data set (independent fits, as simulation-based calibration needs).
    prior_scale : float, default 1.0
        :func:`model`'s factor on the prior scales.

    Returns
    -------
    draws : dict of str to ndarray
        Every site's draws, ``(n, chains, draws, 1)``.
    divergent : ndarray of bool
        ``(n, chains, draws)``.
    """
    variant = get_variant(variant) if isinstance(variant, str) else variant
    fn = _batched_sampler(variant.name, chains, warmup, draws, float(prior_scale))
    arrays = (
        np.asarray(z, np.float32),
        np.asarray(u, np.float32),
        np.asarray(obs, bool),
        np.asarray(zbar, np.float32),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        post, div, _ = fn(np.asarray(seed, np.int32), *arrays)
    return {k: np.asarray(v) for k, v in post.items()}, np.asarray(div)


def _slice_size(n: int) -> int:
    """Cells per compiled call for ``n`` cells of one shape: equal slices of at most :data:`BATCH_CELLS`."""
    return -(-n // -(-n // BATCH_CELLS))


def sample_batch(
    variant, datas: list[Data], chains=4, warmup=500, draws=500, seed=0, pad_to: int | None = None
) -> list:
    """NUTS draws of one variant for many single-subject cells, sampled together.

    Cells are grouped by :func:`canonical_shape` and each group is sampled by
    one compiled, vectorised call (in equal slices of at most
    :data:`BATCH_CELLS`, or ``pad_to`` cells).  Every
    cell keeps its own adaptation per chain, and its draws are the same
    whether it is sampled alone or with others (same seed, same shape).

    Parameters
    ----------
    variant : Variant or str
        The variant, or its name.
    datas : list of Data
        Single-subject cells (from :func:`prepare_cells`).
    chains, warmup, draws : int, default 4, 500, 500
        NUTS chains, warm-up and kept draws per chain.
    seed : int, default 0
        Seed of every cell's chain keys.
    pad_to : int, optional
        Cells per compiled call (a short slice is padded); default equal
        slices of at most :data:`BATCH_CELLS`.

    Returns
    -------
    list of arviz.InferenceData
        One per cell, in the order of ``datas``, as :func:`sample` builds it.
    """
    variant = get_variant(variant) if isinstance(variant, str) else variant
    out = [None] * len(datas)
    shapes = [canonical_shape(d) for d in datas]
    for shape in sorted(set(shapes)):
        idx = [i for i, s in enumerate(shapes) if s == shape]
        size = pad_to or _slice_size(len(idx))
        for lo in range(0, len(idx), size):
            part = [datas[i] for i in idx[lo : lo + size]]
            raw = _dispatch(variant, part, chains, warmup, draws, seed, size)
            for i, idata in zip(idx[lo : lo + size], _collect(variant, part, raw), strict=True):
                out[i] = idata
    return out


def _dispatch(variant, part: list[Data], chains, warmup, draws, seed, size):
    """Start sampling one slice of same-shape cells; returns JAX arrays (computed asynchronously)."""
    fn = _batched_sampler(variant.name, chains, warmup, draws)
    shape = canonical_shape(part[0])
    # a short slice is padded with copies of its first cell: one compiled size per shape
    fill = part + [part[0]] * (size - len(part))
    arrays = [np.stack(a) for a in zip(*(_padded(d, shape) for d in fill), strict=True)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return fn(seed, *arrays)


def _collect(variant, part: list[Data], raw) -> list:
    """One ArviZ InferenceData per cell of a dispatched slice (waits for its draws)."""
    post, div, ll = raw
    post = {k: np.asarray(v) for k, v in post.items()}
    div, ll = np.asarray(div), np.asarray(ll)
    out = []
    for j, d in enumerate(part):
        nat = natural_params(variant, {k: v[j] for k, v in post.items()}, d)
        out.append(_inference_data(nat, _observed_ll(ll[j], d), div[j], d.subjects))
    return out


def _observed_ll(ll: np.ndarray, data: Data) -> np.ndarray:
    """One cell's pointwise log-likelihoods ``(chains, draws, obs)`` (float64) from its padded ``ll``."""
    r, t = data.z.shape
    return (ll[..., :r, :t] + data.const)[:, :, data.obs]


def _inference_data(nat: dict, ll: np.ndarray, div: np.ndarray, subjects: list):
    """The InferenceData :func:`sample` builds with ``az.from_dict``, built directly (10x faster).

    Same groups, variables, dimensions, coordinates and attributes
    (``created_at``, ``arviz_version``); ``tests/test_scale.py`` compares them.
    """
    import arviz as az  # start-up time: ArviZ loads only when posteriors are summarised
    import xarray as xr  # start-up time: xarray loads only when posteriors are summarised

    C, D = div.shape
    attrs = {
        "created_at": datetime.datetime.now(datetime.UTC).isoformat(),
        "arviz_version": az.__version__,
    }
    cd = {"chain": np.arange(C), "draw": np.arange(D)}
    subj = ["/".join(map(str, s)) for s in subjects]
    post = xr.Dataset(
        {k: (("chain", "draw", "subject"), np.asarray(v)) for k, v in nat.items()},
        coords={**cd, "subject": subj},
        attrs=attrs,
    )
    lld = xr.Dataset(
        {"y": (("chain", "draw", "y_dim_0"), ll)},
        coords={**cd, "y_dim_0": np.arange(ll.shape[-1])},
        attrs=attrs,
    )
    stats = xr.Dataset({"diverging": (("chain", "draw"), div)}, coords=cd, attrs=attrs)
    return az.InferenceData(posterior=post, log_likelihood=lld, sample_stats=stats)


def diagnostics(idata) -> dict:
    """Worst R-hat, smallest bulk ESS and the number of divergent transitions.

    Parameters
    ----------
    idata : arviz.InferenceData
        A fit with a ``posterior`` and ``sample_stats.diverging``.

    Returns
    -------
    dict
        ``r_hat_max`` (float), ``ess_bulk_min`` (float) and ``divergences``
        (int) over every parameter.
    """
    import arviz as az  # start-up time: ArviZ loads only when posteriors are summarised

    summ = az.summary(idata, kind="diagnostics")
    return {
        "r_hat_max": float(summ["r_hat"].max()),
        "ess_bulk_min": float(summ["ess_bulk"].min()),
        "divergences": int(np.asarray(idata.sample_stats["diverging"]).sum()),
    }


def diagnostics_failures(d: dict, chains: int) -> str:
    """Each failed check with its value and threshold, e.g. ``R-hat 1.052 > 1.01``.

    Parameters
    ----------
    d : dict
        :func:`diagnostics` of a fit.
    chains : int
        Chains of the fit (the bulk-ESS threshold is
        :data:`ESS_PER_CHAIN` per chain).

    Returns
    -------
    str
        The failures joined by ``", "``; empty when every check passes.
    """
    out = []
    if not d["r_hat_max"] <= RHAT_MAX:
        out.append(f"R-hat {d['r_hat_max']:.3f} > {RHAT_MAX}")
    if not d["ess_bulk_min"] >= ESS_PER_CHAIN * chains:
        out.append(
            f"bulk ESS {d['ess_bulk_min']:.0f} < {ESS_PER_CHAIN * chains} "
            f"({ESS_PER_CHAIN} per chain x {chains} chains)"
        )
    if d["divergences"]:
        out.append(f"{d['divergences']} divergent transition(s) > 0")
    return ", ".join(out)


def diagnostics_ok(d: dict, chains: int) -> bool:
    """R-hat at most 1.01, bulk ESS above 100 per chain, no divergences.

    Parameters
    ----------
    d : dict
        :func:`diagnostics` of a fit.
    chains : int
        Chains of the fit.

    Returns
    -------
    bool
        Whether all three checks pass.
    """
    return (
        d["r_hat_max"] <= RHAT_MAX
        and d["ess_bulk_min"] >= ESS_PER_CHAIN * chains
        and d["divergences"] == 0
    )


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
        )
        out.append((key, data))
    return out


def _cell_results(group_keys, key, name, idata, chains):
    """Summary rows, LOO row and notes of one fitted (group, variant)."""
    import arviz as az  # start-up time: ArviZ loads only when posteriors are summarised

    label = "/".join(map(str, key))
    summ = az.summary(idata, hdi_prob=0.94)
    diag = {  # = diagnostics(idata): the same columns of the same (rounded) summary
        "r_hat_max": float(summ["r_hat"].max()),
        "ess_bulk_min": float(summ["ess_bulk"].min()),
        "divergences": int(np.asarray(idata.sample_stats["diverging"]).sum()),
    }
    notes = []
    if not diagnostics_ok(diag, chains):
        notes.append(
            f"{label} {name}: sampler diagnostics failed ({diagnostics_failures(diag, chains)}); "
            "treat with care"
        )
    rows = []
    for lab, r in summ.iterrows():
        param, _, subj = lab.partition("[")
        rows.append(
            {
                **dict(zip(group_keys, key, strict=True)),
                "subject_cell": subj.rstrip("]"),
                "variant": name,
                "param": param,
                **{c: r[c] for c in summ.columns},
                **diag,
            }
        )
    with warnings.catch_warnings():
        # arviz's generic warning is replaced by a note with the count and the threshold
        warnings.filterwarnings("ignore", message=".*[Pp]areto", category=UserWarning)
        loo = az.loo(idata, pointwise=True)
    k = np.asarray(loo.pareto_k)
    high = int((k > PARETO_K_MAX).sum())
    if high:
        notes.append(
            f"{label} {name}: {high} of {k.size} observation(s) have Pareto k > {PARETO_K_MAX} "
            f"(largest {k.max():.2f}): PSIS-LOO is unreliable for them; compare variants with "
            "care (K-fold CV, or a lapse/heavier-tailed model)"
        )
    loo_row = {
        **dict(zip(group_keys, key, strict=True)),
        "variant": name,
        "elpd_loo": float(loo.elpd_loo),
        "se": float(loo.se),
        "p_loo": float(loo.p_loo),
        "pareto_k_over_0.7": high,
    }
    return rows, loo_row, "; ".join(notes) or None


def _fit_one(job):
    """Fit one (group, variant): InferenceData, summary rows, LOO row, or a note. Runs in a worker."""
    g, group_keys, key, name, hierarchical, chains, warmup, draws, seed, progress = job
    v = get_variant(name)
    label = "/".join(map(str, key))
    try:
        data = prepare(g, v)
    except ValueError as exc:
        return key, name, None, [], None, f"{label}: {exc}"
    idata = sample(v, data, hierarchical, chains, warmup, draws, seed, progress)
    return (key, name, idata, *_cell_results(group_keys, key, name, idata, chains))


def _dispatch_job(job):
    name, items, chains, warmup, draws, seed, size = job
    return _dispatch(get_variant(name), [d for _, d in items], chains, warmup, draws, seed, size)


def _finish_job(job, raw, sink=None) -> list:
    name, items, chains, *_ = job
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # arviz's import-time announcement
        return slice_results(get_variant(name), items, raw, chains, sink)


def slice_results(variant, items: list, raw, chains: int, sink=None) -> list:
    """Summary rows, LOO rows, notes and InferenceData of a sampled slice of cells, all at once.

    The numbers are those :func:`_cell_results` gives for each cell's own
    InferenceData (``arviz.summary`` and ``arviz.loo``), computed for the
    whole slice at once: the summaries through
    :func:`bayesobs.fits.mcmcstats.summary_stats` and PSIS-LOO through
    :func:`bayesobs.fits.psis.loo_many` (ArviZ's arithmetic vectorised, the
    same values), rounded as ``arviz.summary`` rounds them.

    Parameters
    ----------
    variant : Variant
        The variant the slice was sampled with.
    items : list of (key, Data)
        The slice's cells, in the order they were sampled.
    raw : tuple
        The sampler's ``(draws, divergences, log-likelihood)`` of the slice
        (a short slice may carry padding cells after ``items``).
    chains : int
        Chains per cell.
    sink : callable, optional
        ``fit_posterior``'s sink: each cell's InferenceData goes through it
        as soon as it is built, and what it returns takes the place of the
        InferenceData (so that a slice's InferenceData never all exist at once).

    Returns
    -------
    list
        ``(key, variant name, idata, summary rows, LOO row, note)`` per cell.
    """
    post, div, ll = raw
    n = len(items)
    datas = [d for _, d in items]
    post = {k: np.asarray(v)[:n] for k, v in post.items()}
    div, ll = np.asarray(div)[:n], np.asarray(ll)[:n]
    scales = _Scales(
        np.array([d.c[0] for d in datas])[:, None, None, None],
        np.array([d.s[0] for d in datas])[:, None, None, None],
    )
    nat = natural_params(variant, post, scales)  # (cells, chain, draw, 1) each
    labels = ["/".join(map(str, key)) for key, _ in items]
    C, D = div.shape[1:]
    # arviz.summary's columns, each parameter's (chain, draw) array as its own (mcmcstats)
    stats = {k: summary_stats(v[..., 0], hdi_prob=0.94) for k, v in nat.items()}
    columns = [c for c in next(iter(stats.values())) if c != "ess_mean"]
    summ = {  # rounded as arviz.summary rounds its table
        k: pd.DataFrame({c: s[c] for c in columns}).round(SUMMARY_DECIMALS)
        for k, s in stats.items()
    }
    if chains == 1:
        reff = np.ones(n)
    else:  # arviz.ess(method="mean") of each parameter, averaged over the cell's parameters
        ess_mean = np.ascontiguousarray(np.stack([s["ess_mean"] for s in stats.values()], axis=1))
        reff = ess_mean.mean(axis=-1) / (C * D)
    # PSIS-LOO a few cells at a time: each observation's numbers are its own, and the
    # (observations x draws) float64 copies of a whole slice took a gigabyte or more; each
    # cell's copy is made again for its InferenceData below, so that no more than a few
    # cells' exist at once (a worker's peak memory: 0.2 GB less at 112 cells)
    loo: dict[str, list] = {}
    for lo in range(0, n, LOO_CELLS):
        chunk = range(lo, min(lo + LOO_CELLS, n))
        part = loo_many([_observed_ll(ll[j], datas[j]) for j in chunk], reff[lo : lo + LOO_CELLS])
        for key, values in part.items():
            loo.setdefault(key, []).extend(values)
    out = []
    for j, ((key, d), label) in enumerate(zip(items, labels, strict=True)):
        rows_j = {k: f.iloc[j] for k, f in summ.items()}  # the cell's row of each parameter
        diag = {
            "r_hat_max": float(pd.Series([r["r_hat"] for r in rows_j.values()]).max()),
            "ess_bulk_min": float(pd.Series([r["ess_bulk"] for r in rows_j.values()]).min()),
            "divergences": int(div[j].sum()),
        }
        notes = []
        if not diagnostics_ok(diag, chains):
            notes.append(
                f"{label} {variant.name}: sampler diagnostics failed "
                f"({diagnostics_failures(diag, chains)}); treat with care"
            )
        rows = []
        for param, row in rows_j.items():
            rows.append(
                {
                    **dict(zip(CELL_KEYS, key, strict=True)),
                    "subject_cell": label,
                    "variant": variant.name,
                    "param": param,
                    **{c: row[c] for c in columns},
                    **diag,
                }
            )
        k = loo["pareto_k"][j]
        high = int((k > PARETO_K_MAX).sum())
        if high:
            notes.append(
                f"{label} {variant.name}: {high} of {k.size} observation(s) have Pareto k > "
                f"{PARETO_K_MAX} (largest {k.max():.2f}): PSIS-LOO is unreliable for them; "
                "compare variants with care (K-fold CV, or a lapse/heavier-tailed model)"
            )
        loo_row = {
            **dict(zip(CELL_KEYS, key, strict=True)),
            "variant": variant.name,
            "elpd_loo": float(loo["elpd_loo"][j]),
            "se": float(loo["se"][j]),
            "p_loo": float(loo["p_loo"][j]),
            "pareto_k_over_0.7": high,
        }
        idata = _inference_data(
            {name: v[j] for name, v in nat.items()}, _observed_ll(ll[j], d), div[j], d.subjects
        )
        if sink is not None:
            idata = sink((*key, variant.name), idata)
        out.append((key, variant.name, idata, rows, loo_row, "; ".join(notes) or None))
    return out


@dataclass
class _Scales:
    """The centre and scale :func:`natural_params` reads, for a stack of cells."""

    c: np.ndarray
    s: np.ndarray


def _fit_batch_job(job, sink=None) -> list:
    """Fit one variant for a slice of same-shape cells (one task: here, or on a worker).

    With ``sink``, each fit goes through it here (in the worker that sampled it),
    as soon as it is made.
    """
    out = _finish_job(job, _dispatch_job(job), sink)
    trim_memory()  # the slice's arrays are freed: their pages go back to the system
    return out


def sink_in_workers(sink) -> bool:
    """Whether ``sink`` is called in fit_posterior's worker processes rather than the caller's.

    A sink whose ``runs_in_workers`` attribute is true (it pickles, and its
    effects, such as files written, are visible to the caller) is sent to
    the worker processes and called there on each fit as it is made: only
    what it returns comes back, not the pointwise log-likelihoods
    (:class:`bayesobs.report.posterior.PosteriorFiles` writes the ``.nc``
    files so).  Any other sink, and every sink of a Dask run (whose workers
    may not share a file system), is called in the caller's process.

    Parameters
    ----------
    sink : callable or None
        ``fit_posterior``'s ``sink``.

    Returns
    -------
    bool
        True when ``sink`` declares ``runs_in_workers``.
    """
    return bool(getattr(sink, "runs_in_workers", False))


def _sunk(results: list, sink) -> list:
    """``results`` with each InferenceData replaced by ``sink((*key, variant), idata)``."""
    if sink is None:
        return results
    return [
        (key, name, idata if idata is None else sink((*key, name), idata), *rest)
        for key, name, idata, *rest in results
    ]


def _run_batch_jobs(jobs, scheduler=None, sink=None, processes: int = 1) -> list:
    """Every batched task, on the Dask cluster at ``scheduler``, in ``processes`` processes, or here.

    Here, the next slice is dispatched (JAX computes asynchronously) before
    the summaries of the current one are made, so that the two overlap, and
    each slice's results go through ``sink`` as soon as they are made.  With
    ``processes > 1`` the tasks run in that many spawned processes
    (:func:`_process_tasks`), each on one core.
    """
    if scheduler_address(scheduler) is not None:
        # each slice goes through the sink as it arrives: the draws of all never pile up here
        return [
            r for _, part in iter_tasks(_fit_batch_job, jobs, scheduler) for r in _sunk(part, sink)
        ]
    if processes > 1 and len(jobs) > 1:
        if sink_in_workers(sink):  # the workers write: the log-likelihoods stay there
            return [r for part in _process_tasks(jobs, processes, sink) for r in part]
        return [r for part in _process_tasks(jobs, processes) for r in _sunk(part, sink)]
    out, pending = [], None
    for job in [*jobs, None]:
        nxt = None if job is None else (job, _dispatch_job(job))
        if pending is not None:
            out += _finish_job(*pending, sink)
        pending = nxt
    return out


# Batched fits of at least this many (cell, variant)s run in worker processes by default
# (fit_posterior's ``workers``): below it, starting the processes and compiling the
# samplers in each costs more than the second core gives back.
PROCESS_MIN_FITS = 200


def interleaved(jobs: list, parts: int) -> list:
    """``jobs`` cut into ``parts`` runs of consecutive tasks and dealt out in turn.

    Tasks come variant by variant; dealt out so, ``parts`` workers taking
    tasks in this order start on different variants and tend to stay on
    theirs, so that few samplers are compiled in more than one of them.

    Parameters
    ----------
    jobs : list
        Tasks in :func:`batch_jobs` order.
    parts : int
        Workers.

    Returns
    -------
    list
        The same tasks: the first of each run, then the second of each, ...
    """
    size = -(-len(jobs) // parts)
    runs = [jobs[i : i + size] for i in range(0, len(jobs), size)]
    return [r[i] for i in range(size) for r in runs if i < len(r)]


def _process_init(counter, cache: str | None) -> None:
    """Start of a worker process: one compute thread, its own core, the parent's compile cache."""
    os.environ.update(thread_env(1))  # before JAX loads: XLA keeps to the calling thread
    with counter.get_lock():
        index, counter.value = counter.value, counter.value + 1
    if hasattr(os, "sched_setaffinity"):
        cores = worker_cores(index, 1, sorted(os.sched_getaffinity(0)))
        if cores is not None:
            os.sched_setaffinity(0, cores)
    _worker_init()
    if cache:
        enable({ENV: cache})


def _process_tasks(jobs: list, processes: int, sink=None):
    """Each batched task's results, in ``processes`` spawned processes, as each finishes.

    With ``sink``, each result has been through it in the worker
    (:func:`sink_in_workers`).

    Every task is a pure function of its inputs, so the results are those of
    this process; the caller sorts them.  The processes share JAX's
    persistent compilation cache: this process's when it has one configured,
    else a temporary folder removed afterwards, so that a sampler one of them
    has compiled is loaded, not compiled again, by the other (about 20 s of
    CPU time per variant).
    """
    cache = None
    if "jax" in sys.modules:
        cache = sys.modules["jax"].config.jax_compilation_cache_dir or None
    ctx = mp.get_context("spawn")
    counter = ctx.Value("i", 0)
    order = interleaved(list(jobs), processes)
    with tempfile.TemporaryDirectory(prefix="bayesobs-jax-") as scratch:
        with ProcessPoolExecutor(
            processes,
            mp_context=ctx,
            initializer=_process_init,
            initargs=(counter, cache or scratch),
        ) as pool:
            pending = {pool.submit(_fit_batch_job, job, sink) for job in order}
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    yield fut.result()  # handed over and dropped: the draws never pile up


def batch_jobs(trials: pd.DataFrame, names, chains=4, warmup=500, draws=500, seed=0):
    """The batched tasks of a non-hierarchical fit, the skipped (cell, variant)s and the cell order.

    One task per variant and slice of :data:`BATCH_CELLS` cells of the same
    :func:`canonical_shape`; tasks are independent, so they run in any order
    and on any worker with the same result.

    Parameters
    ----------
    trials : pandas.DataFrame
        Normalised trial table.
    names : iterable of str
        Variant names.
    chains, warmup, draws : int, default 4, 500, 500
        NUTS chains, warm-up and kept draws per chain.
    seed : int, default 0
        Seed of every cell's chain keys.

    Returns
    -------
    jobs : list of tuple
        ``(variant name, [(key, Data), ...], chains, warmup, draws, seed,
        slice size)`` per task.
    skipped : list of tuple
        ``(key, variant name, note)`` of the cells a variant does not apply to.
    order : dict
        Cell key to its position in the run table (the order of results).
    """
    jobs, skipped, order = [], [], {}
    for name in names:
        prepared = prepare_cells(trials, get_variant(name))
        order = order or {k: i for i, (k, _) in enumerate(prepared)}
        ready = [(k, d) for k, d in prepared if isinstance(d, Data)]
        skipped += [
            (k, name, f"{'/'.join(map(str, k))}: {d}") for k, d in prepared if isinstance(d, str)
        ]
        by_shape: dict = {}
        for k, d in ready:
            by_shape.setdefault(canonical_shape(d), []).append((k, d))
        for shape in sorted(by_shape):
            group = by_shape[shape]
            size = _slice_size(len(group))
            for lo in range(0, len(group), size):
                jobs.append((name, group[lo : lo + size], chains, warmup, draws, seed, size))
    return jobs, skipped, order


def _worker_init() -> None:
    warnings.simplefilter("ignore", FutureWarning)  # arviz's import-time announcement


def fit_posterior(
    trials: pd.DataFrame,
    variants=None,
    hierarchical=False,
    chains=4,
    warmup=500,
    draws=500,
    seed=0,
    progress=False,
    workers: int | None = None,
    batched: bool = True,
    scheduler: str | None = None,
    sink=None,
):
    """Posterior fits of every variant; returns ``(summary, loo, idatas, notes)``.

    Without ``hierarchical`` each cell is fitted on its own; with it, the
    cells of each ``(task, modality, condition)`` are fitted jointly, one
    subject per cell, with a population distribution on the core parameter.

    Single-cell fits are ``batched`` by default: each variant is compiled once
    per cell shape and all cells of that shape are sampled together
    (:func:`sample_batch`), each with its own adaptation and diagnostics, in
    ``workers`` processes (default: two on a machine of two or more cores
    for :data:`PROCESS_MIN_FITS` (cell, variant) fits or more, else this
    process alone; 1 runs in this process); with ``scheduler`` (a Dask scheduler
    address, or ``BAYESOBS_SCHEDULER``) the batches run on that cluster.
    Where they run does not change the result.  ``batched=False`` (and
    hierarchical fits) use NumPyro's ``MCMC`` per (group, variant), in
    ``workers`` processes (default ``min(2, os.cpu_count())``; 1 runs in
    this process).  Failed sampler
    diagnostics (each with its threshold) and observations with Pareto
    ``k > 0.7`` are returned in ``notes`` and raised as ``RuntimeWarning``.

    ``sink(key, idata)``, if given, receives each fit's InferenceData as soon
    as its batch is done (``key`` is the cell key plus the variant) and
    returns what ``idatas`` keeps: :func:`bayesobs.report.posterior.write_outputs` writes each to disk
    there and keeps only the posterior draws, so memory does not grow with
    the pointwise log-likelihoods of every cell.  A sink that declares
    ``runs_in_workers`` is called in the worker processes
    (:func:`sink_in_workers`), so that the log-likelihoods never travel.

    Parameters
    ----------
    trials : pandas.DataFrame
        Trial table (normalised here).
    variants : list of str, optional
        Variant names; default all ten.
    hierarchical : bool, default False
        Fit the cells of each ``(task, modality, condition)`` jointly.
    chains, warmup, draws : int, default 4, 500, 500
        NUTS chains, warm-up and kept draws per chain.
    seed : int, default 0
        Sampler seed (the same for every fit).
    progress : bool, default False
        NumPyro's progress bar (unbatched fits).
    workers : int, optional
        Processes (each on one core): for batched fits, default two for
        :data:`PROCESS_MIN_FITS` fits or more on two or more cores, else 1;
        for unbatched fits, default ``min(2, os.cpu_count())``.
    batched : bool, default True
        Sample single-cell fits in batches (:func:`sample_batch`).
    scheduler : str or distributed.Client, optional
        Dask scheduler for the batches (:mod:`bayesobs.distributed`).
    sink : callable, optional
        ``sink(key, idata)``, called on each fit as it is done.

    Returns
    -------
    summary : pandas.DataFrame
        One row per (fit, parameter, subject): the group keys,
        ``subject_cell``, ``variant``, ``param``, ArviZ's summary columns
        (``mean``, ``sd``, ``hdi_3%``, ``hdi_97%``, ``mcse_mean``, ``mcse_sd``,
        ``ess_bulk``, ``ess_tail``, ``r_hat``) and the fit's ``r_hat_max``,
        ``ess_bulk_min``, ``divergences``.
    loo : pandas.DataFrame
        One row per fit: the group keys, ``variant``, ``elpd_loo``, ``se``,
        ``p_loo``, ``pareto_k_over_0.7`` and ``rank`` (1: highest
        ``elpd_loo`` in its group).
    idatas : dict
        ``(*key, variant)`` to the InferenceData (or what ``sink`` returned).
    notes : list of str
        Skipped fits, failed diagnostics and high Pareto ``k``.
    """
    if workers is not None and (
        isinstance(workers, bool) or not isinstance(workers, int) or workers < 1
    ):
        raise ValueError(f"workers must be a positive integer, not {workers!r}")
    trials = normalize_trials(trials)
    names = list(variants or [v.name for v in VARIANTS])
    group_keys = ["task", "modality", "condition"] if hierarchical else list(CELL_KEYS)
    if batched and not hierarchical:
        jobs, skipped, order = batch_jobs(trials, names, chains, warmup, draws, seed)
        results = [(k, n, None, [], None, note) for k, n, note in skipped]
        fits = sum(len(job[1]) for job in jobs)
        # a daemonic process (a pool's worker) may not start processes of its own
        spawn = fits >= PROCESS_MIN_FITS and not mp.current_process().daemon
        default = min(2, available_cores()) if spawn else 1
        results += _run_batch_jobs(jobs, scheduler, sink, workers or default)
        rank = {n: i for i, n in enumerate(names)}
        results.sort(key=lambda r: (order[r[0]], rank[r[1]]))  # as the per-cell path orders them
    else:
        jobs = []
        for key, g in trials.groupby(group_keys, sort=True):
            key = key if isinstance(key, tuple) else (key,)
            jobs += [
                (g, group_keys, key, n, hierarchical, chains, warmup, draws, seed, progress)
                for n in names
            ]
        workers = min(len(jobs), workers or min(2, os.cpu_count() or 1))
        if workers > 1:
            with ProcessPoolExecutor(
                workers, mp_context=mp.get_context("spawn"), initializer=_worker_init
            ) as pool:
                results = list(pool.map(_fit_one, jobs))
        else:
            results = [_fit_one(j) for j in jobs]
        results = _sunk(results, sink)
    rows, loo_rows, idatas, notes = [], [], {}, []
    for key, name, idata, r, loo_row, note in results:
        if note:
            notes.append(note)
            if idata is not None:
                warnings.warn(note, RuntimeWarning, stacklevel=2)
        if idata is None:
            continue
        idatas[(*key, name)] = idata
        rows += r
        loo_rows.append(loo_row)
    loo = pd.DataFrame(loo_rows)
    if len(loo):
        loo["rank"] = (
            loo.groupby(group_keys)["elpd_loo"].rank(ascending=False, method="first").astype(int)
        )
    return pd.DataFrame(rows), loo, idatas, notes


def bcs_posterior(idatas: dict, base_key: tuple, ablation_key: tuple) -> float:
    """P(w_prior rose under the ablation) from two independent posteriors of ``static``.

    Parameters
    ----------
    idatas : dict
        :func:`fit_posterior`'s fits, keyed ``(*cell key, variant)``.
    base_key, ablation_key : tuple
        Cell keys of the baseline and the ablated condition; both need a
        ``static`` fit.

    Returns
    -------
    float
        The share of paired draws (first ``n`` of each, flattened) in which
        the ablation's ``w_prior`` exceeds the baseline's.
    """
    a = np.asarray(idatas[(*base_key, "static")].posterior["w_prior"]).ravel()
    b = np.asarray(idatas[(*ablation_key, "static")].posterior["w_prior"]).ravel()
    n = min(len(a), len(b))
    return float(np.mean(b[:n] > a[:n]))


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
    """One compiled function: ``draws`` response sequences of ``name`` from its priors.

    Takes a key and one cell's padded ``(z, obs, zbar)``; compiled once per
    variant and :func:`canonical_shape` (padding lies after each run's real
    trials, so it leaves their distribution unchanged).
    """
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


__all__ = [
    "bcs_posterior",
    "canonical_shape",
    "diagnostics",
    "fit_posterior",
    "model",
    "posterior_mode",
    "ppc_table",
    "prepare",
    "prepare_cells",
    "prior_predictive",
    "sample",
    "sample_batch",
    "sample_padded",
]
