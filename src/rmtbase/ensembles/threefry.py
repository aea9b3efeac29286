"""JAX's own N(0, 1) draws, bit for bit, at a fraction of their CPU cost.

:func:`normal` returns exactly ``jax.random.normal(key, shape, jnp.float32)``
(``tests/test_threefry.py``): Threefry-2x32 (Salmon et al. 2011) unrolled with constant rotations
into one fused pass, JAX's partitionable scheme, then √2·erfinv(u) as JAX computes u. Any other
dtype, key implementation, scheme or ≥ 2³¹ entries goes to ``jax.random.normal`` itself."""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

__all__ = ["fold_in_words", "normal", "random_bits"]

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = np.uint32(0x1BD11BDA)


def _rotate_left(x, r: int):
    if isinstance(x, np.ndarray):  # the host form (fold_in_words): numpy's uint32 shifts
        return (x << np.uint32(r)) | (x >> np.uint32(32 - r))
    return lax.shift_left(x, np.uint32(r)) | lax.shift_right_logical(x, np.uint32(32 - r))


def threefry2x32(k0, k1, x0, x1):
    """Threefry-2x32 (20 rounds) of key (k0, k1) on counters (x0, x1) (uint32, one shape), as
    ``threefry2x32_p``; traced, or on the host in numpy uint32."""
    ks = (k0, k1, k0 ^ k1 ^ _PARITY)
    x0, x1 = x0 + ks[0], x1 + ks[1]
    for step in range(5):
        for r in _ROTATIONS[step % 2]:
            x0 = x0 + x1
            x1 = x0 ^ _rotate_left(x1, r)
        x0 = x0 + ks[(step + 1) % 3]
        x1 = x1 + ks[(step + 2) % 3] + np.uint32(step + 1)
    return x0, x1


def _served(key, shape, dtype) -> bool:
    """True where :func:`normal` reproduces ``jax.random.normal`` (module docstring)."""
    if jnp.dtype(dtype) != jnp.float32 or math.prod(shape) >= 2 ** 31:
        return False
    if not jax.config.jax_threefry_partitionable:
        return False
    return _one_threefry_key(key)


def _one_threefry_key(key) -> bool:
    """Whether ``key`` is one threefry2x32 key: a typed key of shape (), or a raw (2,) uint32
    key under the default threefry implementation."""
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        return key.shape == () and str(jax.random.key_impl(key)) == "threefry2x32"
    return key.shape == (2,) and key.dtype == jnp.uint32 and \
        str(jax.config.jax_default_prng_impl) == "threefry2x32"


def fold_in_words(key, data) -> np.ndarray | None:
    """The key words of ``jax.random.fold_in(key, i)`` for each i of ``data`` (integers < 2³²), on
    the host: ``(len(data), 2)`` uint32, or None unless ``key`` is a concrete threefry key. As
    JAX: Threefry-2x32 of the counter (i >> 32, i & 0xFFFFFFFF) under the key
    (``tests/test_chunk_keys.py``)."""
    if isinstance(key, jax.core.Tracer) or not _one_threefry_key(key):
        return None
    typed = jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)
    words = np.asarray(jax.random.key_data(key) if typed else key)
    i = np.asarray(data, dtype=np.uint32).reshape(-1)
    y0, y1 = threefry2x32(words[0], words[1], np.zeros_like(i), i)
    return np.stack([y0, y1], axis=-1)


def random_bits(key, shape):
    """``jax.random.bits(key, shape, jnp.uint32)`` for a threefry key (partitionable scheme): word
    i = y₀ ⊕ y₁ of Threefry(key, (0, i)), written once by a two-pass ``fori_loop`` so that XLA
    does not recompute the hash in every consumer."""
    data = jax.random.key_data(key) if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key) \
        else key
    n = math.prod(shape)
    half = -(-n // 2)

    def part(j, out):
        i = lax.iota(np.uint32, half) + (j * half).astype(np.uint32)
        y0, y1 = threefry2x32(data[0], data[1], jnp.zeros_like(i), i)
        return lax.dynamic_update_slice(out, y0 ^ y1, (j * half,))

    bits = lax.fori_loop(0, 2, part, jnp.zeros(2 * half, np.uint32))
    return bits[:n].reshape(tuple(shape))


def normal(key, shape, dtype=jnp.float32):
    """``jax.random.normal(key, shape, dtype)``, the same bits: threefry float32 by the unrolled
    hash, anything else by JAX; jitted when called eagerly."""
    shape = tuple(int(s) for s in shape)
    if not _served(key, shape, dtype):
        return jax.random.normal(key, shape, dtype)
    return _normal(key, shape)


@partial(jax.jit, static_argnums=1)
def _normal(key, shape):
    """Float32 N(0, 1) of ``shape`` as ``jax.random.normal``: u from the top 23 bits as
    ``jax.random.uniform`` on [−1 + 2⁻²⁴, 1), then √2·erfinv(u)."""
    mantissa = lax.shift_right_logical(random_bits(key, shape), np.uint32(9))
    one_to_two = lax.bitcast_convert_type(mantissa | np.uint32(0x3F800000), jnp.float32)
    lo = np.nextafter(np.float32(-1.0), np.float32(0.0), dtype=np.float32)
    hi = np.float32(1.0)
    u = lax.max(lo, (one_to_two - np.float32(1.0)) * (hi - lo) + lo)
    return lax.mul(np.float32(np.sqrt(2)), lax.erf_inv(u))
