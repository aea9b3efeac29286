"""ggml's K-quant reference quantisers in numpy, vectorised over blocks (a test reference).

A transcription of ``quantize_row_q{2,3,4,5,6}_K_ref`` with ``make_qkx2_quants``,
``make_q3_quants`` and ``make_qx_quants`` (llama.cpp ``ggml/src/ggml-quants.c``, the ``_ref``
path: no importance matrix) and of ``dequantize_row_*``, in float32, loop for loop: every loop
over the entries of a sub-block runs in C's order, vectorised only over (block, sub-block).
Each numpy operation rounds once to float32 (numpy never fuses a product into the next
addition), which is C compiled without FMA contraction — the semantics gguf-py's own numpy
quantisers (Q4_0 … Q8_0) have. gguf-py implements no K-quant quantiser, so this file stands
in for it; ``tests/test_kquants.py`` checks it against a scalar, one-entry-at-a-time
transcription (a second reading of the C code) and its codes against gguf-py's
``dequantize``.

``nearest_int`` is ``np.rint`` (ties to even, as ggml's ``x + 1.5·2²³`` trick for |x| < 2²²)
except in make_q3_quants' refinement, whose unbounded argument takes the bit trick itself.
"""

from __future__ import annotations

import numpy as np

F = np.float32
QK_K = 256


def _div(a, b):
    """a / b where b ≠ 0, else 0 (C skips those branches; the value is then unused)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b != 0, a / np.where(b != 0, b, F(1)), F(0)).astype(F)


def _nearest_int(v):
    bits = (np.asarray(v, F) + F(12582912.0)).astype(F).view(np.int32)
    return ((bits & 0x7FFFFF) - 0x400000).astype(F)


def _fp16(v):
    return np.asarray(v, F).astype(np.float16).astype(F)


def make_qkx2(x, w, nmax, rmin, rdelta, nstep, mad):
    """(scale, the_min) of each sub-block x (..., n) with weights w, as make_qkx2_quants."""
    n = x.shape[-1]
    loss = (lambda d: np.abs(d)) if mad else (lambda d: d * d)
    mn, mx = x[..., 0].copy(), x[..., 0].copy()
    sum_w, sum_x = w[..., 0].copy(), w[..., 0] * x[..., 0]
    for i in range(1, n):
        mn, mx = np.minimum(mn, x[..., i]), np.maximum(mx, x[..., i])
        sum_w = sum_w + w[..., i]
        sum_x = sum_x + w[..., i] * x[..., i]
    mn = np.minimum(mn, F(0))
    flat = mx == mn
    iscale = _div(F(nmax), mx - mn)
    scale = _div(F(1), iscale)
    best = np.zeros_like(mn)
    for i in range(n):
        q = np.clip(np.rint(iscale * (x[..., i] - mn)), 0, nmax).astype(F)
        best = best + w[..., i] * loss(scale * q + mn - x[..., i])
    for step in range(nstep + 1):
        iscale = _div(F(rmin) + F(rdelta) * F(step) + F(nmax), mx - mn)
        sl = sl2 = sxl = np.zeros_like(mn)
        ls = []
        for i in range(n):
            q = np.clip(np.rint(iscale * (x[..., i] - mn)), 0, nmax).astype(F)
            ls.append(q)
            wq = w[..., i] * q
            sl, sl2, sxl = sl + wq, sl2 + wq * q, sxl + wq * x[..., i]
        dd = sum_w * sl2 - sl * sl
        s = _div(sum_w * sxl - sum_x * sl, dd)
        m = _div(sl2 * sum_x - sl * sxl, dd)
        pos = m > 0
        s, m = np.where(pos, _div(sxl, sl2), s), np.where(pos, F(0), m)
        err = np.zeros_like(mn)
        for i in range(n):
            err = err + w[..., i] * loss(s * ls[i] + m - x[..., i])
        take = (dd > 0) & (err < best)
        best, scale, mn = (np.where(take, err, best), np.where(take, s, scale),
                           np.where(take, m, mn))
    return np.where(flat, F(0), scale).astype(F), (-mn).astype(F)


def make_qx(x, nmax):
    """Scale of each sub-block x (..., n), as make_qx_quants(rmse_type = 1, no weights)."""
    n = x.shape[-1]
    i_max = np.argmax(np.abs(x), axis=-1)[..., None]
    xmax = np.take_along_axis(x, i_max, axis=-1)[..., 0]
    zero = np.abs(xmax) < F(1e-30)

    def sums(iscale):
        slx = sl2 = np.zeros_like(xmax)
        for i in range(n):
            v = x[..., i]
            q = np.clip(np.rint(iscale * v), -nmax, nmax - 1).astype(F)
            wv = v * v
            slx, sl2 = slx + (wv * v) * q, sl2 + (wv * q) * q
        return slx, sl2

    slx, sl2 = sums(_div(F(-nmax), xmax))
    scale = _div(slx, sl2)
    best = scale * slx
    for i in (*range(-9, 0), *range(1, 10)):
        slx, sl2 = sums(_div(-(F(nmax) + F(0.1) * F(i)), xmax))
        take = (sl2 > 0) & (slx * slx > best * sl2)
        scale = np.where(take, _div(slx, sl2), scale)
        best = np.where(take, scale * slx, best)
    return np.where(zero, F(0), scale).astype(F)


def make_q3(x, nmax=4, passes=5):
    """Scale of each sub-block x (..., n), as make_q3_quants(do_rmse = true)."""
    n = x.shape[-1]
    i_max = np.argmax(np.abs(x), axis=-1)[..., None]
    xmax = np.take_along_axis(x, i_max, axis=-1)[..., 0]
    zero = np.abs(xmax) < F(1e-15)
    iscale = _div(F(-nmax), xmax)
    L, slx_all, sl2_all = [], np.zeros_like(xmax), np.zeros_like(xmax)
    for i in range(n):
        v = x[..., i]
        q = np.clip(_nearest_int(iscale * v), -nmax, nmax - 1)
        L.append(q)
        w = v * v
        slx_all, sl2_all = slx_all + (w * v) * q, sl2_all + (w * q) * q
    for _ in range(passes):  # a pass that changes nothing changes nothing when repeated
        for i in range(n):
            v = x[..., i]
            w = v * v
            slx = slx_all - (w * v) * L[i]
            pos = slx > 0
            sl2 = sl2_all - (w * L[i]) * L[i]
            new = np.clip(_nearest_int(_div(v * sl2, np.where(pos, slx, F(0)))),
                          -nmax, nmax - 1)
            slx2, sl22 = slx + (w * v) * new, sl2 + (w * new) * new
            take = pos & (new != L[i]) & (sl22 > 0) & \
                ((slx2 * slx2) * sl2_all > (slx_all * slx_all) * sl22)
            L[i] = np.where(take, new, L[i])
            slx_all, sl2_all = np.where(take, slx2, slx_all), np.where(take, sl22, sl2_all)
    scale = np.where(sl2_all > 0, _div(slx_all, sl2_all), F(0))
    return np.where(zero, F(0), scale).astype(F)


def _max_abs_signed(s):
    i = np.argmax(np.abs(s), axis=-1)[..., None]
    return np.take_along_axis(s, i, axis=-1)[..., 0]


def round_trip(w, fmt):
    """Super-blocks of ``w`` (..., 256k) through ``fmt`` and back, float32, as ggml."""
    w = np.asarray(w, F)
    shape = w.shape
    x = w.reshape(-1, QK_K)
    if fmt in ("q4_k", "q5_k"):
        nmax, rmin, nstep = (15, F(-1.0), 20) if fmt == "q4_k" else (31, F(-0.5), 15)
        xs = x.reshape(-1, 8, 32)
        sum_x2 = np.zeros(xs.shape[:-1], F)
        for i in range(32):
            sum_x2 = sum_x2 + xs[..., i] * xs[..., i]
        av = np.sqrt(sum_x2 / F(32)).astype(F)
        s, m = make_qkx2(xs, av[..., None] + np.abs(xs), nmax, rmin, F(0.1), nstep, False)
        max_s, max_m = np.maximum(s.max(-1), F(0)), np.maximum(m.max(-1), F(0))
        inv_s = np.where(max_s > 0, _div(F(63), max_s), F(0))
        inv_m = np.where(max_m > 0, _div(F(63), max_m), F(0))
        ls = np.minimum(63, np.rint(inv_s[:, None] * s)).astype(F)
        lm = np.minimum(63, np.rint(inv_m[:, None] * m)).astype(F)
        d, dmin = _fp16(max_s / F(63)), _fp16(max_m / F(63))
        dl, ml = d[:, None] * ls, dmin[:, None] * lm
        q = np.clip(np.rint(_div(xs + ml[..., None], dl[..., None])), 0, nmax).astype(F)
        out = dl[..., None] * q - ml[..., None]
    elif fmt == "q6_k":
        xs = x.reshape(-1, 16, 16)
        s = make_qx(xs, 32)
        max_s = _max_abs_signed(s)
        zero = np.abs(max_s) < F(1e-15)
        iscale = _div(F(-128), max_s)
        d = np.where(zero, F(0), _fp16(_div(F(1), iscale)))
        sc = np.where(zero[:, None], F(0), np.minimum(127, np.rint(iscale[:, None] * s)))
        dl = d[:, None] * sc.astype(F)
        q = np.clip(np.rint(_div(xs, dl[..., None])), -32, 31).astype(F)
        out = dl[..., None] * q
    elif fmt == "q3_k":
        xs = x.reshape(-1, 16, 16)
        s = np.stack([make_q3(xs[:, j]) for j in range(16)], axis=1)
        max_s = _max_abs_signed(s)
        live = max_s != 0
        iscale = _div(F(-32), max_s)
        d = np.where(live, _fp16(_div(F(1), iscale)), F(0))
        sc = np.where(live[:, None], np.clip(_nearest_int(iscale[:, None] * s), -32, 31),
                      F(-32))
        dl = d[:, None] * sc
        q = np.where(dl[..., None] != 0,
                     np.clip(_nearest_int(_div(xs, dl[..., None])), -4, 3), F(0))
        out = dl[..., None] * q
    elif fmt == "q2_k":
        xs = x.reshape(-1, 16, 16)
        s, m = make_qkx2(xs, np.abs(xs), 3, F(-0.5), F(0.1), 15, True)
        max_s, max_m = np.maximum(s.max(-1), F(0)), np.maximum(m.max(-1), F(0))
        ls = np.where(max_s[:, None] > 0,
                      _nearest_int(_div(F(15), max_s)[:, None] * s), F(0)).astype(np.int64)
        lm = np.where(max_m[:, None] > 0,
                      _nearest_int(_div(F(15), max_m)[:, None] * m), F(0)).astype(np.int64)
        byte = (ls & 0xFF) | ((lm << 4) & 0xFF)
        d = np.where(max_s > 0, _fp16(max_s / F(15)), F(0))
        dmin = np.where(max_m > 0, _fp16(max_m / F(15)), F(0))
        dl, ml = d[:, None] * (byte & 0xF).astype(F), dmin[:, None] * (byte >> 4).astype(F)
        q = np.where(dl[..., None] != 0,
                     np.clip(_nearest_int(_div(xs + ml[..., None], dl[..., None])), 0, 3),
                     F(0))
        out = dl[..., None] * q - ml[..., None]
    else:
        raise ValueError(fmt)
    return out.astype(F).reshape(shape)
