"""Scaled complementary error function erfcx(z) = e^{z²} erfc(z) for z ≥ 4 at high precision.

For :mod:`._anchor_moments` (mpmath's ``erfc`` is slow there). erfcx is known at an integer
z_top (mpmath's asymptotic series), carried down the grid z_j = j/32 by the exact, stable step
erfcx(z − h) = e^{−h(2z − h)} erfcx(z) + (2/√π) ∫_0^h e^{−2(z−h)τ − τ²} dτ (Taylor
coefficients (k + 1) b_{k+1} = −2(z − h) b_k − 2 b_{k−1}), and evaluated between grid points
from the one above, erfcx(z) = e^{−δ(2z₀ − δ)} [erfcx(z₀) + (2/√π) ∫_0^δ e^{2z₀τ − τ²} dτ],
δ = z₀ − z, by Horner's rule ((k + 1) c_{k+1} = 2z₀ c_k − 2c_{k−1})."""

from __future__ import annotations

import functools
import math

import mpmath as mp

__all__ = ["erfcx", "grid_bits", "Z_MIN"]

#: Smallest z served (below it mpmath's erf series is cheap).
Z_MIN = 4
_M = 5                                  # grid step h = 2^-_M


def _z_top(bits: int) -> int:
    """An integer z at which mpmath's erfc takes its asymptotic series at ``bits``."""
    return math.isqrt(int((bits + 80) / 1.44)) + 3


def _step_integral(j1: int, bits: int) -> int:
    """∫_0^h e^{−2 z₁ τ − τ²} dτ, z₁ = j1 h, as a fixed-point integer (``bits`` bits)."""
    beta_prev, beta = 0, 1 << bits               # β_k = b_k h^k
    total, k = beta, 0
    while True:
        nxt = ((-2 * j1 * beta - 2 * beta_prev) >> (2 * _M)) // (k + 1)
        beta_prev, beta, k = beta, nxt, k + 1
        total += beta // (k + 1)
        if beta == 0 or (abs(beta) < 4 and k > 2 * j1 >> _M):
            return total >> _M


def _exp_neg_rational(num: int, shift: int, bits: int) -> int:
    """e^{−num/2^shift} (num/2^shift ≤ a few) as a fixed-point integer, by its series."""
    term = total = 1 << bits
    k = 0
    while term:
        k += 1
        term = -((term * num) >> shift) // k
        total += term
    return total


@functools.lru_cache(maxsize=4)
def _grid(bits: int) -> tuple[int, tuple[int, ...]]:
    """(j_top, erfcx(j h) for j = 0 … j_top as fixed-point integers, 0 below Z_MIN/h)."""
    top = _z_top(bits)
    j_top = top << _M
    with mp.workdps(int(bits / 3.32) + 10):
        z = mp.mpf(top)
        start = mp.erfc(z) * mp.exp(z * z)
        value = int(mp.ldexp(start, bits))
        two_over_sqrtpi = int(mp.ldexp(2 / mp.sqrt(mp.pi), bits))
    values = [0] * (j_top + 1)
    values[j_top] = value
    for j in range(j_top, (Z_MIN << _M), -1):
        j1 = j - 1                                  # z₁² − z² = −(2 j1 + 1) h²
        decay = _exp_neg_rational(2 * j1 + 1, 2 * _M, bits)
        value = ((decay * value) >> bits) + ((two_over_sqrtpi * _step_integral(j1, bits)) >> bits)
        values[j1] = value
    return j_top, tuple(values)


@functools.lru_cache(maxsize=16)
def _coefficients(j0: int, bits: int) -> tuple[int, ...]:
    """c_k / (k + 1) of e^{2 z₀ τ − τ²}, z₀ = j0 h, until (2 z₀ h)^k / k! < 2^−bits."""
    c_prev, c = 0, 1 << bits
    out = [c]
    k = 0
    while True:
        nxt = ((2 * j0 * c >> _M) - 2 * c_prev) // (k + 1)
        c_prev, c, k = c, nxt, k + 1
        out.append(c // (k + 1))
        # |c_k h^k| < 2^-bits: stop
        if k > 2 * (j0 >> _M) and abs(c) >> (_M * k) == 0:
            return tuple(out)


def grid_bits(dps: int) -> int:
    """Grid precision (bits) serving every precision up to ``dps`` digits."""
    return 128 * -(-(int(dps * 3.3219280948873626) + 80) // 128)


def erfcx(z, bits_grid: int):
    """e^{z²} erfc(z) as mpf at the current precision (≤ the grid's), for real z ≥ Z_MIN."""
    bits = min(bits_grid, mp.mp.prec + 40)
    shift = bits_grid - bits
    j_top, values = _grid(bits_grid)
    z = mp.mpf(z)
    if z < Z_MIN:
        raise ValueError("erfcx: z below the range served")
    if z >= j_top >> _M:
        with mp.workdps(mp.mp.dps + 10):
            return +(mp.erfc(z) * mp.exp(z * z))
    j0 = int(mp.ceil(z * (1 << _M)))
    z0 = mp.mpf(j0) / (1 << _M)
    with mp.workprec(bits + 20):
        delta = z0 - z                              # 0 ≤ δ < h
        d = int(mp.ldexp(delta, bits))
        acc = 0
        for coeff in reversed(_coefficients(j0, bits_grid)):
            acc = (coeff >> shift) + ((acc * d) >> bits)
        inner = mp.ldexp(values[j0], -bits_grid) + 2 / mp.sqrt(mp.pi) * mp.ldexp(acc * d, -2 * bits)
        return inner * mp.exp(-delta * (2 * z0 - delta))
