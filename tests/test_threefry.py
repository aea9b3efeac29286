"""rmtbase.ensembles.threefry: the unrolled Threefry draws are JAX's own, bit for bit.

Exact comparisons throughout: the module claims the same bits as ``jax.random.normal`` and
``jax.random.bits`` (integer hash, then the same float operations), so any differing bit is a
defect, not rounding.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rmtbase.ensembles import named_key
from rmtbase.ensembles.threefry import normal, random_bits

SHAPES = [(1,), (7,), (2, 64, 96), (256, 640)]


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    # exact: bit patterns (the module's claim is the same bits, not values within rounding)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(
        a.view(np.uint32), b.view(np.uint32))


def _pair(shape):
    """Both generators at ``shape`` for ten keys under one ``vmap`` (the profile null's
    loop draws its heads so), jitted: (bits, normals) of each."""
    def both(k):
        return (random_bits(k, shape), jax.random.bits(k, shape, jnp.uint32),
                normal(k, shape), jax.random.normal(k, shape, jnp.float32))
    return jax.jit(jax.vmap(both))


@pytest.mark.parametrize("shape", SHAPES)
def test_normal_and_bits_are_jax_s_bit_for_bit(shape):
    root = named_key(jax.random.fold_in(jax.random.key(2 ** 31 - 1), 7), "profile")
    keys = jax.vmap(lambda j: jax.random.fold_in(root, j))(jnp.arange(10))
    bits, jax_bits, z, jax_z = _pair(shape)(keys)
    # exact: the same integer hash and the same float operations as jax.random's
    assert _same(bits, jax_bits) and _same(z, jax_z)
    assert _same(jax.jit(lambda k: normal(k, shape))(keys[3]), jax_z[3])  # exact: same bits


def test_normal_is_jax_s_for_a_raw_key_and_with_x64():
    key = jax.random.key(5)
    shape = (2, 64, 96)
    want = jax.jit(lambda k: jax.random.normal(k, shape, jnp.float32))(key)
    raw = jax.random.key_data(key)  # an old-style uint32 key
    assert _same(jax.jit(lambda k: normal(k, shape))(raw), want)  # exact: same bits
    with jax.enable_x64(True):
        assert _same(jax.jit(lambda k: normal(k, shape))(key), want)  # exact: same bits


def test_what_it_does_not_serve_is_jax_s_own():
    key = jax.random.key(3)
    # exact: handed to jax.random.normal itself
    assert _same(normal(key, (4, 5), jnp.bfloat16).astype(jnp.float32),
                 jax.random.normal(key, (4, 5), jnp.bfloat16).astype(jnp.float32))
    with jax.threefry_partitionable(False):
        assert _same(normal(key, (4, 5)), jax.random.normal(key, (4, 5), jnp.float32))
    rbg = jax.random.key(3, impl="rbg")
    assert _same(normal(rbg, (4, 5)), jax.random.normal(rbg, (4, 5), jnp.float32))


def test_the_draws_are_standard_normal():
    """Not a law test of JAX's generator (the draws are JAX's, above) but a guard against a
    comparison that is vacuous: 2 M draws have N(0, 1)'s mean, variance and tails
    (|z| < 5 for each: mean and variance at n = 2²¹, the tail counts beyond 2 and 3 σ as
    binomials)."""
    x = np.asarray(jax.jit(lambda k: normal(k, (2 ** 21,)))(jax.random.key(11)), np.float64)
    n = x.size
    assert abs(x.mean()) * np.sqrt(n) < 5
    assert abs(x.var() - 1.0) / np.sqrt(2.0 / n) < 5
    for t, p in ((2.0, 0.04550026389635842), (3.0, 0.0026997960632601866)):
        k = np.count_nonzero(np.abs(x) > t)
        assert abs(k - n * p) / np.sqrt(n * p * (1 - p)) < 5


@pytest.mark.parametrize("storage", ["q4_1", "fp8_e4m3"])
def test_the_quantised_profile_null_keeps_its_format_4_draws(monkeypatch, storage):
    """The profile null of a block format or FP8 draws its factors by :func:`normal`: its
    draws are those JAX's own normals give (the cache files stay format 4)."""
    from rmtbase.ensembles import threefry
    from rmtbase.scoring.profile import factors as fa

    storage = fa.null_storage(storage)  # the chunk takes the record (03b55c2)
    fa._stored_null.cache_clear()
    new = fa._profile_chunk(64, 16, storage, 3, 1, 250, False)
    monkeypatch.setattr(threefry, "normal",
                        lambda k, s, dt=jnp.float32: jax.random.normal(k, s, dt))
    fa._stored_null.cache_clear()
    old = fa._profile_chunk(64, 16, storage, 3, 1, 250, False)
    monkeypatch.undo()
    fa._stored_null.cache_clear()
    assert set(new) == set(old)
    for axis in old:  # exact: the same normals through the same compiled round trip
        assert _same(new[axis], old[axis]), axis
