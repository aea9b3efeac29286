"""llama.cpp's 2- and 3-bit K-quants (Q2_K, Q3_K) as quantise → dequantise round trips in JAX.

As :mod:`rmtbase.stats.kquants` (super-blocks of 256), after ggml's ``quantize_row_q{2,3}_K_ref``:

- Q2_K: 16 sub-blocks of 16; ``make_qkx2_quants(16, nmax=3, weights=|x|, rmin=−0.5,
  rdelta=0.1, nstep=15, use_mad=true)``; 4-bit scales/mins against ``d = fp16(max s/15)``,
  ``dmin = fp16(max m/15)``; q = clamp(round((x + dmin·lm_j)/(d·ls_j)), 0, 3), value
  ``(d·ls_j)·q − dmin·lm_j``.
- Q3_K: 16 sub-blocks of 16; ``make_q3_quants(16, nmax=4, do_rmse=true)``; 6-bit scales
  against ``d = fp16(1/iscale)``, iscale = −32/max_scale; q = clamp(round(x/(d·sc_j)), −4, 3),
  value ``(d·sc_j)·q``.
Skipped sub-blocks store q = 0. Equal to ``tests/_kquant_ref.py`` except for float32 subnormals."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ._exact import div_pow2_minus_1, safe_div, unfused
from ._kquant_search import QK_K, _fp16, _sum, make_qkx2_quants

_F = jnp.float32


def _nearest_int(v):
    """ggml's ``nearest_int``: the float32 ``v + 12582912`` read as int32, low 23 bits less
    2²² (round to nearest even for |v| < 2²²; C asserts that, its release builds do this)."""
    bits = jax.lax.bitcast_convert_type(v.astype(_F) + _F(12582912.0), jnp.int32)
    return ((bits & 0x7FFFFF) - 0x400000).astype(_F)


def make_q3_quants(x, nmax: int = 4, passes: int = 5):
    """Scale of every sub-block (last axis) of ``x``, as ggml's ``make_q3_quants(do_rmse=true)``:
    start codes, then ``passes`` sequential passes of single-entry updates."""
    x = x.astype(_F)
    n = x.shape[-1]
    i_max = jnp.argmax(jnp.abs(x), axis=-1, keepdims=True)
    xmax = jnp.take_along_axis(x, i_max, axis=-1)[..., 0]
    zero = jnp.abs(xmax) < 1e-15                                  # GROUP_MAX_EPS: all zero
    iscale = safe_div(_F(-nmax), xmax)
    lo, hi = -nmax, nmax - 1
    l0 = jnp.clip(jnp.round(iscale[..., None] * x), lo, hi)
    w = x * x
    wx = w * x
    r = unfused  # every product that meets an addition is rounded first, as in C (no FMA)
    sumlx0 = _sum(r(wx * l0))
    suml20 = _sum(r(w * l0 * l0))

    # entries as separate arrays (a tuple of codes in the carry, no scatter on the last axis)
    xs, ws, wxs = ([a[..., i] for i in range(n)] for a in (x, w, wx))

    def one_pass(_, carry):
        l, sumlx, suml2 = carry
        l = list(l)
        for i in range(n):
            wi, xi, wxi, li = ws[i], xs[i], wxs[i], l[i]
            slx = sumlx - r(wxi * li)
            pos = slx > 0
            sl2 = suml2 - r(wi * li * li)
            new = jnp.clip(_nearest_int(safe_div(xi * sl2, jnp.where(pos, slx, 0))), lo, hi)
            slx = slx + r(wxi * new)
            sl2 = sl2 + r(wi * new * new)
            take = pos & (new != li) & (sl2 > 0) & (slx * slx * suml2 > sumlx * sumlx * sl2)
            l[i] = jnp.where(take, new, li)
            sumlx = jnp.where(take, slx, sumlx)
            suml2 = jnp.where(take, sl2, suml2)
        return tuple(l), sumlx, suml2

    l0 = tuple(l0[..., i] for i in range(n))
    _, sumlx, suml2 = jax.lax.fori_loop(0, passes, one_pass, (l0, sumlx0, suml20))
    scale = jnp.where(suml2 > 0, safe_div(sumlx, suml2), 0)
    return jnp.where(zero, 0, scale)


def q3_codes(blocks) -> dict:
    """What ggml stores for Q3_K ``blocks`` (..., 256): ``d`` (...,), 6-bit ``sc`` (..., 16) in
    [−32, 31], ``q`` (..., 16, 16) in [−4, 3]; all float32."""
    x = blocks.reshape((*blocks.shape[:-1], QK_K // 16, 16)).astype(_F)
    scale = make_q3_quants(x, 4)                                         # (..., 16)
    i_max = jnp.argmax(jnp.abs(scale), axis=-1, keepdims=True)
    max_scale = jnp.take_along_axis(scale, i_max, axis=-1)
    live = max_scale != 0
    iscale = safe_div(_F(-32), max_scale)
    d = jnp.where(live, _fp16(safe_div(_F(1), iscale)), 0)
    sc = jnp.where(live, jnp.clip(jnp.round(iscale * scale), -32, 31), -32)
    q = jnp.clip(jnp.round(safe_div(x, (d * sc)[..., None])), -4, 3)
    return {"d": d[..., 0], "sc": sc, "q": q}


def q2_codes(blocks) -> dict:
    """What ggml stores for Q2_K ``blocks`` (..., 256): ``d``, ``dmin`` (...,), 4-bit ``ls``, ``lm``
    (..., 16), ``q`` (..., 16, 16) in [0, 3]; all float32."""
    x = blocks.reshape((*blocks.shape[:-1], QK_K // 16, 16)).astype(_F)
    scale, mins = make_qkx2_quants(x, 3, -0.5, 0.1, 15, weights=jnp.abs(x), use_mad=True)
    max_scale = jnp.maximum(jnp.max(scale, axis=-1, keepdims=True), 0)
    max_min = jnp.maximum(jnp.max(mins, axis=-1, keepdims=True), 0)
    ls = jnp.round(safe_div(_F(15), max_scale) * scale).astype(jnp.int32)
    lm = jnp.round(safe_div(_F(15), max_min) * mins).astype(jnp.int32)
    byte = (ls & 0xFF) | ((lm << 4) & 0xFF)                   # uint8 scales[j] = ls | lm << 4
    ls, lm = (byte & 0xF).astype(_F), (byte >> 4).astype(_F)
    d = _fp16(div_pow2_minus_1(max_scale, 15))       # max/15 correctly rounded, as C
    dmin = _fp16(div_pow2_minus_1(max_min, 15))
    q = jnp.clip(jnp.round(safe_div(x + unfused(dmin * lm)[..., None], (d * ls)[..., None])),
                 0, 3)
    return {"d": d[..., 0], "dmin": dmin[..., 0], "ls": ls, "lm": lm, "q": q}
