"""NUTS with one leapfrog step per loop iteration: chains that run side by side without waiting."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

MAX_TREE_DEPTH = 10
CHAIN_MULTIPLE = 16  # chains of one loop, padded to a multiple of this (see make_sampler's run)
MAX_DELTA_ENERGY = 1000.0
TARGET_ACCEPT = 0.8


class Tree(NamedTuple):
    """A trajectory, or one subtree of it (NumPyro's ``TreeInfo``); vectors are flat."""

    z_left: Any
    r_left: Any
    g_left: Any
    z_right: Any
    r_right: Any
    g_right: Any
    z_proposal: Any
    pe_proposal: Any
    g_proposal: Any
    energy_proposal: Any
    depth: Any
    weight: Any
    r_sum: Any
    turning: Any
    diverging: Any
    sum_accept_probs: Any
    num_proposals: Any


class Adapt(NamedTuple):
    """Warm-up state: NumPyro's ``HMCAdaptState`` with one diagonal mass block, flat."""

    step_size: Any
    inverse_mass: Any  # (size,)
    mass_sqrt: Any  # (size,)
    ss_state: Any  # dual averaging
    mm_state: Any  # Welford (mean, m2, n)
    window_idx: Any
    key: Any


class Lane(NamedTuple):
    """Everything one chain carries from one loop iteration to the next."""

    i: Any  # transitions finished (warm-up included)
    z: Any  # position: the current trajectory's origin
    pe: Any
    g: Any
    adapt: Adapt
    key: Any  # key of the next transition (HMCState.rng_key)
    energy0: Any  # energy at the trajectory's origin
    tree: Tree  # the trajectory so far
    tree_key: Any  # key of the doubling loop
    right: Any  # direction of the current doubling
    trans_key: Any  # key of the biased move between trajectory and new subtree
    sub: Tree  # the subtree being built (a doubling starts it as the trajectory)
    sub_key: Any
    ckpt_r: Any  # (MAX_TREE_DEPTH, size) momentum checkpoints of the subtree
    ckpt_r_sum: Any


class Record(NamedTuple):
    """What one step hands to the draw buffers."""

    kept: Any  # a kept draw's trajectory ended at this step
    index: Any  # which draw (transitions after warm-up)
    z: Any  # flat position drawn
    diverging: Any
    num_steps: Any


def _where(pred, a, b):
    import jax  # optional weight: JAX loads only for posterior/calibration work
    import jax.numpy as jnp  # optional weight: JAX loads only for posterior/calibration work

    return jax.tree.map(lambda x, y: jnp.where(pred, x, y), a, b)


def packing(example):
    """``(pack, unpack)`` of pytrees shaped like ``example``: one array per dtype."""
    import jax  # optional weight: JAX loads only for posterior/calibration work
    import jax.numpy as jnp  # optional weight: JAX loads only for posterior/calibration work

    leaves, treedef = jax.tree.flatten(example)
    dtypes = list(dict.fromkeys(jnp.result_type(x) for x in leaves))
    # (group, start, stop, shape) of every leaf
    where, ends = [], dict.fromkeys(dtypes, 0)
    for x in leaves:
        d = jnp.result_type(x)
        width = math.prod(x.shape[1:])
        where.append((dtypes.index(d), ends[d], ends[d] + width, x.shape[1:]))
        ends[d] += width

    def pack(tree):
        flat = jax.tree.leaves(tree)
        return tuple(
            jnp.concatenate(
                [
                    jnp.reshape(x, (x.shape[0], -1)).astype(d)
                    for x, (j, *_) in zip(flat, where, strict=True)
                    if j == g
                ],
                axis=1,
            )
            for g, d in enumerate(dtypes)
        )

    def unpack(packed):
        return jax.tree.unflatten(
            treedef,
            [
                jnp.reshape(packed[j][:, a:b], (packed[j].shape[0],) + shape)
                for j, a, b, shape in where
            ],
        )

    return pack, unpack


def leaf_ckpt_range(n):
    """Checkpoints ``(idx_min, idx_max)`` of the subtrees that end at leaf ``n`` (NumPyro's rule)."""
    import jax.numpy as jnp  # optional weight: JAX loads only for posterior/calibration work

    idx_max = jnp.bitwise_count(n >> 1).astype(jnp.int32)
    num_subtrees = jnp.bitwise_count((~n & (n + 1)) - 1).astype(jnp.int32)
    return idx_max - num_subtrees + 1, idx_max


def kinetic(inverse_mass, r):
    """Kinetic energy ``r' M^-1 r / 2`` of a diagonal inverse mass."""
    import jax.numpy as jnp  # optional weight: JAX loads only for posterior/calibration work

    return 0.5 * jnp.dot(inverse_mass * r, r)


def is_turning(inverse_mass, r_left, r_right, r_sum):
    """The generalised U-turn criterion between two momenta (Betancourt 2017, A.4.2)."""
    import jax.numpy as jnp  # optional weight: JAX loads only for posterior/calibration work

    r_sum = r_sum - (r_left + r_right) / 2
    return (jnp.dot(inverse_mass * r_left, r_sum) <= 0) | (
        jnp.dot(inverse_mass * r_right, r_sum) <= 0
    )


def combine(tree: Tree, new: Tree, inverse_mass, right, key, biased: bool, impl=None) -> Tree:
    """``tree`` extended by ``new`` on its ``right`` (else left) side, the proposal resampled."""
    import jax  # optional weight: JAX loads only for posterior/calibration work
    import jax.numpy as jnp  # optional weight: JAX loads only for posterior/calibration work
    from jax import random

    from .prng import wrap  # optional weight: JAX loads only for posterior/calibration work

    left_t, right_t = _where(right, (tree, new), (new, tree))
    r_sum = tree.r_sum + new.r_sum
    if biased:
        prob = jnp.exp(new.weight - tree.weight)
        prob = jnp.where(new.turning | new.diverging, 0.0, jnp.clip(prob, None, 1.0))
        turning = new.turning | is_turning(inverse_mass, left_t.r_left, right_t.r_right, r_sum)
    else:
        prob = jax.nn.sigmoid(new.weight - tree.weight)
        turning = tree.turning
    move = random.bernoulli(wrap(key, impl), prob)
    z_p, pe_p, g_p, e_p = _where(
        move,
        (new.z_proposal, new.pe_proposal, new.g_proposal, new.energy_proposal),
        (tree.z_proposal, tree.pe_proposal, tree.g_proposal, tree.energy_proposal),
    )
    return Tree(
        left_t.z_left,
        left_t.r_left,
        left_t.g_left,
        right_t.z_right,
        right_t.r_right,
        right_t.g_right,
        z_p,
        pe_p,
        g_p,
        e_p,
        tree.depth + 1,
        jnp.logaddexp(tree.weight, new.weight),
        r_sum,
        turning,
        new.diverging,
        tree.sum_accept_probs + new.sum_accept_probs,
        tree.num_proposals + new.num_proposals,
    )


def _leaf(z, r, pe, g, energy, weight, diverging, accept, n) -> Tree:
    import jax.numpy as jnp  # optional weight: JAX loads only for posterior/calibration work

    return Tree(
        z, r, g, z, r, g, z, pe, g, energy, jnp.array(0, jnp.int32), weight, r,
        jnp.array(False), diverging, accept, jnp.array(n, jnp.int32),
    )  # fmt: skip


def make_sampler(potential, example_z, num_warmup: int, num_draws: int):
    """``(start, step, run)``: NUTS on ``potential(z, data)``, many chains side by side."""
    import jax  # optional weight: JAX loads only for posterior/calibration work
    import jax.numpy as jnp  # optional weight: JAX loads only for posterior/calibration work
    from jax import lax, random
    from jax.flatten_util import ravel_pytree

    # optional weight: NumPyro loads only for posterior/calibration work
    from numpyro.infer.hmc_util import (
        build_adaptation_schedule,
        dual_averaging,
        welford_covariance,
    )

    from .prng import unrolled_impl, unwrap, wrap  # optional weight: JAX only for posterior work

    if num_draws < 1:
        raise ValueError(f"num_draws must be at least 1, got {num_draws}")
    # JAX's keys, hashed without a loop per call (the same bits: bayesobs.fits.prng)
    impl = unrolled_impl()

    def split(key, n):
        return unwrap(random.split(wrap(key, impl), n), impl)

    flat0, unravel = ravel_pytree(example_z)
    size, dtype = flat0.shape[0], flat0.dtype
    # NUTS on a model keeps one diagonal block of every site, sorted by name
    block = tuple(sorted(example_z)) if isinstance(example_z, dict) else None
    ss_init, ss_update = dual_averaging()
    mm_init, mm_update, mm_final = welford_covariance(diagonal=True)
    schedule = jnp.asarray(build_adaptation_schedule(num_warmup)) if num_warmup else None
    num_windows = len(schedule) if num_warmup else 0
    total = num_warmup + num_draws

    def value_and_grad(z, data):
        return jax.value_and_grad(lambda q: potential(unravel(q), data))(z)

    def begin_doubling(lane: Lane) -> Lane:
        tree_key, direction_key, doubling_key = split(lane.tree_key, 3)
        sub_key, trans_key = split(doubling_key, 2)
        return lane._replace(
            tree_key=tree_key,
            right=random.bernoulli(wrap(direction_key, impl)),
            trans_key=trans_key,
            sub=lane.tree._replace(num_proposals=jnp.array(0, jnp.int32)),
            sub_key=sub_key,
            ckpt_r=jnp.zeros_like(lane.ckpt_r),
            ckpt_r_sum=jnp.zeros_like(lane.ckpt_r_sum),
        )

    def begin_transition(lane: Lane) -> Lane:
        key, key_momentum, key_transition = split(lane.key, 3)
        # NumPyro's momentum_generator splits one key per mass block (even for one block)
        if layout["blocked"]:
            key_momentum = split(key_momentum, 1)[0]
        eps = random.normal(wrap(key_momentum, impl), (size,))
        r = lane.adapt.mass_sqrt * eps
        energy0 = lane.pe + kinetic(lane.adapt.inverse_mass, r)
        tree = _leaf(
            lane.z, r, lane.pe, lane.g, energy0, jnp.zeros(()), jnp.array(False), jnp.zeros(()), 0
        )
        lane = lane._replace(key=key, energy0=energy0, tree=tree, tree_key=key_transition)
        return begin_doubling(lane)

    layout = {"blocked": True}  # set by start: NUTS on a model keeps its mass matrix in blocks

    def start(hmc_state) -> Lane:
        a = hmc_state.adapt_state
        parts = (a.inverse_mass_matrix, a.mass_matrix_sqrt, a.mm_state)
        layout["blocked"] = isinstance(a.inverse_mass_matrix, dict)
        if layout["blocked"]:
            if not all(isinstance(p, dict) and list(p) == [block] for p in parts):
                raise ValueError(
                    "this sampler takes NUTS's default mass matrix, one diagonal block of "
                    f"every site {block}; got blocks {list(a.inverse_mass_matrix)}"
                )
            parts = tuple(p[block] for p in parts)
        inv, sqrt, mm_state = parts
        if inv.ndim != 1:
            raise ValueError("this sampler takes a diagonal mass matrix (NUTS's default)")
        adapt = Adapt(a.step_size, inv, sqrt, a.ss_state, mm_state, a.window_idx, a.rng_key)
        z = ravel_pytree(hmc_state.z)[0]
        g = ravel_pytree(hmc_state.z_grad)[0]
        blank = _leaf(z, z, hmc_state.potential_energy, g, jnp.zeros(()), jnp.zeros(()),
                      jnp.array(False), jnp.zeros(()), 0)  # fmt: skip
        key = hmc_state.rng_key
        lane = Lane(
            i=jnp.array(0, jnp.int32), z=z, pe=hmc_state.potential_energy, g=g, adapt=adapt,
            key=key, energy0=jnp.zeros(()), tree=blank, tree_key=key, right=jnp.array(False),
            trans_key=key, sub=blank, sub_key=key,
            ckpt_r=jnp.zeros((MAX_TREE_DEPTH, size), dtype),
            ckpt_r_sum=jnp.zeros((MAX_TREE_DEPTH, size), dtype),
        )  # fmt: skip
        return begin_transition(lane)

    def end_transition(lane: Lane, tree: Tree) -> Lane:
        """Move to the draw, adapt (warm-up), and begin the next trajectory."""
        i = lane.i
        lane = lane._replace(z=tree.z_proposal, pe=tree.pe_proposal, g=tree.g_proposal)
        if num_warmup:
            a = lane.adapt
            accept_prob = tree.sum_accept_probs / tree.num_proposals
            adapt_key, _ = split(a.key, 2)  # NumPyro splits off a key for a search it skips
            ss_state = ss_update(TARGET_ACCEPT - accept_prob, a.ss_state)
            log_step, log_step_avg, *_ = ss_state
            step_size = jnp.where(i == num_warmup - 1, jnp.exp(log_step_avg), jnp.exp(log_step))
            finfo = jnp.finfo(jnp.result_type(step_size))
            step_size = jnp.clip(step_size, finfo.tiny, finfo.max)
            middle = (0 < a.window_idx) & (a.window_idx < num_windows - 1)
            mm_state = _where(middle, mm_update(lane.z, a.mm_state), a.mm_state)
            at_end = i == schedule[a.window_idx, 1]
            # at a middle window's end: the mass matrix estimated, the dual averaging restarted
            new_window = at_end & middle
            inv, sqrt, _ = mm_final(mm_state, regularize=True)
            new = Adapt(
                step_size,
                jnp.where(new_window, inv, a.inverse_mass),
                jnp.where(new_window, sqrt, a.mass_sqrt),
                _where(new_window, ss_init(jnp.log(10.0) + jnp.log(step_size)), ss_state),
                _where(new_window, mm_init(size), mm_state),
                jnp.where(at_end, a.window_idx + 1, a.window_idx),
                adapt_key,
            )
            lane = lane._replace(adapt=_where(i < num_warmup, new, a))
        return begin_transition(lane._replace(i=i + 1))

    def step_parts(lane: Lane, data):
        """One leapfrog step: the lane's three possible successors, which of them, the record."""
        inv, sub = lane.adapt.inverse_mass, lane.sub
        # velocity Verlet from the subtree's leaf on this doubling's side
        z, r, g = _where(
            lane.right,
            (sub.z_right, sub.r_right, sub.g_right),
            (sub.z_left, sub.r_left, sub.g_left),
        )
        eps = jnp.where(lane.right, lane.adapt.step_size, -lane.adapt.step_size)
        r = r - 0.5 * eps * g
        z = z + eps * (inv * r)
        pe, g = value_and_grad(z, data)
        r = r - 0.5 * eps * g
        energy = pe + kinetic(inv, r)
        delta = energy - lane.energy0
        delta = jnp.where(jnp.isnan(delta), jnp.inf, delta)
        leaf = _leaf(
            z,
            r,
            pe,
            g,
            energy,
            -delta,
            delta > MAX_DELTA_ENERGY,
            jnp.clip(jnp.exp(-delta), None, 1.0),
            1,
        )
        # the leaf joins the subtree; U-turns checked against the subtree's checkpoints
        sub_key, leaf_key = split(lane.sub_key, 2)
        n = sub.num_proposals
        sub = _where(n == 0, leaf, combine(sub, leaf, inv, lane.right, leaf_key, False, impl))
        idx_min, idx_max = leaf_ckpt_range(n)
        even = n % 2 == 0
        ckpt_r = lane.ckpt_r.at[idx_max].set(jnp.where(even, r, lane.ckpt_r[idx_max]))
        ckpt_r_sum = lane.ckpt_r_sum.at[idx_max].set(
            jnp.where(even, sub.r_sum, lane.ckpt_r_sum[idx_max])
        )
        checks = jax.vmap(lambda rc, rsc: is_turning(inv, rc, r, sub.r_sum - rsc + rc))(
            ckpt_r, ckpt_r_sum
        )
        k = jnp.arange(MAX_TREE_DEPTH)
        turning = jnp.any(checks & (k >= idx_min) & (k <= idx_max))
        sub = sub._replace(depth=lane.tree.depth, turning=turning)
        sub_done = (sub.num_proposals >= 2**lane.tree.depth) | turning | sub.diverging
        leapt = lane._replace(sub=sub, sub_key=sub_key, ckpt_r=ckpt_r, ckpt_r_sum=ckpt_r_sum)
        # a finished subtree joins the trajectory, which doubles again or ends
        tree = combine(lane.tree, sub, inv, lane.right, lane.trans_key, True, impl)
        more = (tree.depth < MAX_TREE_DEPTH) & ~tree.turning & ~tree.diverging
        doubled = leapt._replace(tree=tree)
        record = Record(
            sub_done & ~more & (lane.i >= num_warmup) & (lane.i < total),
            lane.i - num_warmup,
            tree.z_proposal,
            tree.diverging,
            tree.num_proposals,
        )
        return (
            (begin_doubling(doubled), end_transition(doubled, tree), leapt),
            (sub_done, more),
            record,
        )

    def step(lane: Lane, data) -> tuple[Lane, Record]:
        (doubling, ended, leapt), (sub_done, more), record = step_parts(lane, data)
        return _where(sub_done, _where(more, doubling, ended), leapt), record

    def run(hmc_states, data):
        n0 = jax.tree.leaves(hmc_states)[0].shape[0]
        if n0 % CHAIN_MULTIPLE:
            # XLA compiles a batch of one to other (scalar) code, and the packed state's
            # arithmetic to other vector code for other numbers of chains, which rounds
            # differently: the chains run beside copies of the first, to a multiple of
            # CHAIN_MULTIPLE, so that a chain gets the draws it gets with any others
            extra = CHAIN_MULTIPLE - n0 % CHAIN_MULTIPLE
            padded = jax.tree.map(
                lambda a: jnp.concatenate([a, jnp.repeat(a[:1], extra, axis=0)]),
                (hmc_states, data),
            )
            return jax.tree.map(lambda a: a[:n0], run(*padded))
        lanes = jax.vmap(start)(hmc_states)
        n = lanes.i.shape[0]
        rows = jnp.arange(n)
        # a spare slot per chain takes the writes of the steps that keep no draw
        bufs = (
            jnp.zeros((n, num_draws + 1, size), dtype),
            jnp.zeros((n, num_draws + 1), bool),
            jnp.zeros((n, num_draws + 1), jnp.int32),
        )
        vparts = jax.vmap(step_parts)
        pack, unpack = packing(lanes)

        def body(carry):
            packed, (draws, div, steps) = carry
            lanes = unpack(packed)
            active = lanes.i < total
            (doubling, ended, leapt), (sub_done, more), rec = vparts(lanes, data)
            # the next lane, chosen among four in one select per dtype of the packed state
            # (not one per field: XLA copies the choice's arithmetic into each select)
            old = ~active
            grows = active & ~sub_done
            doubles = active & sub_done & more
            packed = tuple(
                jnp.where(
                    old[:, None],
                    o,
                    jnp.where(grows[:, None], g, jnp.where(doubles[:, None], d, e)),
                )
                for o, g, d, e in zip(packed, pack(leapt), pack(doubling), pack(ended), strict=True)
            )
            slot = jnp.where(rec.kept, rec.index, num_draws)  # kept: only an active chain's
            draws = draws.at[rows, slot].set(rec.z)
            div = div.at[rows, slot].set(rec.diverging)
            steps = steps.at[rows, slot].set(rec.num_steps)
            return packed, (draws, div, steps)

        _, (draws, div, steps) = lax.while_loop(
            lambda c: jnp.any(unpack(c[0]).i < total), body, (pack(lanes), bufs)
        )
        draws = jax.vmap(jax.vmap(unravel))(draws[:, :num_draws])
        return draws, div[:, :num_draws], steps[:, :num_draws]

    return start, step, run
