"""JAX's threefry keys with the hash unrolled: the same bits, without a loop per call."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = np.uint32(0x1BD11BDA)


def _rotate_left(v, d: int):
    return (v << np.uint32(d)) | (v >> np.uint32(32 - d))


def threefry2x32(key1, key2, x1, x2):
    """The Threefry-2x32 hash (20 rounds) of counters ``(x1, x2)`` under key ``(key1, key2)``."""
    ks = (key1, key2, key1 ^ key2 ^ _PARITY)
    x = [x1 + ks[0], x2 + ks[1]]
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x[0] = x[0] + x[1]
            x[1] = x[0] ^ _rotate_left(x[1], r)
        x[0] = x[0] + ks[(i + 1) % 3]
        x[1] = x[1] + ks[(i + 2) % 3] + np.uint32(i + 1)
    return x[0], x[1]


def _counters(shape):
    """JAX's ``iota_2x32_shape``: the flat index of every element as (high, low) words."""
    import jax.numpy as jnp  # optional weight: JAX loads only for posterior/calibration work

    n = int(np.prod(shape, dtype=np.int64))
    if n >= 2**32:
        raise ValueError(f"at most 2**32 - 1 random values per key, asked for {n}")
    return jnp.zeros(shape, jnp.uint32), jnp.arange(n, dtype=jnp.uint32).reshape(shape)


def _hash(key, shape):
    high, low = _counters(tuple(shape))
    return threefry2x32(key[0], key[1], high, low)


def split(key, shape):
    """``shape`` new raw keys from raw key ``key`` (JAX's partitionable ``threefry_split``)."""
    import jax.numpy as jnp  # optional weight: JAX loads only for posterior/calibration work

    b1, b2 = _hash(key, shape)
    return jnp.stack([b1, b2], axis=b1.ndim)


def random_bits(key, bit_width: int, shape):
    """Random unsigned integers of ``bit_width`` bits (JAX's partitionable ``threefry_random_bits``)."""
    import jax.numpy as jnp  # optional weight: JAX loads only for posterior/calibration work
    from jax import lax  # optional weight: JAX loads only for posterior/calibration work

    if bit_width not in (8, 16, 32, 64):
        raise TypeError(f"random bits of 8, 16, 32 or 64 bits, not {bit_width}")
    b1, b2 = _hash(key, shape)
    dtype = {8: jnp.uint8, 16: jnp.uint16, 32: jnp.uint32, 64: jnp.uint64}[bit_width]
    if bit_width == 64:
        hi, lo = lax.convert_element_type(b1, dtype), lax.convert_element_type(b2, dtype)
        return lax.shift_left(hi, jnp.asarray(32, dtype=dtype)) | lo
    if bit_width == 32:
        return b1 ^ b2
    return lax.convert_element_type(b1 ^ b2, dtype)


def _seed(seed):
    from jax import random  # optional weight: JAX loads only for posterior/calibration work

    return random.key_data(random.key(seed, impl="threefry2x32"))


def _fold_in(key, data):
    from jax import random  # optional weight: JAX loads only for posterior/calibration work

    keys = random.wrap_key_data(key, impl="threefry2x32")
    return random.key_data(random.fold_in(keys, data))


@lru_cache(maxsize=1)
def _impl():
    from jax.extend.random import define_prng_impl  # optional weight: JAX only for posterior work

    return define_prng_impl(
        key_shape=(2,),
        seed=_seed,
        split=split,
        random_bits=random_bits,
        fold_in=_fold_in,
        name="threefry2x32_unrolled",
        tag="fu",
    )


def unrolled_impl():
    """The PRNG implementation of JAX's threefry keys with the hash unrolled, or ``None``."""
    import jax  # optional weight: JAX loads only for posterior/calibration work

    return _impl() if jax.config.jax_threefry_partitionable else None


def wrap(raw, impl):
    """Raw ``uint32`` key data as a typed key of ``impl`` (``raw`` itself when ``impl`` is None)."""
    from jax import random  # optional weight: JAX loads only for posterior/calibration work

    return raw if impl is None else random.wrap_key_data(raw, impl=impl)


def unwrap(key, impl):
    """A key from :func:`wrap` (or ``jax.random.split`` of one) back to raw key data."""
    from jax import random  # optional weight: JAX loads only for posterior/calibration work

    return key if impl is None else random.key_data(key)


__all__ = ["random_bits", "split", "threefry2x32", "unrolled_impl", "unwrap", "wrap"]
