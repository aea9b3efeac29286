"""The null's FP8 round trip: 128×128 tiles, E4M3 values, one float32 scale per tile.

Storage ``"fp8_e4m3"`` (:data:`rmtbase.stats.precision.STORAGES`) is the block format of
official FP8 checkpoints (:mod:`rmtbase.models._fp8`): over the last two axes (rows, columns)
of a factor, each 128×128 tile (edge tiles partial) gets ``s = max|tile|/448`` and its entries
become ``E4M3(w/s)·s`` (round to nearest even, the cast ``jnp.float8_e4m3fn`` makes; values
below half the smallest subnormal 2⁻⁹ flush to zero).

What it matches. A head's W_Q (d_h, d) is d_h rows of the checkpoint's (n_heads·d_h, d)
matrix, so where d_h < 128 one 128-row tile holds 128/d_h heads and its scale is the maximum
over all of them. The null therefore draws each head inside a full tile of i.i.d. rows and
keeps its own d_h rows after the round trip (:func:`rmtbase.stats.precision.null_rows`, used
by :mod:`rmtbase.baseline.null` and the profile null): by exchangeability of the tile's rows
each head's law is then exactly the checkpoint's, for heads aligned on tiles (d_h dividing
128). Tiling one head alone instead moved the entropy statistics by 0.37–0.48 null sd at
d_h = 32 (measured; E4M3 keeps 3 mantissa bits, so the histogram statistics see where the
tile scale puts the lattice). Heads sharing a tile share its scale, so their statistics are
correlated (``tests/test_fp8.py`` counts tiles as clusters). σ-invariance: s scales with the
tile, so a σ = 1 null serves every σ up to float32 rounding of s
(``tests/test_quant_scale.py`` runs fp8_e4m3 too).
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
