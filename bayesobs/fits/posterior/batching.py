"""Batched single-cell fits: cells of one padded shape sampled by one compiled call."""

from __future__ import annotations

import datetime
import warnings
from functools import lru_cache

import numpy as np
import pandas as pd

from ..observers.variants import get_variant
from .model import Data, model, natural_params, prepare_cells
from .predictive import predictive_groups

# ------------------------------------------------------------ batched fits
T_BUCKET = 8  # trials per run are padded up to a multiple of this (a cell's own canonical shape)
BATCH_CELLS = 128  # cells sampled together in one compiled call (memory: draws x trials x chains)


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
    """One compiled function: NUTS chains of ``name`` for a batch of same-shape cells."""
    import jax  # optional weight: JAX loads only for posterior/calibration work
    import jax.numpy as jnp  # optional weight: JAX loads only for posterior/calibration work
    from jax import random  # optional weight: JAX loads only for posterior/calibration work

    # optional weight: NumPyro loads only for posterior/calibration work
    from numpyro.infer import NUTS

    # optional weight: NumPyro loads only for posterior/calibration work
    from numpyro.infer.util import constrain_fn, log_likelihood, potential_energy

    from ..nuts import make_sampler  # optional weight: JAX loads only here

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
            collected = _collect(variant, part, raw, seed)
            for i, idata in zip(idx[lo : lo + size], collected, strict=True):
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


def _collect(variant, part: list[Data], raw, seed: int = 0) -> list:
    """One ArviZ InferenceData per cell of a dispatched slice (waits for its draws)."""
    post, div, ll = raw
    post = {k: np.asarray(v) for k, v in post.items()}
    div, ll = np.asarray(div), np.asarray(ll)
    out = []
    for j, d in enumerate(part):
        draws = {k: v[j] for k, v in post.items()}
        idata = _inference_data(
            natural_params(variant, draws, d), _observed_ll(ll[j], d), div[j], d.subjects
        )
        idata.add_groups(predictive_groups(variant, draws, d, seed))
        out.append(idata)
    return out


def _observed_ll(ll: np.ndarray, data: Data) -> np.ndarray:
    """One cell's pointwise log-likelihoods ``(chains, draws, obs)`` (float64) from its padded ``ll``."""
    r, t = data.z.shape
    return (ll[..., :r, :t] + data.const)[:, :, data.obs]


def _inference_data(nat: dict, ll: np.ndarray, div: np.ndarray, subjects: list):
    """The InferenceData :func:`sample` builds with ``az.from_dict``, built directly (10x faster)."""
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


def batch_jobs(trials: pd.DataFrame, names, chains=4, warmup=500, draws=500, seed=0):
    """The batched tasks of a non-hierarchical fit, the skipped (cell, variant)s and the cell order."""
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
