"""bayesobs.fits.prng: JAX's threefry keys with the hash unrolled (issue 32).

Reference: ``jax.random`` itself on the raw keys; every draw must be the same
bits, for many keys, under ``vmap`` and ``jit`` as the sampler uses them.
"""

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402
from jax import random  # noqa: E402

from bayesobs.fits.prng import (  # noqa: E402
    random_bits,
    split,
    threefry2x32,
    unrolled_impl,
    unwrap,
    wrap,
)

KEYS = random.split(random.PRNGKey(20261128), 2000)  # raw uint32 keys, as NumPyro keeps them


def typed(k):
    return wrap(k, unrolled_impl())


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)


def test_the_hash_is_jaxs_threefry():
    # jax.extend.random.threefry_2x32 hashes a flat count array as its two halves
    from jax.extend.random import threefry_2x32

    counts = jnp.arange(64, dtype=jnp.uint32)
    for key in KEYS[:50]:
        want = threefry_2x32(key, counts)
        x1, x2 = threefry2x32(key[0], key[1], counts[:32], counts[32:])
        assert same(jnp.concatenate([x1, x2]), want)


@pytest.mark.parametrize("shape", [(1,), (2,), (3,), (2, 3)])
def test_split_gives_jaxs_keys(shape):
    want = jax.vmap(lambda k: random.split(k, shape))(KEYS)
    got = jax.jit(jax.vmap(lambda k: unwrap(random.split(typed(k), shape), unrolled_impl())))(KEYS)
    assert same(got, want)
    assert same(jax.vmap(lambda k: split(k, shape))(KEYS), want)


@pytest.mark.parametrize("width", [8, 16, 32, 64])
def test_random_bits_are_jaxs(width):
    x64 = jax.config.jax_enable_x64
    try:
        jax.config.update("jax_enable_x64", width == 64 or x64)  # uint64 needs it
        dtype = jnp.dtype(f"uint{width}")
        want = jax.vmap(lambda k: random.bits(k, (5,), dtype))(KEYS)
        got = jax.vmap(lambda k: random.bits(typed(k), (5,), dtype))(KEYS)
    finally:
        jax.config.update("jax_enable_x64", x64)
    assert same(got, want) and np.asarray(got).dtype == dtype


def test_random_bits_refuse_odd_widths():
    with pytest.raises(TypeError, match="8, 16, 32 or 64"):
        random_bits(KEYS[0], 12, (2,))


def test_draws_are_jaxs():
    p = random.uniform(random.PRNGKey(1), (len(KEYS),))
    draws = [
        lambda k, q: random.bernoulli(k, q),  # the moves between (sub)trees
        lambda k, q: random.bernoulli(k),  # the direction of a doubling
        lambda k, q: random.normal(k, (4,)),  # the momentum
        lambda k, q: random.uniform(k, (3,)),
    ]
    for draw in draws:
        want = jax.jit(jax.vmap(draw))(KEYS, p)
        got = jax.jit(jax.vmap(lambda k, q, draw=draw: draw(typed(k), q)))(KEYS, p)
        assert same(got, want)


def test_the_compiled_split_has_no_loop():
    # the point of the module: JAX's CPU lowering hashes in a five-iteration while loop
    text = jax.jit(lambda k: split(k, (3,))).lower(KEYS[0]).compile().as_text()
    assert "while" not in text


def test_without_partitionable_keys_jaxs_own_are_kept():
    old = jax.config.jax_threefry_partitionable
    try:
        jax.config.update("jax_threefry_partitionable", False)
        impl = unrolled_impl()
        assert impl is None
        key = KEYS[0]
        assert wrap(key, impl) is key and unwrap(key, impl) is key
    finally:
        jax.config.update("jax_threefry_partitionable", old)
    assert unrolled_impl() is not None
