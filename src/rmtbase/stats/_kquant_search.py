"""The scale searches shared by every K-quant: ggml's ``make_qkx2_quants``, ``make_qx_quants``,
the float16 rounding of a stored scale and C's left-fold sum (float32, products unfused)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ._exact import safe_div, unfused

#: Entries in a K-quant super-block (ggml's ``QK_K``).
QK_K = 256
_F = jnp.float32


def _fp16(x):
    return x.astype(jnp.float16).astype(_F)


def _sum(a):
    """Sum over the last axis in index order, as the C loops accumulate (a left fold: no
    reassociation, so float32 rounding, and the candidate chosen on near-ties, match C)."""
    out = a[..., 0]
    for i in range(1, a.shape[-1]):
        out = out + a[..., i]
    return out


def make_qkx2_quants(x, nmax: int, rmin: float, rdelta: float, nstep: int, *,
                     weights=None, use_mad: bool = False):
    """``(scale, the_min)`` of every sub-block (last axis) of ``x``, as ggml's ``make_qkx2_quants``:
    weights av_x + |x| (av_x the rms) unless ``weights`` is given; error w·diff², or w·|diff|
    with ``use_mad``. As in C an accepted candidate's minimum feeds later candidates, so the
    search is a ``lax.fori_loop``, vectorised over sub-blocks."""
    x = x.astype(_F)
    r = unfused  # every product that meets an addition is rounded first, as in C (no FMA)
    if weights is None:
        w = jnp.sqrt(_sum(r(x * x)) / _F(x.shape[-1]))[..., None] + jnp.abs(x)
    else:
        w = jnp.asarray(weights, _F)

    def loss(diff):
        return jnp.abs(diff) if use_mad else diff * diff
    mn = jnp.minimum(jnp.min(x, axis=-1), 0)
    mx = jnp.max(x, axis=-1)
    flat = mx == mn
    sum_w = _sum(w)
    sum_x = _sum(r(w * x))
    iscale0 = safe_div(_F(nmax), mx - mn)
    scale0 = safe_div(_F(1), iscale0)
    l0 = jnp.clip(jnp.round(iscale0[..., None] * (x - mn[..., None])), 0, nmax)
    err0 = _sum(r(w * loss(r(scale0[..., None] * l0) + mn[..., None] - x)))

    # rmin + rdelta·i + nmax of every candidate, in float32 as C rounds it, made in numpy (out
    # of the compiler's reach, as make_qx_quants' steps)
    f32 = np.float32
    top = jnp.asarray((f32(rmin) + f32(rdelta) * np.arange(nstep + 1, dtype=f32)) + f32(nmax))

    def step(i, carry):
        best, scale, low = carry
        iscale = safe_div(top[i], mx - low)
        l = jnp.clip(jnp.round(iscale[..., None] * (x - low[..., None])), 0, nmax)
        wl = r(w * l)
        sum_l, sum_l2 = _sum(wl), _sum(r(wl * l))
        sum_xl = _sum(r(wl * x))
        dd = r(sum_w * sum_l2) - r(sum_l * sum_l)
        s = safe_div(r(sum_w * sum_xl) - r(sum_x * sum_l), dd)
        m = safe_div(r(sum_l2 * sum_x) - r(sum_l * sum_xl), dd)
        pos = m > 0
        s = jnp.where(pos, safe_div(sum_xl, sum_l2), s)
        m = jnp.where(pos, 0, m)
        err = _sum(r(w * loss(r(s[..., None] * l) + m[..., None] - x)))
        take = (dd > 0) & (err < best)
        return (jnp.where(take, err, best), jnp.where(take, s, scale), jnp.where(take, m, low))

    _, scale, low = jax.lax.fori_loop(0, nstep + 1, step, (err0, scale0, mn))
    return jnp.where(flat, 0, scale), jnp.where(flat, -mn, -low)


def make_qx_quants(x, nmax: int):
    """Scale of every sub-block (last axis) of ``x``, as ggml's ``make_qx_quants`` with
    ``rmse_type=1`` (weights x²) and no importance weights."""
    x = x.astype(_F)
    i_max = jnp.argmax(jnp.abs(x), axis=-1, keepdims=True)
    xmax = jnp.take_along_axis(x, i_max, axis=-1)
    zero = jnp.abs(xmax) < 1e-30
    # the start (i = 0), then i = -9 … -1, 1 … 9 in the C loop's order; 0.1f·i in float32
    steps = jnp.asarray(np.float32(0.1) * np.array([0, *range(-9, 0), *range(1, 10)],
                                                   dtype=np.float32))
    iscale = safe_div(-(_F(nmax) + steps), xmax)                            # (..., S)
    l = jnp.clip(jnp.round(iscale[..., None] * x[..., None, :]), -nmax, nmax - 1)
    w = (x * x)[..., None, :]
    sumlx = _sum(unfused(w * x[..., None, :] * l))
    suml2 = _sum(unfused(w * l * l))
    # the C loop: candidate i replaces the best when sumlx² > best·suml2, best = scale·sumlx
    scale = safe_div(sumlx[..., 0], suml2[..., 0])
    best = scale * sumlx[..., 0]
    for i in range(1, steps.shape[0]):
        slx, sl2 = sumlx[..., i], suml2[..., i]
        take = (sl2 > 0) & (slx * slx > best * sl2)
        scale = jnp.where(take, safe_div(slx, sl2), scale)
        best = jnp.where(take, scale * slx, best)
    out = scale
    return jnp.where(zero[..., 0], 0, out)
