"""The null's FP8 round trip: 128×128 tiles, E4M3 values, one float32 scale per tile.

Storage ``"fp8_e4m3"`` (:data:`rmtbase.stats.precision.STORAGES`) is the block format of
official FP8 checkpoints (:mod:`rmtbase.models._fp8`): over the last two axes (rows, columns)
of a factor, each 128×128 tile (edge tiles partial) gets ``s = max|tile|/448`` and its entries
become ``E4M3(w/s)·s`` (round to nearest even, the cast ``jnp.float8_e4m3fn`` makes; values
below half the smallest subnormal 2⁻⁹ flush to zero).

What it matches. A head's W_Q (d_h, d) is d_h rows of the checkpoint's (n_heads·d_h, d)
matrix; the null draws one head's factor and tiles it alone, so where d_h < 128 its tiles hold
d_h rows instead of 128 (a tile maximum over d_h·128 entries instead of 128·128: the scale of a
Gaussian tile moves by a few per cent). E4M3 keeps 3 mantissa bits relative to each value, so
the lattice a value lands on depends on the tile scale only through its mantissa, and values
reach the subnormal range only below max|tile|·2⁻⁶/448 (≈ 4·10⁻⁵ σ): both nulls put the values
on the same kind of lattice; ``tests/test_fp8.py`` checks calibration of an untrained model.
σ-invariance: s scales with the tile, so a σ = 1 null serves every σ (up to float32 rounding
of s).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

BLOCK = 128
E4M3_MAX = 448.0


def fp8_round_trip(w):
    """``w`` (…, rows, cols) stored as 128×128-tile E4M3 and read back, in ``w``'s dtype."""
    w = jnp.asarray(w)
    if w.ndim < 2:
        w2 = fp8_round_trip(w[None, :])
        return w2[0]
    rows, cols = w.shape[-2], w.shape[-1]
    r, c = -(-rows // BLOCK), -(-cols // BLOCK)
    x = w.astype(jnp.float32)
    pad = [(0, 0)] * (w.ndim - 2) + [(0, r * BLOCK - rows), (0, c * BLOCK - cols)]
    t = jnp.pad(x, pad).reshape((*w.shape[:-2], r, BLOCK, c, BLOCK))
    # true divisions: XLA turns a division by a broadcast value (a constant, or one scale per
    # tile) into a multiplication by its rounded reciprocal, a float32 ulp off the writer's
    # max|tile|/448 and w/s; dividing by a full-shaped array behind an optimisation barrier
    # keeps the IEEE quotient (checked bit for bit against the numpy writer)
    amax = jnp.max(jnp.abs(t), axis=(-3, -1), keepdims=True)
    s = amax / jax.lax.optimization_barrier(amax * 0.0 + E4M3_MAX)  # batched under vmap
    safe = jax.lax.optimization_barrier(jnp.broadcast_to(jnp.where(s > 0, s, 1.0), t.shape))
    q = jnp.clip(t / safe, -E4M3_MAX, E4M3_MAX).astype(jnp.float8_e4m3fn).astype(jnp.float32)
    out = (q * s).reshape((*w.shape[:-2], r * BLOCK, c * BLOCK))[..., :rows, :cols]
    return out.astype(w.dtype)
