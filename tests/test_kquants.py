"""K-quant round trips (rmtbase.stats.kquants) against two independent references.

1. A scalar transcription of ggml's reference quantisers (``quantize_row_q2_K_ref`` …
   ``quantize_row_q6_K_ref`` with ``make_qkx2_quants``, ``make_q3_quants`` and
   ``make_qx_quants``, llama.cpp ``ggml/src/ggml-quants.c``), written here loop by loop in
   float32 with the C code's sequential sums and ``nearest_int``'s bit trick; the JAX version
   vectorises the candidate search.
2. The ``gguf`` package's own ``dequantize`` (gguf-py has no K-quant quantiser): the codes
   packed into ggml's block bytes (``tests/_gguf.py``) must dequantise to exactly the round
   trip's values.
3. ``tests/_kquant_ref.py``: the same C code in numpy, vectorised over blocks (each operation
   rounded once, as gguf-py's legacy quantisers and C without FMA contraction), checked here
   against the scalar transcription (1.), which makes it fast enough for many blocks: the
   jitted round trips equal it on 640 Gaussian and tie blocks (quick) and on 100,000 Gaussian
   blocks at σ = 0.02 and σ = 1 per format (slow): 0 differing blocks.
"""

from __future__ import annotations

import _gguf
import _kquant_ref
import gguf
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _compiles import compiles

from rmtbase.errors import InputError
from rmtbase.stats.precision import block_size, round_trip

F = np.float32


def _nearest(v):
    return int(np.rint(F(v)))  # nearest_int: ties to even


def _fp16(v):
    return F(np.float16(F(v)))


def _nearest_int(v):
    """nearest_int's bit trick: float32 v + 12582912 read as int32, low 23 bits less 2^22."""
    bits = np.array([F(F(v) + F(12582912.0))], F).view(np.int32)[0]
    return int((bits & 0x7FFFFF) - 0x400000)


def _qkx2(x, nmax, rmin, rdelta, nstep, w=None, mad=False):
    n = len(x)
    if w is None:  # Q4_K, Q5_K: av_x + |x|
        sum_x2 = F(0)
        for v in x:
            sum_x2 = F(sum_x2 + v * v)
        av_x = F(np.sqrt(F(sum_x2 / F(n))))
        w = [F(av_x + abs(v)) for v in x]

    def loss(diff):
        return abs(diff) if mad else F(diff * diff)
    mn, mx = x[0], x[0]
    sum_w, sum_x = w[0], F(w[0] * x[0])
    for i in range(1, n):
        mn, mx = min(mn, x[i]), max(mx, x[i])
        sum_w = F(sum_w + w[i])
        sum_x = F(sum_x + F(w[i] * x[i]))
    mn = min(mn, F(0))
    if mx == mn:
        return F(0), F(-mn)
    iscale = F(F(nmax) / F(mx - mn))
    scale = F(F(1) / iscale)
    best = F(0)
    for i in range(n):
        q = max(0, min(nmax, _nearest(F(iscale * F(x[i] - mn)))))
        diff = F(F(F(scale * q) + mn) - x[i])
        best = F(best + F(w[i] * loss(diff)))
    for step in range(nstep + 1):
        iscale = F(F(F(rmin) + F(F(rdelta) * F(step)) + F(nmax)) / F(mx - mn))
        laux, sl, sl2, sxl = [], F(0), F(0), F(0)
        for i in range(n):
            q = max(0, min(nmax, _nearest(F(iscale * F(x[i] - mn)))))
            laux.append(q)
            sl = F(sl + F(w[i] * q))
            sl2 = F(sl2 + F(F(w[i] * q) * q))
            sxl = F(sxl + F(F(w[i] * q) * x[i]))
        dd = F(F(sum_w * sl2) - F(sl * sl))
        if dd > 0:
            s = F(F(F(sum_w * sxl) - F(sum_x * sl)) / dd)
            m = F(F(F(sl2 * sum_x) - F(sl * sxl)) / dd)
            if m > 0:
                m, s = F(0), F(sxl / sl2)
            err = F(0)
            for i in range(n):
                diff = F(F(F(s * laux[i]) + m) - x[i])
                err = F(err + F(w[i] * loss(diff)))
            if err < best:
                best, scale, mn = err, s, m
    return scale, F(-mn)


def _qx(x, nmax):
    amax, mx = F(0), F(0)
    for v in x:
        if abs(v) > amax:
            amax, mx = abs(v), v
    if amax < 1e-30:
        return F(0)

    def sums(iscale):
        slx, sl2 = F(0), F(0)
        for v in x:
            q = max(-nmax, min(nmax - 1, _nearest(F(iscale * v))))
            wv = F(v * v)
            slx = F(slx + F(F(wv * v) * q))
            sl2 = F(sl2 + F(F(wv * q) * q))
        return slx, sl2

    slx, sl2 = sums(F(F(-nmax) / mx))
    scale = F(slx / sl2)
    best = F(scale * slx)
    for i in (*range(-9, 0), *range(1, 10)):
        slx, sl2 = sums(F(-F(F(nmax) + F(F(0.1) * F(i))) / mx))
        if sl2 > 0 and F(slx * slx) > F(best * sl2):
            scale = F(slx / sl2)
            best = F(scale * slx)
    return scale


def _q3(x, nmax):
    """make_q3_quants(n, nmax, x, L, do_rmse=true): the scale (its codes are not needed)."""
    amax, mx = F(0), F(0)
    for v in x:
        if abs(v) > amax:
            amax, mx = abs(v), v
    if amax < F(1e-15):
        return F(0)
    iscale = F(F(-nmax) / mx)
    L, sumlx, suml2 = [], F(0), F(0)
    for v in x:
        l = max(-nmax, min(nmax - 1, _nearest_int(F(iscale * v))))
        L.append(l)
        w = F(v * v)
        sumlx = F(sumlx + F(F(w * v) * F(l)))
        suml2 = F(suml2 + F(F(w * F(l)) * F(l)))
    for _ in range(5):
        changed = 0
        for i, v in enumerate(x):
            w = F(v * v)
            slx = F(sumlx - F(F(w * v) * F(L[i])))
            if slx > 0:
                sl2 = F(suml2 - F(F(w * F(L[i])) * F(L[i])))
                new = max(-nmax, min(nmax - 1, _nearest_int(F(F(v * sl2) / slx))))
                if new != L[i]:
                    slx = F(slx + F(F(w * v) * F(new)))
                    sl2 = F(sl2 + F(F(w * F(new)) * F(new)))
                    if sl2 > 0 and F(F(slx * slx) * suml2) > F(F(sumlx * sumlx) * sl2):
                        L[i], sumlx, suml2 = new, slx, sl2
                        changed += 1
        if not changed:
            break
    return F(sumlx / suml2) if suml2 > 0 else F(0)


def _reference_q2(x):
    """quantize_row_q2_K_ref + dequantize_row_q2_K on one super-block."""
    sub = [x[16 * j:16 * j + 16] for j in range(16)]
    sm = [_qkx2(b, 3, -0.5, 0.1, 15, w=[F(abs(v)) for v in b], mad=True) for b in sub]
    max_scale = max(F(0), *(s for s, _ in sm))
    max_min = max(F(0), *(m for _, m in sm))
    byte, d, dmin = [0] * 16, F(0), F(0)
    if max_scale > 0:
        iscale = F(F(15) / max_scale)
        byte = [_nearest_int(F(iscale * s)) & 0xFF for s, _ in sm]  # uint8, no clamp
        d = _fp16(F(max_scale / F(15)))
    if max_min > 0:
        iscale = F(F(15) / max_min)
        byte = [(byte[j] | (_nearest_int(F(iscale * sm[j][1])) << 4)) & 0xFF for j in range(16)]
        dmin = _fp16(F(max_min / F(15)))
    out = np.zeros(256, F)
    for j in range(16):
        dl, ml = F(d * F(byte[j] & 0xF)), F(dmin * F(byte[j] >> 4))
        for i in range(16):
            v = x[16 * j + i]
            q = max(0, min(3, _nearest_int(F(F(v + ml) / dl)))) if dl else 0
            out[16 * j + i] = F(F(dl * F(q)) - ml)
    return out


def _reference_q3(x):
    """quantize_row_q3_K_ref + dequantize_row_q3_K on one super-block."""
    scales = [_q3(x[16 * j:16 * j + 16], 4) for j in range(16)]
    amax, max_scale = F(0), F(0)
    for s in scales:
        if abs(s) > amax:
            amax, max_scale = abs(s), s
    sc, d = [-32] * 16, F(0)                     # scales bytes all zero: 0 - 32
    if max_scale:
        iscale = F(F(-32) / max_scale)
        sc = [max(-32, min(31, _nearest_int(F(iscale * s)))) for s in scales]
        d = _fp16(F(F(1) / iscale))
    out = np.zeros(256, F)
    for j in range(16):
        dl = F(d * F(sc[j]))
        for i in range(16):
            q = max(-4, min(3, _nearest_int(F(x[16 * j + i] / dl)))) if dl else 0
            out[16 * j + i] = F(dl * F(q))
    return out


def _reference(x, fmt):
    """One super-block through quantize_row_*_K_ref and dequantize_row_*_K, scalar."""
    x = [F(v) for v in x]
    if fmt in ("q2_k", "q3_k"):
        return _reference_q2(x) if fmt == "q2_k" else _reference_q3(x)
    out = np.zeros(256, F)
    if fmt == "q6_k":
        scales = [_qx(x[16 * j:16 * j + 16], 32) for j in range(16)]
        max_scale = max(scales, key=abs)
        if abs(max_scale) < 1e-15:
            return out
        iscale = F(F(-128) / max_scale)
        d = _fp16(F(F(1) / iscale))
        for j in range(16):
            sc = min(127, _nearest(F(iscale * scales[j])))
            dl = F(d * F(sc))
            for i in range(16):
                q = max(-32, min(31, _nearest(F(x[16 * j + i] / dl)))) if dl else 0
                out[16 * j + i] = F(dl * F(q))
        return out
    nmax, rmin, rdelta, nstep = {"q4_k": (15, -1.0, 0.1, 20), "q5_k": (31, -0.5, 0.1, 15)}[fmt]
    sm = [_qkx2(x[32 * j:32 * j + 32], nmax, rmin, rdelta, nstep) for j in range(8)]
    max_scale = max(F(0), *(s for s, _ in sm))
    max_min = max(F(0), *(m for _, m in sm))
    inv_s = F(F(63) / max_scale) if max_scale > 0 else F(0)
    inv_m = F(F(63) / max_min) if max_min > 0 else F(0)
    d, dmin = _fp16(F(max_scale / F(63))), _fp16(F(max_min / F(63)))
    for j, (s, m) in enumerate(sm):
        ls, lm = min(63, _nearest(F(inv_s * s))), min(63, _nearest(F(inv_m * m)))
        dl, ml = F(d * F(ls)), F(dmin * F(lm))
        for i in range(32):
            v = x[32 * j + i]
            q = max(0, min(nmax, _nearest(F(F(v + ml) / dl)))) if dl else 0
            out[32 * j + i] = F(F(dl * F(q)) - ml)
    return out


def _edge_blocks(seed):
    """Constant blocks (positive: min clamps at 0; negative: every sub-block max = min), one
    huge outlier, tiny values (d in float16's subnormal range, 6e-8 … 6e-5), values on a
    coarse lattice (exact rounding ties)."""
    rng = np.random.default_rng(seed)
    g = rng.standard_normal((6, 256)).astype(F)
    w = np.stack([np.full(256, 0.01, F), np.full(256, -0.01, F), 0.02 * g[0],
                  3e-5 * g[1], 4e-4 * g[2], np.round(4 * g[3]) / 8]).astype(F)
    w[2, 77] = 50.0
    return w


def _blocks(seed):
    rng = np.random.default_rng(seed)
    w = (0.02 * rng.standard_normal((6, 256))).astype(F)
    w[0] = 0.0                                   # all zero: d = dmin = 0
    w[1] = np.abs(w[1])                          # all positive: mins clamp at 0
    w[2, :32] = 0.0                              # a zero sub-block (max = min)
    w[3] *= np.linspace(0.01, 3.0, 256, dtype=F)  # sub-block scales spanning 300×
    w[4] = rng.standard_t(3, 256).astype(F)      # heavy tails, σ ≈ 1
    return w


FORMATS = ["q2_k", "q3_k", "q4_k", "q5_k", "q6_k"]
_CHUNK = 10  # blocks per call of the jitted round trip: one compilation per format per module
_JIT: dict = {}


def _jitted(w, fmt):
    """The jitted round trip of blocks ``w`` (n, 256), run in chunks of ``_CHUNK`` blocks so
    that every test of this module reuses one compiled executable per format."""
    if fmt not in _JIT:
        _JIT[fmt] = jax.jit(lambda a: round_trip(a, fmt))
    n = w.shape[0]
    pad = np.concatenate([w, np.zeros((-n % _CHUNK, w.shape[1]), F)])
    out = [np.asarray(_JIT[fmt](jnp.asarray(pad[i:i + _CHUNK])))
           for i in range(0, pad.shape[0], _CHUNK)]
    return np.concatenate(out)[:n]


def _tie_blocks(n, rng):
    """Super-blocks on coarse lattices, where the C code meets exact rounding ties (codes
    round(iscale·(x − min)) at .5, equal candidate errors, scales at a level boundary):
    integers/8 times a power of two (2⁻¹⁰ … 2²), the same times a random float32 mantissa,
    blocks of three values, and blocks whose 32-entry sub-blocks are constant."""
    k = n // 4
    g = rng.standard_normal((4 * k, 256))
    e = (2.0 ** rng.integers(-10, 3, (4 * k, 1)))
    a = np.round(rng.choice([2, 4, 8], (k, 1)) * g[:k]) / 8 * e[:k]
    b = np.round(4 * g[k:2 * k]) / 16 * rng.uniform(1, 2, (k, 1)).astype(F) * e[k:2 * k]
    vals = np.round(8 * rng.standard_normal((k, 3))) / 8
    c = np.take_along_axis(vals, rng.integers(0, 3, (k, 256)), axis=1) * e[2 * k:3 * k]
    d = np.repeat(np.round(8 * g[3 * k:, :8]) / 8, 32, axis=1) * e[3 * k:]
    return np.concatenate([a, b, c, d]).astype(F)


@pytest.mark.parametrize("fmt", FORMATS)
def test_numpy_reference_matches_scalar_transcription(fmt):
    """The vectorised reference (tests/_kquant_ref.py) against the scalar, entry-by-entry
    transcription: every block equal, edge cases, tie blocks and Gaussian blocks alike."""
    rng = np.random.default_rng(8)
    w = np.concatenate([_blocks(1), _edge_blocks(6), _tie_blocks(8, rng),
                        0.02 * rng.standard_normal((3, 256)),
                        rng.standard_normal((3, 256))]).astype(F)
    ref = _kquant_ref.round_trip(w, fmt)
    for r in range(w.shape[0]):
        # exact: by construction, the quantiser is correctly rounded float32 ops in a fixed order,
        #  FMA and reciprocal rewrites guarded (rmtbase.stats._exact); bit-equality with the scalar
        #  ggml/torch reference is its contract
        np.testing.assert_array_equal(ref[r], _reference(w[r], fmt), err_msg=f"{fmt} row {r}")


@pytest.mark.parametrize("fmt", FORMATS)
def test_jitted_round_trip_equals_reference_on_gaussian_and_tie_blocks(fmt):
    """640 blocks: 256 Gaussian at σ = 0.02, 256 at σ = 1, 128 on rounding ties, plus the
    edge cases: 0 differing blocks (before the products were kept from fusing into FMAs,
    Q4_K differed on about 1 Gaussian block in 140, Q2_K, Q3_K and Q5_K now and then)."""
    rng = np.random.default_rng(33)
    w = np.concatenate([0.02 * rng.standard_normal((256, 256)), rng.standard_normal((256, 256)),
                        _tie_blocks(128, rng), _blocks(2), _edge_blocks(3)]).astype(F)
    got, want = _jitted(w, fmt), _kquant_ref.round_trip(w, fmt)
    assert int((got != want).any(axis=-1).sum()) == 0


@pytest.mark.slow
@pytest.mark.parametrize("sigma", [0.02, 1.0])
@pytest.mark.parametrize("fmt", FORMATS)
def test_jitted_round_trip_equals_reference_on_100000_gaussian_blocks(fmt, sigma):
    n = 100_000
    w = (sigma * np.random.default_rng(34).standard_normal((n, 256))).astype(F)
    got = np.asarray(jax.jit(lambda a: round_trip(a, fmt))(jnp.asarray(w)))
    want = _kquant_ref.round_trip(w, fmt)
    assert int((got != want).any(axis=-1).sum()) == 0


def test_an_eager_round_trip_compiles_once_per_shape():
    """Q3_K (the largest scale search) called outside jit twice at one shape: the second call
    compiles nothing and gives the jitted values. Before, each eager call traced the search's
    ``fori_loop`` over a new closure and JAX compiled and kept it again (~0.3 GB a call: the
    Q3_K case of ``test_gguf_null.py`` reached 10.8 GB)."""
    rng = np.random.default_rng(12)
    a, b = (rng.standard_normal((3, 2, 256)).astype(F) for _ in range(2))
    round_trip(jnp.asarray(a), "q3_k")
    with compiles() as seen:
        got = np.asarray(round_trip(jnp.asarray(b), "q3_k"))
    assert seen == []
    # exact: by construction, the quantiser is correctly rounded float32 ops in a fixed order, FMA
    #  and reciprocal rewrites guarded (rmtbase.stats._exact); bit-equality with the scalar
    #  ggml/torch reference is its contract
    np.testing.assert_array_equal(got, _kquant_ref.round_trip(b.reshape(-1, 256), "q3_k")
                                  .reshape(b.shape))


@pytest.mark.parametrize("fmt", FORMATS)
def test_round_trip_matches_scalar_ggml_reference(fmt):
    """Bit-equal on every block: known edge cases (zeros, positive, a zero sub-block, scales
    over 300×, heavy tails) and Gaussian ones, eager and under jit."""
    rng = np.random.default_rng(5)
    w = np.concatenate([_blocks(1), 0.02 * rng.standard_normal((4, 256))]).astype(F)
    got = np.asarray(round_trip(jnp.asarray(w), fmt))
    jitted = _jitted(w, fmt)
    for r in range(w.shape[0]):
        want = _reference(w[r], fmt)
        # exact: by construction, the quantiser is correctly rounded float32 ops in a fixed order,
        #  FMA and reciprocal rewrites guarded (rmtbase.stats._exact); bit-equality with the scalar
        #  ggml/torch reference is its contract
        np.testing.assert_array_equal(got[r], want, err_msg=f"{fmt} row {r}")
        # exact: by construction, the quantiser is correctly rounded float32 ops in a fixed order,
        #  FMA and reciprocal rewrites guarded (rmtbase.stats._exact); bit-equality with the scalar
        #  ggml/torch reference is its contract
        np.testing.assert_array_equal(jitted[r], want, err_msg=f"{fmt} row {r} (jit)")
    # exact: a zero row quantises to exact zeros
    np.testing.assert_array_equal(got[0], 0.0)
    levels = {"q2_k": 4, "q3_k": 8, "q4_k": 16, "q5_k": 32, "q6_k": 64}[fmt]
    sub = 32 if fmt in ("q4_k", "q5_k") else 16
    assert max(len(np.unique(got[5, i:i + sub])) for i in range(0, 256, sub)) <= levels


@pytest.mark.parametrize("fmt", FORMATS)
def test_edge_blocks_match_scalar_ggml_reference(fmt):
    """Constant blocks, one huge outlier, tiny values (d in float16's subnormal range), tied
    values: bit-equal to the scalar transcription, jitted (Q5_K's outlier block was an
    expected failure while XLA's FMAs went unchecked)."""
    w = _edge_blocks(6)
    got = _jitted(w, fmt)
    for r in range(w.shape[0]):
        # exact: by construction, the quantiser is correctly rounded float32 ops in a fixed order,
        #  FMA and reciprocal rewrites guarded (rmtbase.stats._exact); bit-equality with the scalar
        #  ggml/torch reference is its contract
        np.testing.assert_array_equal(got[r], _reference(w[r], fmt), err_msg=f"{fmt} row {r}")
    np.testing.assert_allclose(got[:2], [[0.01] * 256, [-0.01] * 256], rtol=5e-3)


@pytest.mark.parametrize("fmt", FORMATS)
def test_codes_dequantise_with_gguf_to_the_round_trip(fmt):
    rng = np.random.default_rng(2)
    w = np.concatenate([_blocks(3), _edge_blocks(7), 0.05 * rng.standard_normal((52, 256))])
    w = w.astype(F).reshape(16, 1024)
    data, kind = _gguf.encode_k(w, fmt)
    size = {"q2_k": 84, "q3_k": 110, "q4_k": 144, "q5_k": 176, "q6_k": 210}[fmt]
    assert data.shape == (16, 4 * size) == (16, 4 * gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[kind]][1])
    deq = gguf.quants.dequantize(data, gguf.GGMLQuantizationType[kind])
    # exact: by construction, the quantiser is correctly rounded float32 ops in a fixed order, FMA
    #  and reciprocal rewrites guarded (rmtbase.stats._exact); bit-equality with the scalar
    #  ggml/torch reference is its contract
    np.testing.assert_array_equal(deq, np.asarray(round_trip(jnp.asarray(w), fmt)))
    err = np.abs(deq[4:] - w[4:]).max() / np.abs(w[4:]).max()
    assert err < {"q2_k": 0.4, "q3_k": 0.2, "q4_k": 0.1, "q5_k": 0.05, "q6_k": 0.02}[fmt]


@pytest.mark.parametrize("fmt,ref", [("q5_0", "Q5_0"), ("q5_1", "Q5_1")])
def test_legacy_5_bit_formats_match_gguf_quantize(fmt, ref):
    rng = np.random.default_rng(4)
    w = (0.02 * rng.standard_normal((8, 128))).astype(F)
    w[0, :32] = 0.0
    t = gguf.GGMLQuantizationType[ref]
    want = gguf.quants.dequantize(gguf.quants.quantize(w, t), t)
    # exact: by construction, the quantiser is correctly rounded float32 ops in a fixed order, FMA
    #  and reciprocal rewrites guarded (rmtbase.stats._exact); bit-equality with the scalar
    #  ggml/torch reference is its contract
    np.testing.assert_array_equal(np.asarray(round_trip(jnp.asarray(w), fmt)), want)


def test_block_sizes_and_refusal():
    assert block_size("q2_k") == block_size("q3_k") == block_size("q6_k") == 256
    assert block_size("q5_0") == 32 and block_size("float16") == 1
    with pytest.raises(InputError, match="multiple of 256"):
        round_trip(jnp.zeros((2, 288), F), "q4_k")


def test_no_fma_and_no_reciprocal_in_compiled_code():
    """The two compiler rewrites that broke bit-exactness, checked on their own (jitted, 10⁵
    values each, against numpy's once-rounded operations): ``a·b − c·c`` contracted into an
    FMA (c·c is a square, whose sign LLVM knows, so a −0 → +0 guard is proved away), and a
    division by a broadcast value turned into a multiply by its reciprocal; and the correctly
    rounded division by the constants 15 and 63. Unguarded, on XLA 0.10.2 CPU, these differ
    from numpy on 23 %, 27 % and about 50 % of the values."""
    from rmtbase.stats._exact import div_pow2_minus_1, safe_div, unfused

    rng = np.random.default_rng(9)
    a, b, c = (rng.standard_normal(100_000).astype(F) for _ in range(3))
    x = rng.standard_normal((1000, 8, 32)).astype(F)
    d = rng.uniform(0.5, 2.0, (1000, 8)).astype(F)
    guarded = jax.jit(lambda a, b, c: unfused(a * b) - unfused(c * c))(a, b, c)
    # exact: elementwise IEEE ops are correctly rounded on every CPU; this checks no FMA was fused
    np.testing.assert_array_equal(np.asarray(guarded), (a * b) - (c * c))
    div = jax.jit(lambda x, d: safe_div(x, d[..., None]))(x, d)
    # exact: a correctly rounded division; this checks no reciprocal rewrite
    np.testing.assert_array_equal(np.asarray(div), x / d[..., None])
    for n in (15, 63):  # a constant divisor: folded, so found by residuals instead
        got = jax.jit(lambda a, n=n: div_pow2_minus_1(a, n))(np.abs(a))
        # exact: a correctly rounded division by a constant
        np.testing.assert_array_equal(np.asarray(got), np.abs(a) / F(n))
