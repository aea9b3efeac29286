"""JAX's own N(0, 1) draws, bit for bit, at a fraction of their CPU cost.

:func:`normal` returns exactly ``jax.random.normal(key, shape, jnp.float32)`` — the same
bits (``tests/test_threefry.py`` compares them at four shapes and ten keys, jitted, vmapped,
with a raw key and under ``jax_enable_x64``) — so nothing it replaces changes a draw, a cache
file or an output.
What differs is how the Threefry-2x32 hash (Salmon et al. 2011, "Parallel random numbers: as
easy as 1, 2, 3", SC'11; 20 rounds, rotations 13 15 26 6 / 17 29 16 24, key parity
0x1BD11BDA) is written for XLA: JAX lowers it on CPU as a ``fori_loop`` of five
four-round steps whose rotation amounts are loop state (jax ``_threefry2x32_lowering``,
``use_rolled_loops=True``), so every step is a pass over the whole array with shifts by a
variable; here the 20 rounds are unrolled with constant rotations, one fused elementwise pass
(written once, :func:`random_bits`).
The draws follow JAX's default ``jax_threefry_partitionable`` scheme (the only one JAX 0.10
uses unless told otherwise): word i of a draw is y₀ ⊕ y₁ for (y₀, y₁) = Threefry(key,
(0, i)), i the row-major index; then, as ``jax.random.uniform`` and ``jax.random.normal``:
u = max(lo, (1.m − 1)·(1 − lo) + lo), lo = −1 + 2⁻²⁴, in float32, from the top 23 bits m, and
√2·erfinv(u). Anything else (another dtype, another key implementation, the non-partitionable
scheme, 2³¹ or more entries) is handed to ``jax.random.normal`` itself.
"""

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
    """Threefry-2x32 with 20 rounds of the key (k0, k1) on the counter words (x0, x1)
    (uint32 arrays of one shape): the two output words, as JAX's ``threefry2x32_p``. Traced
    (jax arrays) or on the host (numpy uint32 arrays and scalars: exact modular arithmetic)."""
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
    """The key words of ``jax.random.fold_in(key, i)`` for each i of ``data`` (non-negative
    integers < 2³²), computed on the host: ``(len(data), 2)`` uint32, or None where ``key`` is
    not a concrete threefry key (a tracer, another implementation: then ask JAX).

    JAX's fold_in is Threefry-2x32 of the counter (0, i) under the key, both output words the
    new key (``jax._src.random.threefry2x32.threefry_fold_in``: the seed i as the words
    (i >> 32, i & 0xFFFFFFFF), hashed as one pair); here the same 20 rounds in numpy's uint32
    arithmetic, so a chunk's keys need no compiled program (the draw driver's vmapped
    ``fold_in`` with its ``iota`` and ``add`` was three programs per chunk size, ~0.6 CPU-s of
    a cold score; ``tests/test_chunk_keys.py`` compares the words with JAX's)."""
    if isinstance(key, jax.core.Tracer) or not _one_threefry_key(key):
        return None
    typed = jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)
    words = np.asarray(jax.random.key_data(key) if typed else key)
    i = np.asarray(data, dtype=np.uint32).reshape(-1)
    y0, y1 = threefry2x32(words[0], words[1], np.zeros_like(i), i)
    return np.stack([y0, y1], axis=-1)


def random_bits(key, shape):
    """``jax.random.bits(key, shape, jnp.uint32)`` for a threefry key (partitionable scheme):
    word i = y₀ ⊕ y₁ of Threefry(key, (0, i)), i the row-major index. The words are written
    by a two-pass ``fori_loop`` (each pass half of them), which stores them once: as a plain
    expression XLA fuses the cheap-looking integer hash into every consumer and computes it
    again in each (four times per word inside ``erf_inv``'s fusions, measured in the profile
    null's program: slower than JAX's own)."""
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
    """``jax.random.normal(key, shape, dtype)``, the same bits; float32 draws of a threefry
    key by the unrolled hash (module docstring), anything else by JAX. Jitted when called
    eagerly (as JAX's own), inlined under an outer ``jit``."""
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
