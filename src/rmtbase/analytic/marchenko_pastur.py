"""Marchenko–Pastur law MP_c with ratio c ∈ (0, ∞) and scale σ² (Marchenko & Pastur 1967).

MP_c(σ²) is the limiting eigenvalue law of S = (1/n) X Xᵀ, X p × n with i.i.d. entries of mean
0 and variance σ², p/n → c: mean σ², variance c σ⁴, edges a, b = σ²(1 ∓ √c)², and

    ρ(x) = √((b − x)(x − a)) / (2π σ² c x),   a ≤ x ≤ b,

of mass min(1, 1/c); for c > 1 an atom 1 − 1/c at 0 (:func:`cdf`, :func:`quantile` include it,
:func:`density` does not). Moments: m_k = σ^{2k} Σ_{j=0}^{k−1} N(k, j+1) c^j, Narayana
N(k, r) = C(k, r) C(k, r−1) / k. CDF, with x/σ² = 1 + c + 2√c cos θ, θ ∈ [0, π]:

    F_ac(x) = [ (1+c)(π−θ) + 2√c sin θ − 2|1−c| atan2(cos(θ/2), κ sin(θ/2)) ] / (2πc),
    κ = |1 − √c| / (1 + √c).

float64 (vectorised; absolute accuracy ~1e-16 near the edges) and ``*_mp`` at ``dps`` digits."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np

from ..errors import check_positive
from ._numeric import check_order, check_probability, working_dps

__all__ = [
    "edges", "edges_mp", "density", "density_mp", "cdf", "cdf_mp", "quantile", "quantile_mp",
    "moments", "moments_mp", "narayana",
]


def narayana(k: int) -> list[int]:
    """Narayana numbers N(k, r), r = 1..k: the coefficients of m_k in powers c^{r−1}."""
    k = check_order(k)
    return [math.comb(k, r) * math.comb(k, r - 1) // k for r in range(1, k + 1)]


def moments(c: float, k: int, sigma2: float = 1.0) -> np.ndarray:
    """Moments m_1..m_k of MP_c(σ²) (float64), from the Narayana polynomials."""
    c = check_positive(c, "c")
    sigma2 = check_positive(sigma2, "sigma2")
    k = check_order(k)
    return np.array([sigma2**j * sum(n * c**i for i, n in enumerate(narayana(j)))
                     for j in range(1, k + 1)])


def moments_mp(c, k: int, sigma2=1, dps: int | None = None) -> list:
    """Moments m_1..m_k of MP_c(σ²) as mpf (exact integer coefficients)."""
    check_positive(c, "c")
    check_positive(sigma2, "sigma2")
    k = check_order(k)
    with working_dps(dps):
        c, s2 = mp.mpf(c), mp.mpf(sigma2)
        return [s2**j * mp.fsum(n * c**i for i, n in enumerate(narayana(j)))
                for j in range(1, k + 1)]


def edges(c: float, sigma2: float = 1.0) -> tuple[float, float]:
    """Support edges (a, b) = σ²(1 ∓ √c)² of the continuous part."""
    c = check_positive(c, "c")
    sigma2 = check_positive(sigma2, "sigma2")
    r = math.sqrt(c)
    return sigma2 * (1.0 - r) ** 2, sigma2 * (1.0 + r) ** 2


def edges_mp(c, sigma2=1, dps: int | None = None) -> tuple:
    """Support edges (a, b) = σ²(1 ∓ √c)² as mpf."""
    check_positive(c, "c")
    check_positive(sigma2, "sigma2")
    with working_dps(dps):
        r, s2 = mp.sqrt(mp.mpf(c)), mp.mpf(sigma2)
        return s2 * (1 - r) ** 2, s2 * (1 + r) ** 2


def density(x, c: float, sigma2: float = 1.0) -> np.ndarray:
    """Density of the absolutely continuous part at ``x`` (zero outside [a, b])."""
    a, b = edges(c, sigma2)
    x = np.asarray(x, dtype=float)
    inside = (x > a) & (x < b)
    xs = np.where(inside, x, 0.5 * (a + b))
    val = np.sqrt((b - xs) * (xs - a)) / (2.0 * np.pi * sigma2 * c * xs)
    return np.where(inside, val, 0.0)


def density_mp(x, c, sigma2=1, dps: int | None = None):
    """Density of the absolutely continuous part at ``x`` (mpf)."""
    a, b = edges_mp(c, sigma2, dps=dps)
    with working_dps(dps):
        x, c, s2 = mp.mpf(x), mp.mpf(c), mp.mpf(sigma2)
        if not (a < x < b):
            return mp.mpf(0)
        return mp.sqrt((b - x) * (x - a)) / (2 * mp.pi * s2 * c * x)


def cdf(x, c: float, sigma2: float = 1.0) -> np.ndarray:
    """P(X ≤ x), including the atom 1 − 1/c at 0 when c > 1 (closed form, see module doc)."""
    a, b = edges(c, sigma2)
    x = np.asarray(x, dtype=float)
    y = np.clip(x, a, b)
    half = np.arctan2(np.sqrt(b - y), np.sqrt(y - a))      # θ/2, accurate at both edges
    theta = 2.0 * half
    rc = math.sqrt(c)
    kappa = abs(1.0 - rc) / (1.0 + rc)
    sin_theta = np.sqrt((b - y) * (y - a)) / (2.0 * rc * sigma2)
    ac = ((1.0 + c) * (np.pi - theta) + 2.0 * rc * sin_theta
          - 2.0 * abs(1.0 - c) * np.arctan2(np.cos(half), kappa * np.sin(half))) / (2.0 * np.pi * c)
    atom = max(0.0, 1.0 - 1.0 / c)
    out = np.where(x >= b, min(1.0, 1.0 / c), np.where(x <= a, 0.0, ac))
    return np.clip(out + np.where(x >= 0, atom, 0.0), 0.0, 1.0)


def cdf_mp(x, c, sigma2=1, dps: int | None = None):
    """P(X ≤ x) as mpf (closed form, including the atom for c > 1)."""
    a, b = edges_mp(c, sigma2, dps=dps)
    with working_dps(dps):
        x, c, s2 = mp.mpf(x), mp.mpf(c), mp.mpf(sigma2)
        atom = max(mp.mpf(0), 1 - 1 / c) if x >= 0 else mp.mpf(0)
        if x <= a:
            return atom
        if x >= b:
            return atom + min(mp.mpf(1), 1 / c)
        half = mp.atan2(mp.sqrt(b - x), mp.sqrt(x - a))
        rc = mp.sqrt(c)
        kappa = abs(1 - rc) / (1 + rc)
        sin_theta = mp.sqrt((b - x) * (x - a)) / (2 * rc * s2)
        ac = ((1 + c) * (mp.pi - 2 * half) + 2 * rc * sin_theta
              - 2 * abs(1 - c) * mp.atan2(mp.cos(half), kappa * mp.sin(half))) / (2 * mp.pi * c)
        return atom + ac


def quantile(q, c: float, sigma2: float = 1.0) -> np.ndarray:
    """Inverse of :func:`cdf` (smallest x with F(x) ≥ q), by vectorised bisection on [a, b]."""
    q = check_probability(q)
    a, b = edges(c, sigma2)
    atom = max(0.0, 1.0 - 1.0 / c)
    lo = np.full(q.shape, a)
    hi = np.full(q.shape, b)
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        below = cdf(mid, c, sigma2) < q
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    return np.where(q <= atom, 0.0 if atom > 0 else a, hi)


def quantile_mp(q, c, sigma2=1, dps: int | None = None):
    """Inverse of :func:`cdf_mp` (mpf), by a bracketed root search."""
    check_probability(float(q))
    a, b = edges_mp(c, sigma2, dps=dps)
    with working_dps(dps) as target:
        q = mp.mpf(q)
        atom = max(mp.mpf(0), 1 - 1 / mp.mpf(c))
        if q <= atom:
            return mp.mpf(0) if atom > 0 else a
        if q >= 1:
            return b
        return mp.findroot(lambda x: cdf_mp(x, c, sigma2, dps=target) - q, (a, b),
                           solver="anderson")
