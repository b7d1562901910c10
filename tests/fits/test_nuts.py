"""bayesobs.fits.nuts: NumPyro's NUTS, one leapfrog step per loop iteration (issue 32).

References: NumPyro's own ``MCMC(NUTS)`` (the same posterior within Monte Carlo
error, judged by each run's ESS), and targets with closed-form posteriors.
"""

import numpy as np
import pytest

jax = pytest.importorskip("jax")
numpyro = pytest.importorskip("numpyro")

import jax.numpy as jnp  # noqa: E402
import numpyro.distributions as dist  # noqa: E402
from jax import lax, random  # noqa: E402
from numpyro.infer import NUTS  # noqa: E402
from numpyro.infer.util import constrain_fn, potential_energy  # noqa: E402

from bayesobs.fits.nuts import leaf_ckpt_range, make_sampler, packing  # noqa: E402


def normal_model(y):
    mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
    s = numpyro.sample("s", dist.HalfNormal(2.0))
    numpyro.sample("y", dist.Normal(mu, s), obs=y)


Y = jnp.asarray(np.random.default_rng(0).normal(1.5, 0.7, 25), jnp.float32)


def our_draws(keys, warmup, draws, y=Y):
    def one(key):
        return NUTS(normal_model).init(key, warmup, model_args=(y,))

    states = jax.vmap(one)(keys)
    example = jax.tree.map(lambda a: a[0], states.z)
    _, _, run = make_sampler(
        lambda q, data: potential_energy(normal_model, (data,), {}, q), example, warmup, draws
    )
    data = jnp.broadcast_to(y, (keys.shape[0], *y.shape))
    return run(states, data)


SIGMA = 0.7  # known_sigma_model's noise: the posterior of mu is normal in closed form


def known_sigma_model(y):
    mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
    numpyro.sample("y", dist.Normal(mu, SIGMA), obs=y)


def _moments_and_mcse(x: np.ndarray):
    """Mean, SD and their Monte Carlo standard errors (ArviZ's ESS-based MCSE) of (chain, draw)."""
    import arviz as az

    idata = az.from_dict(posterior={"x": x})
    mcse_mean = float(az.mcse(idata, method="mean")["x"])
    mcse_sd = float(az.mcse(idata, method="sd")["x"])
    return float(x.mean()), float(x.std(ddof=1)), mcse_mean, mcse_sd


@pytest.mark.slow  # 2 x 4 x 1,300 draws of ours and of NumPyro's, each compiled
@pytest.mark.parametrize("model", [known_sigma_model, normal_model])
def test_the_draws_follow_numpyros_nuts_posterior_within_monte_carlo_error(model):
    """By distribution, not key by key: 4 chains x (300 + 1000) of this sampler and of
    NumPyro's MCMC(NUTS) give the same posterior means and SDs within 4 combined Monte Carlo
    standard errors (from each run's ESS); with the noise known, both match the closed-form
    normal posterior of mu within 4 MCSE of their own."""
    from numpyro.infer import MCMC

    warmup, draws, chains = 300, 1000, 4

    def one(key):
        return NUTS(model).init(key, warmup, model_args=(Y,))

    states = jax.vmap(one)(random.split(random.PRNGKey(11), chains))
    example = jax.tree.map(lambda a: a[0], states.z)
    _, _, run = make_sampler(
        lambda q, data: potential_energy(model, (data,), {}, q), example, warmup, draws
    )
    zs, div, _ = jax.jit(run)(states, jnp.broadcast_to(Y, (chains, *Y.shape)))
    assert not np.asarray(div).any()
    # the draws are on the unconstrained scale (log s): constrained as MCMC returns them
    ours = jax.vmap(jax.vmap(lambda z: constrain_fn(model, (Y,), {}, z)))(zs)
    mcmc = MCMC(
        NUTS(model),
        num_warmup=warmup,
        num_samples=draws,
        num_chains=chains,
        chain_method="vectorized",
        progress_bar=False,
    )
    mcmc.run(random.PRNGKey(12), Y)
    theirs = mcmc.get_samples(group_by_chain=True)
    for site in theirs:
        m1, s1, em1, es1 = _moments_and_mcse(np.asarray(ours[site], float))
        m2, s2, em2, es2 = _moments_and_mcse(np.asarray(theirs[site], float))
        assert abs(m1 - m2) < 4 * np.hypot(em1, em2), (site, m1, m2, em1, em2)
        assert abs(s1 - s2) < 4 * np.hypot(es1, es2), (site, s1, s2, es1, es2)
    if model is known_sigma_model:
        y = np.asarray(Y, float)
        precision = 1 / 10.0**2 + len(y) / SIGMA**2
        mean, sd = y.sum() / SIGMA**2 / precision, precision**-0.5
        for x in (ours["mu"], theirs["mu"]):
            m, s, em, es = _moments_and_mcse(np.asarray(x, float))
            assert abs(m - mean) < 4 * em and abs(s - sd) < 4 * es, (m, mean, em, s, sd, es)


@pytest.mark.slow  # the sampler compiled for one chain and for several
def test_a_chain_gets_the_same_draws_alone_or_beside_others():
    keys = random.split(random.PRNGKey(1), 5)
    run = jax.jit(our_draws, static_argnums=(1, 2))
    together, div, steps = run(keys, 20, 40)
    alone, div1, steps1 = run(keys[3:4], 20, 40)
    for site in ("mu", "s"):
        np.testing.assert_array_equal(together[site][3], alone[site][0])
    np.testing.assert_array_equal(steps[3], steps1[0])
    np.testing.assert_array_equal(div[3], div1[0])
    assert not np.array_equal(together["mu"][0], together["mu"][1])  # chains differ


@pytest.mark.slow
def test_a_gaussian_posterior_is_recovered_within_monte_carlo_error():
    """mu ~ N(0, 10^2), y_i ~ N(mu, s^2): with s fixed the posterior of mu is normal in closed
    form; here a 3-dimensional Gaussian with scales 0.1, 1 and 10 (the mass matrix must adapt)."""
    import arviz as az

    mean = jnp.asarray([1.0, -2.0, 30.0])
    scale = jnp.asarray([0.1, 1.0, 10.0])

    def potential(q, data):
        return 0.5 * jnp.sum(((q["x"] - mean) / scale) ** 2)

    def one(key):
        z = {"x": random.normal(key, (3,))}
        return NUTS(potential_fn=lambda q: potential(q, None)).init(key, 300, init_params=z)

    keys = random.split(random.PRNGKey(7), 8)
    states = jax.vmap(one)(keys)
    _, _, run = make_sampler(potential, {"x": jnp.zeros(3)}, 300, 500)
    draws, div, _ = jax.jit(run)(states, jnp.zeros(8))
    x = np.asarray(draws["x"])  # (chains, draws, 3)
    assert not np.asarray(div).any()
    idata = az.from_dict(posterior={"x": x})
    mcse = az.mcse(idata, var_names=["x"])["x"].values
    np.testing.assert_array_less(np.abs(x.mean(axis=(0, 1)) - np.asarray(mean)), 4 * mcse)
    sd = x.std(axis=(0, 1))
    np.testing.assert_allclose(sd, np.asarray(scale), rtol=0.12)
    ess = az.ess(idata, var_names=["x"])["x"].values
    assert (ess > 1000).all(), ess  # NUTS on a Gaussian: near-independent draws


def test_checkpoint_ranges_follow_numpyros_rule():
    """Leaf n closes the subtrees counted by its trailing one bits; checkpoints are indexed by
    the one bits of n >> 1 (NumPyro's _leaf_idx_to_ckpt_idxs)."""
    expect = {
        0: (1, 0),
        1: (0, 0),
        2: (2, 1),
        3: (0, 1),
        5: (1, 1),
        6: (3, 2),
        7: (0, 2),
        13: (2, 2),
    }
    for n, (lo, hi) in expect.items():
        got = leaf_ckpt_range(jnp.asarray(n, jnp.int32))
        assert (int(got[0]), int(got[1])) == (lo, hi), n


def test_packing_round_trips_and_a_packed_select_is_the_leafwise_select():
    """One array per dtype, in leaf order; unpacking gives every leaf back bit for bit, and a
    select of two packed trees unpacks to jnp.where of each leaf."""
    rng = np.random.default_rng(1)

    def tree(seed):
        r = np.random.default_rng(seed)
        return {
            "a": jnp.asarray(r.normal(size=(5, 3)), jnp.float32),
            "b": (jnp.asarray(r.integers(0, 9, 5), jnp.int32), jnp.asarray(r.random(5) < 0.5)),
            "c": jnp.asarray(r.normal(size=(5, 2, 4)), jnp.float32),
            "k": jnp.asarray(r.integers(0, 2**32, (5, 2)), jnp.uint32),
            "s": jnp.asarray(r.normal(size=5), jnp.float32),
        }

    x, y = tree(2), tree(3)
    pack, unpack = packing(x)
    packed = pack(x)
    assert [(p.dtype, p.shape) for p in packed] == [
        (jnp.float32, (5, 3 + 8 + 1)),
        (jnp.int32, (5, 1)),
        (jnp.bool_, (5, 1)),
        (jnp.uint32, (5, 2)),
    ]
    back = unpack(packed)
    assert jax.tree.structure(back) == jax.tree.structure(x)
    for got, want in zip(jax.tree.leaves(back), jax.tree.leaves(x), strict=True):
        assert got.dtype == want.dtype and np.array_equal(got, want)
    pred = jnp.asarray(rng.random(5) < 0.5)
    chosen = unpack(
        tuple(jnp.where(pred[:, None], a, b) for a, b in zip(pack(x), pack(y), strict=True))
    )
    for got, a, b in zip(
        jax.tree.leaves(chosen), jax.tree.leaves(x), jax.tree.leaves(y), strict=True
    ):
        want = jnp.where(pred.reshape((5,) + (1,) * (a.ndim - 1)), a, b)
        assert np.array_equal(got, want)


@pytest.mark.slow  # two samplers compiled in float64
def test_the_loop_draws_what_its_steps_draw():
    """``run`` (packed state, one select per dtype) against ``step`` looped chain by chain
    (a select per field), same keys, through a warm-up window: the same draws and trajectory
    lengths (float64: XLA fuses the two programs' arithmetic differently, and in float32
    that rounding sends a chain another way within tens of transitions)."""
    warmup, draws = 30, 10
    with jax.enable_x64(True):
        y = jnp.asarray(np.asarray(Y), jnp.float64)
        keys = random.split(random.PRNGKey(5), 3)
        states = jax.vmap(lambda k: NUTS(normal_model).init(k, warmup, model_args=(y,)))(keys)
        example = jax.tree.map(lambda a: a[0], states.z)
        start, step, run = make_sampler(
            lambda q, data: potential_energy(normal_model, (data,), {}, q), example, warmup, draws
        )
        got, _, got_steps = jax.jit(run)(states, jnp.broadcast_to(y, (3, *y.shape)))

        @jax.jit
        def by_steps(state):
            def body(carry):
                lane, zs, steps = carry
                new, rec = step(lane, y)
                slot = jnp.where(rec.kept, rec.index, draws)
                return new, zs.at[slot].set(rec.z), steps.at[slot].set(rec.num_steps)

            lane = start(state)
            zs = jnp.zeros((draws + 1, lane.z.shape[0]), lane.z.dtype)
            steps = jnp.zeros(draws + 1, jnp.int32)
            _, zs, steps = lax.while_loop(
                lambda c: c[0].i < warmup + draws, body, (lane, zs, steps)
            )
            return zs[:draws], steps[:draws]

        for c in range(3):
            zs, steps = by_steps(jax.tree.map(lambda a, c=c: a[c], states))
            assert zs.dtype == jnp.float64
            np.testing.assert_array_equal(got_steps[c], steps)
            flat = jnp.stack([got[k][c] for k in sorted(got)], axis=-1)
            # rounding drifts (~2e-9 after 40 transitions); a wrong choice would not be close
            np.testing.assert_allclose(flat, zs, rtol=1e-6, atol=1e-9)


def test_a_dense_mass_matrix_or_no_draws_is_refused_with_a_clear_error():
    key = random.PRNGKey(0)
    state = NUTS(normal_model, dense_mass=True).init(key, 10, model_args=(Y,))
    start, _, _ = make_sampler(
        lambda q, data: potential_energy(normal_model, (data,), {}, q), state.z, 10, 5
    )
    with pytest.raises(ValueError, match="diagonal"):
        start(state)
    with pytest.raises(ValueError, match="num_draws must be at least 1"):
        make_sampler(lambda q, data: 0.0, state.z, 10, 0)
