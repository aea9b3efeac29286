"""The legacy GGUF block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0): rmtbase's jitted round trip
equals ``gguf.quants`` (the ggml reference, numpy) bit for bit on 131,072 Gaussian blocks at
σ = 0.02 and σ = 1, and on blocks built to sit on rounding ties."""

import gguf
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rmtbase.stats.precision import round_trip

FORMATS = ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0")
N_BLOCKS = 131_072


def _reference(w, fmt):
    t = gguf.GGMLQuantizationType[fmt.upper()]
    return gguf.quants.dequantize(gguf.quants.quantize(w, t), t)


def _differing_blocks(w, fmt):
    got = np.asarray(jax.jit(lambda x: round_trip(x, fmt))(jnp.asarray(w)))
    want = _reference(w, fmt)
    return int((got.reshape(-1, 32) != want.reshape(-1, 32)).any(axis=-1).sum())


@pytest.mark.parametrize("sigma", [0.02, 1.0])
@pytest.mark.parametrize("fmt", FORMATS)
def test_round_trip_equals_gguf_quants_on_131072_gaussian_blocks(fmt, sigma):
    rng = np.random.default_rng(33)
    w = (sigma * rng.standard_normal((N_BLOCKS // 32, 32 * 32))).astype(np.float32)
    assert w.size // 32 == N_BLOCKS
    assert _differing_blocks(w, fmt) == 0


def _ulps(x, r):
    """``x`` moved by ``r`` float32 steps (r an integer array, |r| ≤ 2)."""
    for _ in range(2):
        x = np.where(r > 0, np.nextafter(x, np.float32(np.inf)), x)
        x = np.where(r < 0, np.nextafter(x, np.float32(-np.inf)), x)
        r = r - np.sign(r)
    return x.astype(np.float32)


def _tie_blocks(fmt, n, rng):
    """Blocks whose scaled entries sit on, or one or two float32 steps from, ``j + ½`` — the
    ties of ⌊x/d + ½⌋ and of roundf — for the block scale ``d`` the format computes, at
    scales over 2⁻¹²…2² with random mantissas."""
    f32 = np.float32
    m = (rng.uniform(1, 2, n) * 2.0 ** rng.integers(-12, 3, n)).astype(f32)[:, None]
    if fmt in ("q4_0", "q5_0"):
        half = 8 if fmt == "q4_0" else 16
        d, lo, top = -m / f32(-half), f32(0), 2 * half - 1  # xmax = −m: d = m/half
        ends = np.concatenate([-m, m / f32(2)], axis=1)
        j = rng.integers(0, top, (n, 30)) - half
    elif fmt in ("q4_1", "q5_1"):
        top = 15 if fmt == "q4_1" else 31
        lo, hi = -m, m * f32(rng.uniform(0.2, 1.5))
        d = (hi - lo) / f32(top)
        ends = np.concatenate([lo, hi], axis=1)
        j = rng.integers(0, top, (n, 30))
    else:
        d, lo = m / f32(127), f32(0)
        ends = np.concatenate([m, -m / f32(3)], axis=1)
        j = rng.integers(-127, 127, (n, 30))
    inner = (lo + (j + f32(0.5)) * d).astype(f32)
    inner = _ulps(inner, rng.integers(-2, 3, inner.shape))
    if fmt in ("q4_1", "q5_1"):
        inner = np.clip(inner, ends[:, :1], ends[:, 1:])
    else:
        inner = np.clip(inner, -np.abs(ends[:, :1]), np.abs(ends[:, :1]))
    return np.concatenate([ends, inner], axis=1).astype(f32)


@pytest.mark.parametrize("fmt", FORMATS)
def test_round_trip_equals_gguf_quants_at_rounding_ties(fmt):
    rng = np.random.default_rng(7)
    w = np.concatenate([_tie_blocks(fmt, 16384, rng), np.zeros((4, 32), np.float32),
                        np.full((4, 32), 0.3, np.float32)])
    assert _differing_blocks(w.reshape(-1, 64), fmt) == 0
