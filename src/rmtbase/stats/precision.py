"""Storage precision: how a checkpoint stores its weights, as a round trip the null can share.

:func:`round_trip` puts a null draw through the checkpoint's storage (records of
:mod:`rmtbase.stats.storage`); :func:`lattice_cells` gives each stored value its rounding cell.
Storages (``STORAGES``): float32 (identity), float16, bfloat16 (round to nearest even), GGUF
block formats (``QUANT_FORMATS``; K-quants in :mod:`rmtbase.stats.kquants`) and block FP8
(:mod:`rmtbase.stats.fp8`). Legacy formats follow ggml's ``ggml-quants.c`` (d, m in float16):

- Q4_0: ``d = x_amax / −8``, ``q = min(15, ⌊x/d + 8.5⌋)``, value ``(q − 8)·fp16(d)``;
- Q4_1: ``d = (max − min)/15``, ``q = min(15, ⌊(x − min)/d + 0.5⌋)``, value ``q·fp16(d) + fp16(min)``;
- Q8_0: ``d = max|x|/127``, ``q = round(x/d)`` (half away from zero), value ``q·fp16(d)``;
- Q5_0, Q5_1: as Q4_0, Q4_1 with 32 levels.

They equal ``gguf.quants`` bit for bit; blocks run along the last axis (:func:`block_size`).
Rounding commutes with scaling (block formats up to the float16 rounding of d, m), so a σ = 1
null serves every σ."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ..errors import InputError
from ._exact import div_pow2_minus_1 as _div_pow2_minus_1  # as the K-quants: exact quotients
from ._exact import unfused
from .detection import detect_quantisation  # noqa: F401 - re-exported
from .names import (  # noqa: F401 - re-exported
    FLOAT_STORAGES,
    FP8_FORMATS,
    FP8_TILED,
    QUANT_FORMATS,
    STORAGES,
)
from .storage import storage_record


def block_size(storage: str) -> int:
    """Entries per block along the last axis: 256 for K-quants, 32 for other block formats, 1 for
    float storages and FP8 (whose tiles may be partial)."""
    return storage_record(storage).block


def null_rows(storage: str, d_h: int) -> int:
    """Rows a null draw of one head's (d_h, d) factor is made with, so its round trip sees the
    checkpoint's blocks: for a 128-row FP8 tile and d_h < 128, ⌈128/d_h⌉·d_h i.i.d. rows (the
    head drawn with its tile-mates, its own d_h rows kept); d_h for every other storage."""
    tile = storage_record(storage).tile_rows
    if tile and d_h < tile:
        return -(-tile // d_h) * d_h
    return d_h


def check_storage(storage) -> str:
    """Validate a storage name (one of :data:`STORAGES`; None is float32); its lower-case
    name."""
    return storage_record(storage).name


def is_lattice(storage: str) -> bool:
    """True for the float storages whose cells matter to a histogram (float16, bfloat16)."""
    return storage_record(storage).lattice


def cast(w, storage):
    """The float storages' quantiser: ``w`` cast to ``storage``'s dtype and back (round to
    nearest even); unchanged where ``w`` already has that dtype."""
    dtype = jnp.dtype(storage.name)
    return w if w.dtype == dtype else w.astype(dtype).astype(w.dtype)


def _fp16(x):
    return x.astype(jnp.float16).astype(x.dtype)


def _rounded(x):
    """``x`` as stored, kept from fusing into the next addition or product (float32:
    :func:`rmtbase.stats._exact.unfused`; otherwise an optimisation barrier)."""
    return unfused(x) if x.dtype == jnp.float32 else jax.lax.optimization_barrier(x)


def _symmetric(b, half: int):
    """ggml's Q4_0 (half = 8) and Q5_0 (half = 16), as the module docstring states; x_max is the
    first entry of largest |x| on a tie, as in ggml."""
    size = jnp.abs(b)
    amax = jnp.max(size, axis=-1, keepdims=True)
    pos = jax.lax.broadcasted_iota(jnp.int32, b.shape, b.ndim - 1)
    first = jnp.min(jnp.where(size == amax, 2 * pos + (b < 0), 2 * b.shape[-1]), axis=-1,
                    keepdims=True)
    xmax = jnp.where(first % 2 == 1, -amax, amax)
    d = xmax / -float(half)
    inv = jnp.where(d != 0, 1.0 / jnp.where(d != 0, d, 1.0), 0.0)
    q = jnp.minimum(2.0 * half - 1.0, jnp.floor(_rounded(b * inv) + (half + 0.5)))
    return (q - float(half)) * _fp16(d)


def _affine(b, top: int):
    """ggml's Q4_1 (top = 15) and Q5_1 (top = 31): d = (max − min)/top,
    q = min(top, ⌊(x − min)/d + ½⌋), value q·fp16(d) + fp16(min)."""
    lo = jnp.min(b, axis=-1, keepdims=True)
    hi = jnp.max(b, axis=-1, keepdims=True)
    d = _div_pow2_minus_1(hi - lo, top)
    inv = jnp.where(d != 0, 1.0 / jnp.where(d != 0, d, 1.0), 0.0)
    q = jnp.minimum(float(top), jnp.floor(_rounded((b - lo) * inv) + 0.5))
    return q * _fp16(d) + _fp16(lo)


def symmetric(blocks, storage):
    """Quantiser of Q4_0 and Q5_0 (``storage.spec = (half,)``): :func:`_symmetric`."""
    return _symmetric(blocks, storage.spec[0])


def affine(blocks, storage):
    """Quantiser of Q4_1 and Q5_1 (``storage.spec = (top,)``): :func:`_affine`."""
    return _affine(blocks, storage.spec[0])


def q8_0(blocks, storage):
    """Quantiser of Q8_0: :func:`_q8_0`."""
    return _q8_0(blocks)


def _q8_0(b):
    amax = jnp.max(jnp.abs(b), axis=-1, keepdims=True)
    d = _div_pow2_minus_1(amax, 127)
    inv = jnp.where(d != 0, 1.0 / jnp.where(d != 0, d, 1.0), 0.0)
    a = jnp.abs(_rounded(b * inv))
    whole = jnp.floor(a)  # roundf, half away from zero, as gguf's np_roundf: exact, no +0.5
    q = jnp.sign(b) * (whole + jnp.floor(2.0 * (a - whole)))
    return q * _fp16(d)


def materialised(x):
    """``x`` itself (traced code, shape kept), written to memory once: XLA's CPU fusion recomputes
    a cheap producer in each consumer; a two-step ``fori_loop`` copy makes every reader see the
    same bits."""
    rows = x.shape[0]
    half = -(-rows // 2)

    def part(j, out):
        start = j * (rows - half)
        piece = jax.lax.dynamic_slice_in_dim(x, start, half, axis=0)
        return jax.lax.dynamic_update_slice_in_dim(out, piece, start, axis=0)

    return jax.lax.fori_loop(0, 2, part, jnp.zeros_like(x))


def round_trip(w, storage: str, *, materialise: bool = False):
    """``w`` stored as ``storage`` and read back, in ``w``'s shape and dtype (jit/vmap friendly).

    w: last axis is the block axis (a multiple of :func:`block_size` for block formats).
    storage: a name of ``STORAGES`` or a :mod:`rmtbase.stats.storage` record. materialise: a
    block format's result written once (:func:`materialised`). Raises InputError for an unknown
    storage or a last axis not a multiple of the block size."""
    record = storage_record(storage)
    w = jnp.asarray(w)
    quantise, size = record.quantise(), record.block
    keep = materialised if materialise else (lambda x: x)
    if size == 1:
        return quantise(w, record)
    n = w.shape[-1]
    if n % size:
        raise InputError(f"{record.name} blocks need the last axis to be a multiple of {size}, "
                         f"got {n}")
    blocks = w.reshape((*w.shape[:-1], n // size, size))
    return keep(quantise(blocks, record)).reshape(w.shape).astype(w.dtype)


def lattice_cells(v, storage: str):
    """Half-widths ``(below, above)`` of the rounding cell of each stored value ``v``.

    float16/bfloat16 (p significant bits): |v| in [2^e, 2^(e+1)) has spacing u = 2^(e+1−p) and
    cell [v − u/2, v + u/2], except at a power of two (side u/4 towards zero); subnormals use the
    subnormal step, zero half of it each side. Other storages: zeros (points)."""
    v = jnp.asarray(v)
    record = storage_record(storage)
    if not record.lattice:
        z = jnp.zeros_like(v)
        return z, z
    p, tiny = record.bits, record.tiny
    if v.dtype not in (jnp.float32, jnp.float64):
        v = v.astype(jnp.float32)
    # read from the bits of v (float32 or float64): the exponent field alone is 2^e for
    # |v| in [2^e, 2^(e+1)) (0 below the normals), and a zero significand marks a power of two.
    # Same numbers as frexp/ldexp (tested on every kind of value), 4.5× faster on CPU.
    it, field = (jnp.int64, 0x7FF0000000000000) if v.dtype == jnp.float64 \
        else (jnp.int32, 0x7F800000)
    a = jnp.abs(v)
    bits = jax.lax.bitcast_convert_type(a, it)
    pow2 = jax.lax.bitcast_convert_type(bits & field, a.dtype)
    up = jnp.maximum(pow2 * 2.0 ** (1 - p), tiny)
    power_of_two = (bits & ~jnp.asarray(field, it)) == 0
    toward_zero = jnp.where(power_of_two, jnp.maximum(pow2 * 2.0 ** (-p), tiny), up)
    toward_zero = jnp.where(a == 0, tiny, toward_zero)
    up = jnp.where(a == 0, tiny, up)
    neg = v < 0
    below = 0.5 * jnp.where(neg, up, toward_zero)
    above = 0.5 * jnp.where(neg, toward_zero, up)
    return below, above
