"""The null's FP8 round trips: 128×128 tiles (E4M3 or E5M2), or one E4M3 scale per row.

Storages (:data:`rmtbase.stats.names.FP8_FORMATS`), as official FP8 checkpoints store
weights (:mod:`rmtbase.models._fp8`):

- ``"fp8_e4m3"``, ``"fp8_e5m2"``: over the last two axes (rows, columns) of a factor, each
  128×128 tile (edge tiles partial) gets ``s = max|tile|/FP8_MAX`` (448 for E4M3, 57344 for
  E5M2) and its entries become ``FP8(w/s)·s`` (round to nearest even, the cast
  ``jnp.float8_e4m3fn`` / ``jnp.float8_e5m2`` makes; values below half the smallest
  subnormal, 2⁻⁹ for E4M3 and 2⁻¹⁶ for E5M2, flush to zero).
- ``"fp8_e4m3_channel"``: each row r gets ``s_r = max|row|/448`` and its entries become
  ``E4M3(w/s_r)·s_r`` (compressed-tensors' per-output-channel FP8).

What block scales match. A head's W_Q (d_h, d) is d_h rows of the checkpoint's
(n_heads·d_h, d) matrix, so where d_h < 128 one 128-row tile holds 128/d_h heads and its scale
is the maximum over all of them. The null therefore draws each head inside a full tile of
i.i.d. rows and keeps its own d_h rows after the round trip
(:func:`rmtbase.stats.precision.null_rows`, used by :mod:`rmtbase.baseline.null` and the
profile null): by exchangeability of the tile's rows each head's law is then exactly the
checkpoint's, for heads aligned on tiles (d_h dividing 128); tiling one head alone would move
the histogram statistics (E4M3 keeps 3 mantissa bits). Heads sharing a tile share its scale,
so their statistics are correlated. A per-row scale involves no other head. σ-invariance: s
scales with the tile, so a σ = 1 null serves every σ up to float32 rounding of s.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .storage import storage_record

BLOCK = 128
E4M3_MAX = 448.0
E5M2_MAX = 57344.0


def _quantise(t, amax, top, dtype):
    """``FP8(t/s)·s`` with ``s = amax/top`` broadcast over ``t``, as the numpy writer does it.

    True divisions: XLA turns a division by a broadcast value (a constant, or one scale per
    tile) into a multiplication by its rounded reciprocal, a float32 ulp off the writer's
    max/FP8_MAX and w/s; dividing by a full-shaped array behind an optimisation barrier keeps
    the IEEE quotient (checked bit for bit against the numpy writer)."""
    s = amax / jax.lax.optimization_barrier(amax * 0.0 + top)  # batched under vmap
    safe = jax.lax.optimization_barrier(jnp.broadcast_to(jnp.where(s > 0, s, 1.0), t.shape))
    return jnp.clip(t / safe, -top, top).astype(dtype).astype(jnp.float32) * s


def fp8_round_trip(w, storage: str = "fp8_e4m3"):
    """``w`` (…, rows, cols) stored as ``storage`` (an FP8 storage name) and read back, in
    ``w``'s dtype."""
    return fp8_values(jnp.asarray(w), storage_record(storage))


def fp8_values(w, storage):
    """The FP8 quantiser of record ``storage`` (:class:`rmtbase.stats.storage.Storage`:
    ``spec = (largest finite value, jnp 8-bit dtype name)``; 128×128 tiles where
    ``tile_rows``, else one scale a row) on ``w`` (…, rows, cols), in ``w``'s dtype."""
    top, name = storage.spec
    dtype, blocks = jnp.dtype(name), storage.tile_rows > 0
    w = jnp.asarray(w)
    if w.ndim < 2:
        return fp8_values(w[None, :], storage)[0]
    x = w.astype(jnp.float32)
    if not blocks:
        return _quantise(x, jnp.max(jnp.abs(x), axis=-1, keepdims=True), top, dtype
                         ).astype(w.dtype)
    rows, cols = w.shape[-2], w.shape[-1]
    r, c = -(-rows // BLOCK), -(-cols // BLOCK)
    pad = [(0, 0)] * (w.ndim - 2) + [(0, r * BLOCK - rows), (0, c * BLOCK - cols)]
    t = jnp.pad(x, pad).reshape((*w.shape[:-2], r, BLOCK, c, BLOCK))
    amax = jnp.max(jnp.abs(t), axis=(-3, -1), keepdims=True)
    out = _quantise(t, amax, top, dtype).reshape((*w.shape[:-2], r * BLOCK, c * BLOCK))
    return out[..., :rows, :cols].astype(w.dtype)
