"""llama.cpp's K-quants (Q2_K … Q6_K) as quantise → dequantise round trips in JAX.

Super-blocks of ``QK_K = 256`` entries along the last axis, following ggml's
``quantize_row_q{4,5,6}_K_ref`` and ``dequantize_row_*`` (``ggml-quants.c``; no importance
matrix), in float32. Q2_K and Q3_K are in :mod:`rmtbase.stats.kquants_low`.

- Q4_K / Q5_K (nmax 15 / 31): sub-blocks of 32 get scale s_j and min m_j ≥ 0 from
  ``make_qkx2_quants``, quantised to 6 bits against ``d = fp16(max s/63)``,
  ``dmin = fp16(max m/63)``; q = clamp(round((x + dmin·lm_j)/(d·ls_j)), 0, nmax), value
  ``d·ls_j·q − dmin·lm_j``.
- Q6_K: 16 sub-blocks of 16, ``make_qx_quants(16, 32, x, rmse_type=1)``, int8 scales against
  ``d = fp16(−max_scale/128)``; q = clamp(round(x/(d·sc_j)), −32, 31), value ``d·sc_j·q``.

Bit-exact with ``tests/_kquant_ref.py``: products meeting an addition go through
:func:`~rmtbase.stats._exact.unfused` (no FMA contraction); divisions correctly rounded."""

from __future__ import annotations

import jax.numpy as jnp

from .._compiled import compiled_when_eager
from ._exact import div_pow2_minus_1, safe_div, unfused
from ._kquant_search import QK_K, _fp16, make_qkx2_quants, make_qx_quants
from .kquants_low import q2_codes, q3_codes
from .names import storage_names
from .storage import storage_record

#: The K-quant storages: the records whose quantiser is :func:`k_blocks`
#: (:mod:`rmtbase.stats.storage`; their ``spec`` names the codec).
K_FORMATS = storage_names(lambda s: s.quantiser == "kquants:k_blocks")
_F = jnp.float32


@compiled_when_eager(static_argnames=("storage",))
def k_codes(blocks, storage: str) -> dict:
    """What ggml stores for super-blocks ``blocks`` (..., 256) in ``storage``: Q4_K/Q5_K ``d``,
    ``dmin`` (...,), 6-bit ``ls``, ``lm`` (..., 8), codes ``q`` (..., 8, 32) in [0, nmax]; Q6_K
    ``d``, int8 ``sc`` (..., 16), ``q`` (..., 16, 16) in [−32, 31]; Q2_K/Q3_K:
    :mod:`rmtbase.stats.kquants_low`. All float32."""
    codec, *search = storage_record(storage).spec
    if codec == "q2":
        return q2_codes(blocks)
    if codec == "q3":
        return q3_codes(blocks)
    if codec == "q6":
        x = blocks.reshape((*blocks.shape[:-1], QK_K // 16, 16)).astype(_F)
        scale = make_qx_quants(x, 32)                                        # (..., 16)
        i_max = jnp.argmax(jnp.abs(scale), axis=-1, keepdims=True)
        max_scale = jnp.take_along_axis(scale, i_max, axis=-1)
        zero = jnp.abs(max_scale) < 1e-15
        iscale = safe_div(_F(-128), max_scale)
        d = jnp.where(zero, 0, _fp16(safe_div(_F(1), iscale)))
        sc = jnp.where(zero, 0, jnp.minimum(127, jnp.round(iscale * scale)))
        q = jnp.clip(jnp.round(safe_div(x, (d * sc)[..., None])), -32, 31)
        return {"d": d[..., 0], "sc": sc, "q": q}
    nmax, rmin, rdelta, nstep = search  # make_qkx2_quants' of quantize_row_q{4,5}_K_ref
    x = blocks.reshape((*blocks.shape[:-1], QK_K // 32, 32)).astype(_F)
    scale, mins = make_qkx2_quants(x, nmax, rmin, rdelta, nstep)            # (..., 8)
    max_scale = jnp.maximum(jnp.max(scale, axis=-1, keepdims=True), 0)      # C starts at 0
    max_min = jnp.maximum(jnp.max(mins, axis=-1, keepdims=True), 0)
    ls = jnp.minimum(63, jnp.round(safe_div(_F(63), max_scale) * scale))
    lm = jnp.minimum(63, jnp.round(safe_div(_F(63), max_min) * mins))
    d = _fp16(div_pow2_minus_1(max_scale, 63))       # max/63 correctly rounded, as C
    dmin = _fp16(div_pow2_minus_1(max_min, 63))
    q = jnp.clip(jnp.round(safe_div(x + unfused(dmin * lm)[..., None], (d * ls)[..., None])),
                 0, nmax)
    return {"d": d[..., 0], "dmin": dmin[..., 0], "ls": ls, "lm": lm, "q": q}


def k_dequantise(codes: dict, storage: str):
    """Values (..., 256) of :func:`k_codes` as ggml's ``dequantize_row_*`` computes them:
    ``(d·ls)·q − dmin·lm`` (Q2_K, Q4_K, Q5_K), ``(d·sc)·q`` (Q3_K, Q6_K), float32."""
    q = codes["q"]
    if "dmin" not in codes:  # Q3_K, Q6_K
        out = (codes["d"][..., None] * codes["sc"])[..., None] * q
    else:
        out = unfused((codes["d"][..., None] * codes["ls"])[..., None] * q) \
            - unfused(codes["dmin"][..., None] * codes["lm"])[..., None]
    return out.reshape((*q.shape[:-2], QK_K))


def k_blocks(blocks, storage):
    """The K-quants' quantiser (:class:`rmtbase.stats.storage.Storage`): :func:`k_round_trip`
    of the record ``storage`` (passed on as it is: no name looked up again)."""
    return k_round_trip(blocks, storage)


def k_round_trip(blocks, storage):
    """Round trip of super-blocks ``blocks`` (..., 256) through ``storage`` (:data:`K_FORMATS`:
    a name or its record), float32 values."""
    return k_dequantise(k_codes(blocks, storage), storage)
