"""Private: log K_ν for large orders (Debye expansion) and exact mp K_ν by forward recurrence.

DLMF 10.41.4 (Olver 1954), ν → ∞ uniformly in z > 0:

    K_ν(νz) ~ √(π/(2ν)) e^{−νη} (1+z²)^{−1/4} Σ_k (−1)^k u_k(p)/ν^k,
    η = √(1+z²) + ln(z/(1+√(1+z²))),  p = 1/√(1+z²),

u_k by DLMF 10.41.9 in exact rationals. log Γ(ν + ½) = ν ln ν − ν + ½ ln 2π + R(ν), R the
Stirling series (DLMF 5.11.8), so large terms cancel analytically."""

from __future__ import annotations

import functools
from fractions import Fraction

import mpmath as mp
import numpy as np


@functools.lru_cache(maxsize=1)
def debye_polys(kmax: int = 48) -> tuple[tuple[Fraction, ...], ...]:
    """u_k(p) for k = 0..kmax as dense coefficient tuples in powers of p (exact)."""
    polys = [(Fraction(1),)]
    for _ in range(kmax):
        u = polys[-1]
        du = [i * u[i] for i in range(1, len(u))]                       # u'(p), powers 0..
        out = [Fraction(0)] * (len(u) + 3)
        for i, a in enumerate(du):                                      # ½ p²(1 − p²) u'
            out[i + 2] += a / 2
            out[i + 4] -= a / 2
        for i, a in enumerate(u):                                       # ⅛ ∫ (1 − 5t²) u
            out[i + 1] += a / (8 * (i + 1))
            out[i + 3] -= 5 * a / (8 * (i + 3))
        while len(out) > 1 and out[-1] == 0:
            out.pop()
        polys.append(tuple(out))
    return tuple(polys)


@functools.lru_cache(maxsize=4)
def _debye_float(kmax: int):
    return [np.array([float(a) for a in u]) for u in debye_polys()[: kmax + 1]]


@functools.lru_cache(maxsize=1)
def _stirling_half_coeffs(kmax: int = 30) -> tuple[Fraction, ...]:
    """B_{2k}(½)/(2k(2k−1)) = (2^{1−2k} − 1) B_{2k}/(2k(2k−1)), k = 1..kmax (exact)."""
    out = []
    for k in range(1, kmax + 1):
        p, q = mp.bernfrac(2 * k)
        b = Fraction(int(p), int(q))
        out.append((Fraction(2) ** (1 - 2 * k) - 1) * b / (2 * k * (2 * k - 1)))
    return tuple(out)


def stirling_half_remainder(nu: float, terms: int = 8) -> float:
    """R(ν) = ln Γ(ν+½) − ν ln ν + ν − ½ ln 2π for ν ≥ 20 (float64, |error| < 1e-20)."""
    return float(sum(float(c) / nu ** (2 * k + 1)
                     for k, c in enumerate(_stirling_half_coeffs()[:terms])))


def log_debye_series(nu: float, p: np.ndarray, kmax: int = 20) -> np.ndarray:
    """ln Σ_{k≤kmax} (−1)^k u_k(p)/ν^k (float64, for ν ≥ 30)."""
    total = np.zeros_like(p)
    for k, coef in enumerate(_debye_float(kmax)):
        if k == 0:
            continue
        total += (-1) ** k * np.polynomial.polynomial.polyval(p, coef) / nu**k
    return np.log1p(total)


def debye_series_mp(nu, p, eps):
    """Σ (−1)^k u_k(p)/ν^k in mp, summed until a term is below ``eps``; None if the asymptotic
    series stops decreasing first (then the caller falls back to an exact method)."""
    total, prev = mp.mpf(1), mp.inf
    for k, u in enumerate(debye_polys()):
        if k == 0:
            continue
        term = mp.polyval([mp.mpf(a.numerator) / a.denominator for a in reversed(u)], p) / nu**k
        mag = abs(term)
        total += term if k % 2 == 0 else -term
        if mag < eps * abs(total):
            return total
        if mag > prev and k > 4:
            return None
        prev = mag
    return None


def _k01_steed_mp(z):
    """(K_0(z), K_1(z)) for z ≥ 2 by Steed's continued fraction CF2 with Temme's
    normalisation (Temme 1975; Numerical Recipes §6.7, routine bessik, with μ = 0)."""
    b = 2 * (1 + z)
    d = 1 / b
    h = delh = d
    q1, q2 = mp.mpf(0), mp.mpf(1)
    a1 = mp.mpf(1) / 4
    q = c = a1
    a = -a1
    s = 1 + q * delh
    for i in range(2, 100000):
        a -= 2 * (i - 1)
        c = -a * c / i
        qnew = (q1 - b * q2) / a
        q1, q2 = q2, qnew
        q += c * qnew
        b += 2
        d = 1 / (b + a * d)
        delh = (b * d - 1) * delh
        h += delh
        dels = q * delh
        s += dels
        if abs(dels) < mp.eps * abs(s):
            break
    h = a1 * h
    k0 = mp.sqrt(mp.pi / (2 * z)) * mp.exp(-z) / s
    k1 = k0 * (z + mp.mpf(1) / 2 - h) / z
    return k0, k1


def besselk_mp(nu, z):
    """K_ν(z) in mp for ν ∈ ½ℕ: the finite sum for half-integer ν ≤ 40½; mpmath's besselk for
    integer ν ≤ 12 at z < 10; else the (stable) forward recurrence K_{μ+1} = K_{μ−1} + (2μ/z) K_μ
    from K_{1/2}, K_{3/2} or from K_0, K_1 (Steed's CF2 for z ≥ 10)."""
    nu = mp.mpf(nu)
    m = int(mp.floor(nu))
    nu0 = nu - m
    if nu0 != 0 and m <= 40:      # half-integer order: finite sum (DLMF 10.49.12), all terms > 0
        x = 1 / (2 * z)
        total, coef = mp.mpf(0), mp.mpf(1)
        for k in range(m + 1):
            total += coef
            coef *= mp.mpf((m + k + 1) * (m - k)) / (k + 1) * x
        return mp.sqrt(mp.pi / (2 * z)) * mp.exp(-z) * total
    if nu0 == 0 and z < 10 and nu <= 12:
        return mp.besselk(nu, z)
    with mp.workdps(mp.mp.dps + len(str(m)) + 3):
        if nu0 == 0:
            k0, k1 = _k01_steed_mp(z) if z >= 10 else (mp.besselk(0, z), mp.besselk(1, z))
            if m == 0:
                return +k0
        else:
            k0 = mp.sqrt(mp.pi / (2 * z)) * mp.exp(-z)
            k1 = k0 * (1 + 1 / z)
        two_over_z = 2 / z
        step = nu0 * two_over_z
        for _ in range(m - 1):
            step += two_over_z
            k0, k1 = k1, k0 + step * k1
    return +k1
