"""The null's FP8 round trips: 128×128 tiles (E4M3 or E5M2), or one E4M3 scale per row.

``"fp8_e4m3"``, ``"fp8_e5m2"`` (128×128 tiles of the last two axes, edge tiles partial) and
``"fp8_e4m3_channel"`` (one scale per row) store as :mod:`rmtbase.models._fp8` states, rounding
to nearest even (below half the smallest subnormal flushes to zero).

For d_h < 128 a tile holds 128/d_h heads, so the null draws each head inside a full tile of i.i.d.
rows and keeps its own (:func:`rmtbase.stats.precision.null_rows`): by exchangeability its law is
the checkpoint's for d_h dividing 128. A σ = 1 null serves every σ."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .storage import storage_record

BLOCK = 128
E4M3_MAX = 448.0
E5M2_MAX = 57344.0


def _quantise(t, amax, top, dtype):
    """``FP8(t/s)·s`` with ``s = amax/top`` broadcast over ``t``, as the numpy writer does it: true
    IEEE divisions (a full-shaped divisor behind an optimisation barrier), not XLA's reciprocal."""
    s = amax / jax.lax.optimization_barrier(amax * 0.0 + top)  # batched under vmap
    safe = jax.lax.optimization_barrier(jnp.broadcast_to(jnp.where(s > 0, s, 1.0), t.shape))
    return jnp.clip(t / safe, -top, top).astype(dtype).astype(jnp.float32) * s


def fp8_round_trip(w, storage: str = "fp8_e4m3"):
    """``w`` (…, rows, cols) stored as ``storage`` (an FP8 storage name) and read back, in
    ``w``'s dtype."""
    return fp8_values(jnp.asarray(w), storage_record(storage))


def fp8_values(w, storage):
    """The FP8 quantiser of ``storage`` (``spec = (largest finite, jnp dtype name)``; 128×128 tiles
    where ``tile_rows``, else a scale a row) on ``w`` (…, rows, cols), in ``w``'s dtype."""
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
