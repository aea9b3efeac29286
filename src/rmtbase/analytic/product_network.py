"""Limit laws of product networks: Ginibre M_L = W_L⋯W_1 and residual M_L = (I+W_L)⋯(I+W_1).

The ensembles of :mod:`rmtbase.ensembles.products`; the law is the d → ∞ limit (fixed L and
width ratios) of the eigenvalues of M_LᵀM_L, unnormalised: mean G^L d_L/d_0 or (1 + G)^L.

Ginibre (Burda, Janik & Waclaw 2010; Burda et al. 2010; Mingo & Speicher 2017):

    S(w) = 1/(G(d_L/d_0 + w)) · ∏_{l=1}^{L−1} 1/(G(1 + (d_0/d_l) w)),

so square layers give moments G^{kL} C((L+1)k, k)/(Lk + 1) (Fuss–Catalan) on
[0, G^L (L+1)^{L+1}/L^L] (Penson & Życzkowski 2011); an atom 1 − min_l d_l/d_0 sits at 0.

Residual: (I + W)ᵀ(I + W) tends to the information-plus-noise law (Dozier & Silverstein 2007),
S_1(w) = 2 / (1 + G + 2Gw + √((1 + G)² + 4Gw)); freeness (Collins & Śniady 2006) gives
S = S_1^L. Finite-d corrections are O(L/d) (:mod:`rmtbase.analytic.network_finite`).

Moments by Lagrange inversion of ψ = z(1 + ψ)/S(ψ) (:mod:`._series`): exact
(:func:`moments_exact`), float64 (:func:`moments`) or mpf (:func:`moments_mp`). Edges and
density via :mod:`._rational_map` with u = w (Ginibre) or u = √((1+G)² + 4Gw) (residual)."""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

import mpmath as mp
import numpy as np

from ..errors import check_positive_int
from . import _rational_map as rmap
from ._lyapunov import lyapunov_limits, lyapunov_limits_mp, lyapunov_quantile
from ._network_kind import _check, check_kind
from ._numeric import check_order, working_dps
from ._series import lagrange_moments, series_mul, series_pow

__all__ = [
    "fuss_catalan", "s_transform", "moments", "moments_exact", "moments_mp", "edges",
    "edges_mp", "density", "density_mp", "atom", "lyapunov_quantile", "lyapunov_limits",
    "lyapunov_limits_mp",
]


def fuss_catalan(depth: int, k: int) -> int:
    """FC_L(k) = C((L+1)k, k)/(Lk + 1), the k-th moment of the square Ginibre product at G = 1."""
    L, k = check_positive_int(depth, "depth"), check_order(k)
    return math.comb((L + 1) * k, k) // (L * k + 1)


def _phi(kind, depth, g, widths, k, num, half):
    """Coefficients of φ(w) = (1 + w)/S(w) up to w^{k−1} (law of M Mᵀ for Ginibre widths)."""
    one = num(1)
    if kind == "ginibre":
        poly = [one, one]
        if widths is not None:
            for d_l in widths[:-1]:
                poly = series_mul(poly, [one, num(widths[-1]) / num(d_l)], k)
        else:
            poly = series_pow(poly, depth + 1, k, b0=one)
        return [g**depth * c for c in poly] + [0 * one] * max(0, k - len(poly))
    beta = 4 * g / (1 + g) ** 2
    sq = series_pow([one, beta], half, k, b0=one)          # √(1 + βw)
    gs = [(1 + g) * c / 2 for c in sq]
    gs[0] = 1 + g
    if k > 1:
        gs[1] = gs[1] + g
    return series_mul([one, one], series_pow(gs, depth, k, b0=(1 + g) ** depth), k)


def _weight(widths, num):
    return num(1) if widths is None else num(widths[-1]) / num(widths[0])


def moments_exact(kind: str, depth: int, gain=1, k: int = 6, widths=None) -> list[Fraction]:
    """m_1..m_k of the limit law of M_LᵀM_L as exact Fractions (``gain`` through ``Fraction``)."""
    kind, depth, gain, widths = _check(kind, depth, gain, widths)
    k = check_order(k)
    g = Fraction(gain)
    phi = _phi(kind, depth, g, widths, k, Fraction, Fraction(1, 2))
    return [m * _weight(widths, Fraction) for m in lagrange_moments(phi, k)]


def moments(kind: str, depth: int, gain: float = 1.0, k: int = 6, widths=None) -> np.ndarray:
    """m_1..m_k as float64 (correctly rounded from :func:`moments_exact`)."""
    return np.array([float(m) for m in moments_exact(kind, depth, gain, k, widths)])


def moments_mp(kind: str, depth: int, gain=1, k: int = 6, widths=None, dps: int | None = None):
    """m_1..m_k as mpf (series in mp arithmetic at ``dps`` digits)."""
    kind, depth, gain, widths = _check(kind, depth, gain, widths)
    k = check_order(k)
    with working_dps(dps):
        phi = _phi(kind, depth, mp.mpf(gain), widths, k, mp.mpf, mp.mpf(1) / 2)
        return [m * _weight(widths, mp.mpf) for m in lagrange_moments(phi, k)]


def s_transform(w, kind: str, depth: int, gain: float = 1.0, widths=None):
    """S-transform of the limit law of M_LᵀM_L at ``w`` (complex or real array)."""
    kind, depth, gain, widths = _check(kind, depth, gain, widths)
    w = np.asarray(w, dtype=complex if np.iscomplexobj(w) else float)
    g = float(gain)
    if kind == "residual":
        return (2.0 / (1 + g + 2 * g * w + np.sqrt((1 + g) ** 2 + 4 * g * w + 0j))) ** depth
    if widths is None:
        return (g * (1 + w)) ** (-depth)
    out = 1.0 / (g * (widths[-1] / widths[0] + w))
    for d_l in widths[1:-1]:
        out = out / (g * (1 + widths[0] / d_l * w))
    return out


def atom(kind: str, widths=None) -> float:
    """Mass of the atom at 0 of the limit law of M_LᵀM_L: 1 − min_l d_l/d_0 (0 if square)."""
    check_kind(kind)
    if widths is None:
        return 0.0
    return 1.0 - min(widths) / widths[0]


def _exact(gain) -> Fraction:
    """``gain`` as an exact Fraction (an mpf by its binary mantissa and exponent)."""
    if isinstance(gain, mp.mpf):
        man, exp = gain.man_exp
        return Fraction(int(man)) * Fraction(2) ** int(exp)
    return Fraction(gain)


def _map_pairs(kind, depth, g, widths):
    """(log C, [(r, n)]) of X(u) with exact (Fraction) roots for merging."""
    if kind == "ginibre":
        a = [Fraction(1)] * depth if widths is None else [Fraction(widths[-1], d) for d in widths[:-1]]
        pairs = [(Fraction(-1), 1), (Fraction(0), -1)] + [(-1 / x, 1) for x in a]
        return depth * math.log(float(g)) + sum(math.log(x) for x in a), pairs
    g = _exact(g)
    pairs = [(1 - g, 1), (g - 1, depth + 1), (-1 - g, depth - 1), (1 + g, -1)]
    return -depth * math.log(4.0), pairs


def _shifted(kind, depth, gain, widths):
    """(log C, shifted roots, powers, shift): roots r_j − r₀ (Fractions), r₀ the largest zero."""
    log_c, pairs = _map_pairs(kind, depth, gain, widths)
    merged = rmap.merge_roots(pairs)
    shift = max(r for r, n in merged if n > 0)
    return log_c, tuple(r - shift for r, _ in merged), tuple(n for _, n in merged), shift


@lru_cache(maxsize=64)
def _curve(kind, depth, gain, widths):
    log_c, roots, powers, shift = _shifted(kind, depth, gain, widths)
    rm = rmap.RationalMap(log_c, tuple(float(r) for r in roots), powers, float(shift),
                          None if kind == "ginibre" else float(gain))
    crit = rmap.critical_points(rm.roots, rm.powers, np.roots)
    real = sorted(float(z.real) for z in np.atleast_1d(crit) if abs(z.imag) <= 1e-9 * (1 + abs(z)))
    lower, upper = rmap.edge_points(rm, real)
    return rm, lower, upper, rmap.trace_path(rm, lower, upper)


def edges(kind: str, depth: int, gain: float = 1.0, widths=None) -> tuple[float, float]:
    """Edges (x₋, x₊) of the continuous part of the limit law of M_LᵀM_L (float64): square Ginibre
    (0, G^L (L+1)^{L+1}/L^L); residual x₋ > 0 only for G < 1."""
    kind, depth, gain, widths = _check(kind, depth, gain, widths)
    _, lower, upper, _ = _curve(kind, depth, float(gain), widths)
    return (0.0 if lower is None else lower[1]), upper[1]


def edges_mp(kind: str, depth: int, gain=1, widths=None, dps: int | None = None) -> tuple:
    """Edges (x₋, x₊) as mpf (mpmath polyroots at ``dps`` digits; an mpf ``gain`` taken exactly)."""
    kind, depth, gain, widths = _check(kind, depth, gain, widths)
    with working_dps(dps):
        _, sroots, powers, _ = _shifted(kind, depth, gain, widths)
        roots = [mp.mpf(r.numerator) / r.denominator for r in sroots]
        c = _const_mp(kind, depth, gain, widths)

        def x_of(v):
            p = c
            for r, n in zip(roots, powers, strict=True):
                p *= (v - r) ** n
            return p

        crit = rmap.critical_points(roots, powers, lambda p: mp.polyroots(
            p, maxsteps=500, extraprec=4 * mp.mp.prec))
        real = [mp.re(z) for z in crit if abs(mp.im(z)) <= mp.mpf(10) ** (-mp.mp.dps // 2)]
        pole = max(r for r, n in zip(roots, powers, strict=True) if n < 0)
        hi = min(x_of(v) for v in real if v > pole)
        zeros = sorted(((r, n) for r, n in zip(roots, powers, strict=True) if n > 0), reverse=True)
        if zeros[0][1] > 1 or len(zeros) < 2:
            return mp.mpf(0), hi
        lo = max(x_of(v) for v in real if zeros[1][0] < v < zeros[0][0])
        return lo, hi


def _const_mp(kind, depth, gain, widths):
    if kind == "residual":
        return mp.mpf(4) ** (-depth)
    c = mp.mpf(gain) ** depth
    if widths is not None:
        for d in widths[:-1]:
            c *= mp.mpf(widths[-1]) / d
    return c


def density(x, kind: str, depth: int, gain: float = 1.0, widths=None) -> np.ndarray:
    """Density of the continuous part of the limit law of M_LᵀM_L at ``x`` (0 outside)."""
    kind, depth, gain, widths = _check(kind, depth, gain, widths)
    rm, lower, upper, path = _curve(kind, depth, float(gain), widths)
    lo, hi = (0.0 if lower is None else lower[1]), upper[1]
    x = np.asarray(x, dtype=float)
    out = np.zeros(x.shape)
    inside = (x > lo) & (x < hi)
    if inside.any():
        xi = x[inside]
        u = rmap.solve(rm, path, lower, upper, np.log(xi))
        out[inside] = np.maximum(-rm.w(u).imag, 0.0) / (np.pi * xi)
    return out * float(_weight(widths, Fraction))


def density_mp(x, kind: str, depth: int, gain=1, widths=None, dps: int | None = None):
    """Density at ``x`` as mpf (the float root polished by mpmath's findroot)."""
    kind, depth, gain, widths = _check(kind, depth, gain, widths)
    lo, hi = edges_mp(kind, depth, gain, widths, dps=dps)
    rm, lower, upper, path = _curve(kind, depth, float(gain), widths)
    with working_dps(dps):
        x = mp.mpf(x)
        if not lo < x < hi:
            return mp.mpf(0)
        v0 = complex(rmap.solve(rm, path, lower, upper, np.array([float(mp.log(x))]))[0])
        _, sroots, powers, shift = _shifted(kind, depth, gain, widths)
        roots = [mp.mpf(r.numerator) / r.denominator for r in sroots]
        v = rmap.solve_mp((_const_mp(kind, depth, gain, widths), roots, powers), v0, x)
        g, s = mp.mpf(gain), mp.mpf(shift.numerator) / shift.denominator
        w = s + v if kind == "ginibre" else (v * (2 * s + v) + s * s - (1 + g) ** 2) / (4 * g)
        return -mp.im(w) / (mp.pi * x) * (mp.mpf(1) if widths is None
                                          else mp.mpf(widths[-1]) / widths[0])
