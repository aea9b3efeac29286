"""``precision.materialised`` and ``round_trip(..., materialise=True)`` change no value.

The null draws write their quantised factors to memory once (``baseline.null._draw_fn``), so
that XLA does not compute the round trip again inside every statistic's fusion; these are
the same arrays, bit for bit, as the plain round trip's, compiled on their own. (The draws'
statistics are compared old against new by ``scripts/restructure_check.sh``.)
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rmtbase.stats.precision import materialised, round_trip


@pytest.mark.parametrize("shape", [(1, 3), (5, 4), (4, 2, 3), (7, 32)])
def test_materialised_is_the_identity(shape):
    x = jax.random.normal(jax.random.key(0), shape)
    got = jax.jit(materialised)(x)
    assert got.shape == x.shape and got.dtype == x.dtype
    # exact: a copy of stored values (the loop writes x's own entries)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(x))


@pytest.mark.parametrize("storage", ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_k", "q6_k",
                                     "bfloat16", "fp8_e4m3_channel"])
def test_materialised_round_trip_has_the_plain_bits(storage):
    # σ = 0.02, as trained weights; 6 rows of 512 (two K-quant super-blocks a row)
    w = 0.02 * jax.random.normal(jax.random.key(1), (6, 512))
    plain = jax.jit(lambda v: round_trip(v, storage))(w)
    kept = jax.jit(lambda v: round_trip(v, storage, materialise=True))(w)
    # exact: a block format's value q·fp16(d) (+ fp16(m)) is exact in float32 (round_trip)
    assert np.asarray(kept).tobytes() == np.asarray(plain).tobytes()
    # and read by a reduction, as the null's statistics read it
    total = jax.jit(lambda v: jnp.sum(round_trip(v, storage, materialise=True) ** 2))(w)
    np.testing.assert_allclose(float(total), float(np.sum(np.asarray(plain, np.float64) ** 2)),
                               rtol=1e-5)
