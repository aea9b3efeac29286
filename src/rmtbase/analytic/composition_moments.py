"""Exact finite-(d, d_h) null moments of head–head composition scores and of the QK overlap.

Null (``docs/composition.md``): independent Gaussian factors, X = Aᵀ B of independent (n, d)
Gaussians (n = d_h); M = A Aᵀ, N = B Bᵀ, r = tr(MNMN)/tr(MN)² = Σλ²/(Σλ)².

s² = tr(S R T Rᵀ)/(tr S tr T), R Haar in O(d): E s² = 1/d, and by the degree-2 orthogonal
Weingarten function (Collins & Śniady 2006; Collins & Matsumoto 2009)

    E s⁴ = [(d + 1) − 2 r_S − 2 r_T + 2 d r_S r_T] / (d (d − 1)(d + 2)),

exact once E r is (:func:`score_moments`). E r = 1/d + (1 − 1/d) E Σ_a w_a²,
w_a = ν_a C_a / Σ_b ν_b C_b (ν the spectrum of N, C_a ~ χ²_d): 1 at n = 1, a ₃F₂ at n = 2
(:func:`ipr_mean_rank2`), else the ratio of exact moments E tr(MNMN)/E tr(MN)²
(:func:`ipr_mean_ratio`; relative error ≈ 7/d², measured, not a bound).

QK overlap c (:func:`overlap_moments`): E c = 0; E c² = 1/d² for distinct key heads; for query
heads sharing a key head 1/d at n = 1, a ₂F₁ series at n = 2 (:func:`overlap_shared_rank2`),
(d + n + 1)/(d (dn + 2)) for n ≥ 3."""

from __future__ import annotations

import functools

import mpmath as mp

__all__ = ["haar_fourth", "ipr_mean", "ipr_mean_exact", "ipr_mean_rank2", "ipr_mean_ratio",
           "overlap_moments", "overlap_shared_rank2", "score_moments", "wishart_trace_moments"]


def wishart_trace_moments(d: int, n: int) -> tuple[float, float]:
    """(E tr G², E (tr G)²) of G ~ W_n(I, d): dn(d + n + 1), dn(dn + 2)."""
    d, n = float(d), float(n)
    return d * n * (d + n + 1.0), d * n * (d * n + 2.0)


def ipr_mean_ratio(d: int, n: int) -> float:
    """E tr(MNMN) / E tr(MN)² (ratio of exact moments; = 1 at n = 1, approximate above)."""
    t2, tt = wishart_trace_moments(d, n)
    d = float(d)
    num = d * (d + 1.0) * t2 + d * tt
    den = d * d * tt + 2.0 * d * t2
    return num / den


@functools.lru_cache(maxsize=256)
def ipr_mean_rank2(d: int, dps: int = 30) -> float:
    """Exact E r at n = d_h = 2, d ≥ 2: E r = 1/d + (1 − 1/d)(1 − S/2), S = Σ_j T_j,
    T_0 = d(d − 1)/(d + 1)², T_{j+1}/T_j = (j + 1)(j + 3/2)/(j + (d + 3)/2)² (a ₃F₂ at 1), by
    ``mpmath.nsum`` (Levin) at ``dps`` digits."""
    if int(d) < 2:
        raise ValueError(f"n = 2 needs d >= 2, got d = {d}")
    with mp.workdps(dps):
        dd = mp.mpf(int(d))
        c = (dd + 3) / 2
        t0 = dd * (dd - 1) / (dd + 1) ** 2
        s = mp.nsum(lambda j: t0 * mp.rf(1, j) * mp.rf(mp.mpf(3) / 2, j) / mp.rf(c, j) ** 2,
                    [0, mp.inf], method="levin")
        return float(1 / dd + (1 - 1 / dd) * (1 - s / 2))


@functools.lru_cache(maxsize=256)
def overlap_shared_rank2(d: int, dps: int = 20) -> float:
    """Exact E c² of the QK overlap of two d_h = 2 query heads sharing a key head:
    (1 + E_y g²)/(2d), E_y g² = ∫₀¹ z (d/(d+1))² ₂F₁(½, 1; (d + 3)/2; z)² b (1 − z)^{b−1} dz,
    b = (d − 1)/2. For d ≥ 16 as the double series Σ_m E[z^{m+1}] Σ_{j+k=m} β_j β_k
    (E z^m = m!/((d+1)/2)_m, β_j = d/(d + 1) · (½)_j/((d + 3)/2)_j) by ``mpmath.nsum``, below
    by ``mpmath.quad``."""
    if int(d) < 2:
        raise ValueError(f"n = 2 needs d >= 2, got d = {d}")
    with mp.workdps(dps):
        dd = mp.mpf(int(d))
        if int(d) < 16:
            b, c0 = (dd - 1) / 2, dd / (dd + 1)
            e = mp.quad(lambda z: z * (c0 * mp.hyp2f1(mp.mpf(1) / 2, 1, (dd + 3) / 2, z)) ** 2
                        * b * (1 - z) ** (b - 1), [0, mp.mpf(1) / 2, mp.mpf(9) / 10, 1])
            return float((1 + e) / (2 * dd))
        b1 = (dd + 1) / 2
        beta = [dd / (dd + 1)]

        def bj(j):
            while len(beta) <= j:
                k = len(beta) - 1
                beta.append(beta[-1] * (k + mp.mpf(1) / 2) / (k + (dd + 3) / 2))
            return beta[j]

        def term(m):
            m = int(m)
            ez = mp.factorial(m + 1) / mp.rf(b1, m + 1)
            return ez * mp.fsum(bj(j) * bj(m - j) for j in range(m + 1))

        s = mp.nsum(term, [0, mp.inf], method="levin")
        return float((1 + s) / (2 * dd))


def ipr_mean_exact(n: int) -> bool:
    """Whether :func:`ipr_mean` is exact at d_h = n (n ≤ 2)."""
    return int(n) <= 2


def ipr_mean(d: int, n: int) -> float:
    """E r of one head's product at (d, d_h = n): exact for n ≤ 2, else :func:`ipr_mean_ratio`."""
    n = int(n)
    if n == 1:
        return 1.0
    if n == 2:
        return ipr_mean_rank2(int(d))
    return ipr_mean_ratio(d, n)


def haar_fourth(d: int, r1, r2):
    """E_R[(tr A R B Rᵀ)²] / (tr A tr B)² for Haar R in O(d), symmetric A, B with
    tr A²/(tr A)² = r1, tr B²/(tr B)² = r2 (degree-2 orthogonal Weingarten)."""
    d = float(d)
    return ((d + 2.0) * (1.0 + 2.0 * r1 * r2) - (1.0 + 2.0 * r1) * (1.0 + 2.0 * r2)) / (
        d * (d - 1.0) * (d + 2.0))


def score_moments(d: int, d_h1: int, d_h2: int) -> tuple[float, float, bool]:
    """(E s², Var s², exact) of a squared composition score under the null. E s² = 1/d always;
    Var s² exact when both d_h ≤ 2 (``exact``), else through :func:`ipr_mean_ratio`."""
    m4 = haar_fourth(d, ipr_mean(d, d_h1), ipr_mean(d, d_h2))
    return 1.0 / d, m4 - 1.0 / float(d) ** 2, ipr_mean_exact(d_h1) and ipr_mean_exact(d_h2)


def overlap_moments(d: int, d_h: int, shared_key: bool = False) -> tuple[float, float, bool]:
    """(E c, Var c, exact) of the QK overlap of two heads of one layer under the null (module doc).
    """
    if not shared_key:
        return 0.0, 1.0 / float(d) ** 2, True
    if int(d_h) == 2:
        return 0.0, overlap_shared_rank2(int(d)), True
    d, n = float(d), float(d_h)
    return 0.0, (d + n + 1.0) / (d * (d * n + 2.0)), n == 1.0
