"""bayesobs.fits.prng: JAX's threefry keys with the hash unrolled (issues 32, 50).

References, independent of JAX: the hash against the known-answer vectors of
Random123 (Salmon et al. 2011, "Parallel random numbers: as easy as 1, 2, 3",
file tests/kat_vectors of github.com/DEShawResearch/random123); the bits and
draws by distribution (scipy.stats at ``ALPHA``, moments within 4 standard
errors), drawn through the keys under ``jit`` and ``vmap`` as the sampler draws
them. One test keeps the module's contract with JAX's own threefry bits.
"""

import numpy as np
import pytest
from scipy import stats

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402
from jax import lax, random  # noqa: E402

from bayesobs.fits.prng import (  # noqa: E402
    random_bits,
    split,
    threefry2x32,
    unrolled_impl,
    unwrap,
    wrap,
)

KEYS = random.split(random.PRNGKey(20261128), 4000)  # raw uint32 keys, as NumPyro keeps them
N = len(KEYS)
# a correct generator fails each test at this level for one seed in a thousand; the
# seeds are fixed, so every test is deterministic
ALPHA = 1e-3


def typed(k):
    return wrap(k, unrolled_impl())


def draws(draw, keys=KEYS):
    """``draw(key)`` for every key through the unrolled keys, as the sampler calls it."""
    return np.asarray(jax.jit(jax.vmap(lambda k: draw(typed(k))))(keys))


# Random123's tests/kat_vectors (github.com/DEShawResearch/random123, commit 9545ff6), lines
# "threefry2x32 20": counter (x1, x2), key (k1, k2), expected (zeros, all ones, digits of pi)
RANDOM123_KAT = [
    ((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x243F6A88, 0x85A308D3), (0x13198A2E, 0x03707344), (0xC4923A9C, 0x483DF7A0)),
]


@pytest.mark.parametrize(("counter", "key", "expected"), RANDOM123_KAT)
def test_the_hash_gives_random123s_known_answers(counter, key, expected):
    args = [np.array([v], np.uint32) for v in (*key, *counter)]
    assert [int(v[0]) for v in threefry2x32(*args)] == list(expected)
    assert [int(v[0]) for v in jax.jit(threefry2x32)(*map(jnp.asarray, args))] == list(expected)


@pytest.mark.parametrize("width", [8, 16, 32, 64])
def test_every_byte_of_the_random_bits_is_uniform(width):
    x64 = jax.config.jax_enable_x64
    try:
        jax.config.update("jax_enable_x64", width == 64 or x64)  # uint64 needs it
        dtype = jnp.dtype(f"uint{width}")
        bits = draws(lambda k: random.bits(k, (16,), dtype)).ravel()
    finally:
        jax.config.update("jax_enable_x64", x64)
    assert bits.dtype == dtype
    for byte in range(width // 8):  # chi-square over 256 cells, 250 expected in each
        counts = np.bincount((bits >> np.uint64(8 * byte)).astype(np.uint8), minlength=256)
        assert stats.chisquare(counts).pvalue > ALPHA, f"byte {byte} of uint{width}"


def test_random_bits_refuse_odd_widths():
    with pytest.raises(TypeError, match="8, 16, 32 or 64"):
        random_bits(KEYS[0], 12, (2,))


def test_uniform_draws_are_uniform():
    u = draws(lambda k: random.uniform(k, (16,))).ravel()
    n = len(u)
    assert stats.kstest(u, "uniform").pvalue > ALPHA
    assert abs(u.mean() - 0.5) < 4 * np.sqrt(1 / 12 / n)
    assert abs(u.var() - 1 / 12) < 4 * np.sqrt(1 / 180 / n)  # var of (U - 1/2)^2 is 1/180


def test_normal_draws_are_standard_normal():
    z = draws(lambda k: random.normal(k, (4,))).ravel()  # the momentum
    n = len(z)
    assert stats.kstest(z, "norm").pvalue > ALPHA
    assert abs(z.mean()) < 4 / np.sqrt(n)
    assert abs(z.var() - 1) < 4 * np.sqrt(2 / n)


@pytest.mark.parametrize("p", [0.5, 0.03, 0.7])
def test_bernoulli_draws_have_their_probability(p):
    # the direction of a doubling (1/2) and the moves between (sub)trees
    moves = draws(lambda k: random.bernoulli(k, p, (8,)))
    assert stats.binomtest(int(moves.sum()), moves.size, p).pvalue > ALPHA


def test_split_keys_are_distinct_and_their_draws_uncorrelated():
    children = draws(lambda k: unwrap(random.split(k, (2, 3)), unrolled_impl()))
    assert children.shape == (N, 2, 3, 2) and children.dtype == np.uint32
    flat = children.reshape(-1, 2)
    assert len(np.unique(flat, axis=0)) == len(flat)  # 24,000 keys, no collision
    # first uniform of the parent and of its six children: under independence each
    # correlation is about N(0, 1/N); 4/sqrt(N) is exceeded with probability 6e-5
    family = [KEYS] + [jnp.asarray(c) for c in flat.reshape(N, 6, 2).swapaxes(0, 1)]
    u = np.column_stack([draws(random.uniform, keys) for keys in family])
    r = np.corrcoef(u, rowvar=False)
    assert np.abs(r[~np.eye(7, dtype=bool)]).max() < 4 / np.sqrt(N)


def test_a_chain_of_splits_gives_uncorrelated_draws():
    # the sampler's transitions: key, key_momentum, key_transition = split(key, 3)
    def step(key, _):
        key, momentum, _transition = unwrap(random.split(typed(key), 3), unrolled_impl())
        return key, random.normal(typed(momentum))

    z = np.asarray(jax.jit(lambda k: lax.scan(step, k, length=N)[1])(KEYS[0]))
    assert stats.kstest(z, "norm").pvalue > ALPHA
    for lag in (1, 2, 3):
        assert abs(np.corrcoef(z[:-lag], z[lag:])[0, 1]) < 4 / np.sqrt(N), f"lag {lag}"


def test_keys_and_bits_are_jaxs_own_threefry():
    # API contract, the one key-by-key test (issue 50): the module promises JAX's partitionable
    # threefry bits, so a seed draws the same whether the sampler uses these keys or JAX's.
    # Integer hashing, no floating-point order involved; a JAX release that changes its key
    # derivation is held off by the ceiling "jax>=0.4.30,<0.11" in pyproject.toml.
    keys = KEYS[:50]
    for shape in [(3,), (2, 3)]:
        want = jax.vmap(lambda k, shape=shape: random.split(k, shape))(keys)
        assert np.array_equal(jax.vmap(lambda k, shape=shape: split(k, shape))(keys), want)
    want = jax.vmap(lambda k: random.bits(k, (5,), jnp.uint32))(keys)
    assert np.array_equal(jax.vmap(lambda k: random_bits(k, 32, (5,)))(keys), want)


def test_the_compiled_split_has_no_loop():
    # the point of the module: JAX's CPU lowering hashes in a five-iteration while loop
    text = jax.jit(lambda k: split(k, (3,))).lower(KEYS[0]).compile().as_text()
    assert "while" not in text


def test_without_partitionable_keys_jaxs_own_are_kept():
    # defining ours registers a second implementation; JAX's default stays its own threefry
    assert unrolled_impl() is not None
    assert str(random.key_impl(random.key(0))) == jax.config.jax_default_prng_impl == "threefry2x32"
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
