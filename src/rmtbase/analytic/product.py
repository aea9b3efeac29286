"""MP_c ⊠ MP_c: the limit law of the normalised spectrum of W_QK, and exact finite-d moments.

W_Q, W_K (d_h, d) i.i.d. N(0, σ_Q²), N(0, σ_K²); λ, the d_h nonzero eigenvalues of W_QK W_QKᵀ,
are those of G_Q G_K with G/(σ² d) → MP_c, c = d_h/d ≤ 1; the Grams are asymptotically free, so
x = λ/(σ_Q² σ_K² d²) → MP_c ⊠ MP_c (Voiculescu, Dykema & Nica 1992; Burda et al. 2010).

S(z) = (1 + cz)^(−2) (Mingo & Speicher 2017); ψ(z) = Σ_{k≥1} m_k z^k solves
z (1 + ψ)(1 + cψ)² = ψ, so with u = cψ(1/x), G(x) = (1 + ψ(1/x))/x and

    u³ + (2 + c) u² + (1 + 2c − x) u + c = 0,     ρ(x) = −Im u / (π c x),

on the root with Im u < 0, solved as δ = 1 + u: δ³ + (c − 1)δ² − xδ + x = 0. Edges:
2u² + cu − c = 0, x± = (c+u)(1+u)²/u. Moments (Fuss–Narayana):
m_k = Σ_{j=1}^{k} C(k, j) C(2k, j−1) c^{j−1} / k (Fuss–Catalan C(3k, k)/(2k+1) at c = 1;
Penson & Życzkowski 2011); mean 1, variance 2c, NPR → 1/(1 + 2c).

CDF: F(x) = 1 − Im H(u(x))/π, H(u) = 2u/c + 2((c−1)/c) Log(1+u) − Log u (principal logs).
∫ x ln x ρ dx = c − c²/6 (the Fuss–Narayana sum differentiated in the moment order), hence the
spectral-entropy limit ln d_h − c + c²/6.

Finite d (n = d, p = d_h, σ⁸ = σ_Q⁴σ_K⁴): E Σλ = p n² σ_Q²σ_K²,
E Σλ² = σ⁸ n² p [(n+1)(n+p+1) + np + 2], Var Σλ = σ⁸ 2n²p(2n + p + 1)."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np

from ..errors import InputError, check_dims
from ._numeric import check_order, check_probability, working_dps

__all__ = [
    "fuss_narayana", "moments", "moments_mp", "edges", "edges_mp", "density", "density_mp",
    "cdf", "cdf_mp", "quantile", "quantile_mp", "npr_limit", "xlogx_mean", "xlogx_mean_mp",
    "spectral_entropy_limit", "spectral_entropy_limit_mp", "expected_sum_lambda",
    "expected_sum_lambda2", "var_sum_lambda",
]


def _check_c(c) -> float:
    try:
        v = float(c)
    except (TypeError, ValueError):
        raise InputError(f"c = d_h/d must be a number, got {c!r}") from None
    if not (0 < v <= 1):
        raise InputError(f"c = d_h/d must lie in (0, 1], got {c!r}")
    return v


def fuss_narayana(k: int) -> list[int]:
    """Integer coefficients of m_k in powers c^{j−1}: C(k, j) C(2k, j−1)/k, j = 1..k."""
    k = check_order(k)
    return [math.comb(k, j) * math.comb(2 * k, j - 1) // k for j in range(1, k + 1)]


def moments(c: float, k: int) -> np.ndarray:
    """Moments m_1..m_k of MP_c ⊠ MP_c (float64)."""
    c = _check_c(c)
    return np.array([math.fsum(a * c**i for i, a in enumerate(fuss_narayana(j)))
                     for j in range(1, check_order(k) + 1)])


def moments_mp(c, k: int, dps: int | None = None) -> list:
    """Moments m_1..m_k of MP_c ⊠ MP_c as mpf (exact integer coefficients)."""
    _check_c(c)
    k = check_order(k)
    with working_dps(dps):
        c = mp.mpf(c)
        return [mp.fsum(a * c**i for i, a in enumerate(fuss_narayana(j))) for j in range(1, k + 1)]


def _edge_roots(c, sqrt):
    """u₋, u₊ of 2u² + cu − c = 0 and the factors c+u, 1+u at both, without cancellation."""
    s = sqrt(c * c + 8 * c)
    u_lo, u_hi = -(c + s) / 4, 2 * c / (c + s)
    cu_lo, ou_lo = 2 * c * (c - 1) / (3 * c + s), 4 * (1 - c) / (4 - c + s)
    return u_lo, u_hi, cu_lo, ou_lo


def edges(c: float) -> tuple[float, float]:
    """Support edges (x₋, x₊) of MP_c ⊠ MP_c (x₋ = 0, x₊ = 27/4 at c = 1)."""
    c = _check_c(c)
    u_lo, u_hi, cu_lo, ou_lo = _edge_roots(c, math.sqrt)
    return abs(cu_lo * ou_lo**2 / u_lo), (c + u_hi) * (1 + u_hi) ** 2 / u_hi   # abs: no −0.0


def edges_mp(c, dps: int | None = None) -> tuple:
    """Support edges (x₋, x₊) as mpf."""
    _check_c(c)
    with working_dps(dps):
        c = mp.mpf(c)
        u_lo, u_hi, cu_lo, ou_lo = _edge_roots(c, mp.sqrt)
        return abs(cu_lo * ou_lo**2 / u_lo), (c + u_hi) * (1 + u_hi) ** 2 / u_hi


def _root(x: np.ndarray, c: float) -> np.ndarray:
    """δ = 1 + u for the root u with Im u < 0 (vectorised; companion eigenvalues + Newton), from
    δ³ + (c − 1)δ² − xδ + x = 0 (well conditioned near x = 0 at c = 1)."""
    n = x.size
    comp = np.zeros((n, 3, 3))
    comp[:, 0, 0] = 1.0 - c
    comp[:, 0, 1] = x
    comp[:, 0, 2] = -x
    comp[:, 1, 0] = comp[:, 2, 1] = 1.0
    roots = np.linalg.eigvals(comp)
    dl = roots[np.arange(n), np.argmin(roots.imag, axis=1)]
    for _ in range(3):
        p = ((dl + (c - 1.0)) * dl - x) * dl + x
        dp = (3.0 * dl + 2.0 * (c - 1.0)) * dl - x
        ok = dp != 0
        dl = dl - np.where(ok, p / np.where(ok, dp, 1.0), 0.0)
    return dl


def _root_mp(x, c):
    """δ as in :func:`_root`, via δ = x^{1/3} η for x < 1 (η³ + ((c−1)/x^{1/3})η² − x^{1/3}η + 1
    = 0 keeps the roots O(1) however small x is)."""
    s = mp.cbrt(x) if x < 1 else mp.mpf(1)
    roots = mp.polyroots([1, (c - 1) / s, -x / s**2, x / s**3], maxsteps=400,
                         extraprec=4 * mp.mp.prec)
    return s * min(roots, key=lambda r: mp.im(r))


def density(x, c: float) -> np.ndarray:
    """Density of MP_c ⊠ MP_c at ``x`` (float64, zero outside the support)."""
    c = _check_c(c)
    lo, hi = edges(c)
    x = np.asarray(x, dtype=float)
    inside = (x > lo) & (x < hi)
    out = np.zeros(x.shape)
    if inside.any():
        xi = x[inside]
        out[inside] = np.maximum(-_root(xi, c).imag, 0.0) / (np.pi * c * xi)   # Im δ = Im u
    return out


def density_mp(x, c, dps: int | None = None):
    """Density of MP_c ⊠ MP_c at ``x`` (mpf)."""
    lo, hi = edges_mp(c, dps=dps)
    with working_dps(dps):
        x, c = mp.mpf(x), mp.mpf(c)
        if not (lo < x < hi):
            return mp.mpf(0)
        return -mp.im(_root_mp(x, c)) / (mp.pi * c * x)


def cdf(x, c: float) -> np.ndarray:
    """P(X ≤ x) for MP_c ⊠ MP_c (closed form via the root u, see module doc)."""
    c = _check_c(c)
    lo, hi = edges(c)
    x = np.asarray(x, dtype=float)
    inside = (x > lo) & (x < hi)
    out = np.where(x >= hi, 1.0, 0.0)
    if inside.any():
        dl = _root(x[inside], c)                                 # δ = 1 + u
        im_h = 2.0 * dl.imag / c - 2.0 * ((1.0 - c) / c) * np.angle(dl) - np.angle(dl - 1.0)
        out[inside] = np.clip(1.0 - im_h / np.pi, 0.0, 1.0)
    return out


def cdf_mp(x, c, dps: int | None = None):
    """P(X ≤ x) as mpf."""
    lo, hi = edges_mp(c, dps=dps)
    with working_dps(dps):
        x, c = mp.mpf(x), mp.mpf(c)
        if x <= lo:
            return mp.mpf(0)
        if x >= hi:
            return mp.mpf(1)
        dl = _root_mp(x, c)                                      # δ = 1 + u
        im_h = 2 * mp.im(dl) / c - 2 * ((1 - c) / c) * mp.arg(dl) - mp.arg(dl - 1)
        return 1 - im_h / mp.pi


def quantile(q, c: float) -> np.ndarray:
    """Inverse CDF by vectorised bisection on the support (float64)."""
    q = check_probability(q)
    lo_e, hi_e = edges(c)
    lo, hi = np.full(q.shape, lo_e), np.full(q.shape, hi_e)
    for _ in range(64):
        mid = 0.5 * (lo + hi)
        below = cdf(mid, c) < q
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return hi


def quantile_mp(q, c, dps: int | None = None):
    """Inverse CDF as mpf (bracketed root search)."""
    check_probability(float(q))
    lo, hi = edges_mp(c, dps=dps)
    with working_dps(dps) as target:
        q = mp.mpf(q)
        if q <= 0:
            return lo
        if q >= 1:
            return hi
        return mp.findroot(lambda x: cdf_mp(x, c, dps=target) - q, (lo, hi), solver="anderson")


def npr_limit(c: float) -> float:
    """Large-d limit of NPR = (Σλ)²/(d_h Σλ²): m_1²/m_2 = 1/(1 + 2c)."""
    return 1.0 / (1.0 + 2.0 * _check_c(c))


def xlogx_mean(c: float) -> float:
    """∫ x ln x ρ(x) dx = c − c²/6 for MP_c ⊠ MP_c (see module doc)."""
    c = _check_c(c)
    return c - c * c / 6.0


def xlogx_mean_mp(c, dps: int | None = None):
    """∫ x ln x ρ(x) dx = c − c²/6 as mpf."""
    _check_c(c)
    with working_dps(dps):
        c = mp.mpf(c)
        return c - c * c / 6


def spectral_entropy_limit(d: int, d_h: int) -> float:
    """d_h-dependent large-d limit of −Σ p ln p, p = λ/Σλ: ln d_h − ∫ x ln x ρ(x) dx
    = ln d_h − c + c²/6, c = d_h/d (finite-d corrections are O(1/d_h))."""
    d, d_h = check_dims(d, d_h)
    return math.log(d_h) - xlogx_mean(d_h / d)


def spectral_entropy_limit_mp(d: int, d_h: int, dps: int | None = None):
    """:func:`spectral_entropy_limit` as mpf."""
    d, d_h = check_dims(d, d_h)
    with working_dps(dps) as target:
        return mp.log(d_h) - xlogx_mean_mp(mp.mpf(d_h) / d, dps=target)


def _sigma8(sigma_q, sigma_k):
    s2 = sigma_q * sigma_q * sigma_k * sigma_k
    return s2 * s2


def expected_sum_lambda(d: int, d_h: int, sigma_q=1, sigma_k=1):
    """Exact E Σλ = E‖W_QK‖_F² = d_h d² σ_Q²σ_K² (exact int for the default integer σ = 1; float or mpf for float or mpf σ)."""
    n, p = _dims_sigma(d, d_h, sigma_q, sigma_k)
    return p * n * n * (sigma_q * sigma_q * sigma_k * sigma_k)


def expected_sum_lambda2(d: int, d_h: int, sigma_q=1, sigma_k=1):
    """Exact E Σλ² = σ_Q⁴σ_K⁴ d² d_h [(d+1)(d+d_h+1) + d d_h + 2]."""
    n, p = _dims_sigma(d, d_h, sigma_q, sigma_k)
    return n * n * p * ((n + 1) * (n + p + 1) + n * p + 2) * _sigma8(sigma_q, sigma_k)


def var_sum_lambda(d: int, d_h: int, sigma_q=1, sigma_k=1):
    """Exact Var Σλ = σ_Q⁴σ_K⁴ 2 d² d_h (2d + d_h + 1)."""
    n, p = _dims_sigma(d, d_h, sigma_q, sigma_k)
    return 2 * n * n * p * (2 * n + p + 1) * _sigma8(sigma_q, sigma_k)


def _dims_sigma(d, d_h, sigma_q, sigma_k):
    from ..errors import check_sigma

    check_sigma(sigma_q, "sigma_q")
    check_sigma(sigma_k, "sigma_k")
    return check_dims(d, d_h)
