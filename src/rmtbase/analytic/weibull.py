"""Half-normal Weibull anchor: the continuum limit of the Weibull probability-plot fit.

Protocol (arXiv:2605.18898, App. A.1): keep a ≤ F ≤ b and least-squares fit
Y = ln(−ln(1−F)) on X = ln|w|; k = slope, λ = exp(−intercept/k). For w ~ N(0, σ²),
x(F) = σ√2 erfinv(F); in the continuum limit, with g(F) = ln(√2 erfinv F),

    k0 = Cov(g, Y) / Var(g),      λ0/σ = exp(ḡ − Ȳ/k0)

(paper eq. 1: k0 ≈ 1.2054, λ0 ≈ 0.8875σ for [0.1, 0.9]). Moments in x = |w|/σ with
dF = √(2/π) e^{−x²/2} dx; for [0, 1]: ḡ = −(γ + ln 2)/2, Var g = π²/8, Ȳ = −γ. The ``*_mp``
forms use series, the exponential integral and Gauss–Legendre panels in ln x
(:mod:`._anchor_moments`). Also the paper's noise curve V(p) (A.2, eq. 3; minimum p* ≈ 0.7968)
and Γ closure (A.1): Weibull against half-normal mean and sd."""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import mpmath as mp
import numpy as np
from scipy import integrate, special

from ..errors import InputError, check_positive
from . import _anchor_moments
from ._numeric import working_dps

__all__ = [
    "Anchor", "anchor", "anchor_mp", "noise_curve", "noise_curve_mp", "p_star", "p_star_mp",
    "noise_ratio", "noise_ratio_mp", "weibull_mean_sd", "weibull_mean_sd_mp", "halfnormal_mean_sd",
    "closure_ratios", "closure_ratios_mp",
]


class Anchor(NamedTuple):
    """(k0, λ0/σ) of the continuum Weibull fit to a half-normal over F ∈ [a, b]."""

    k0: float
    lambda0: float


def _check_trim(a, b) -> tuple[float, float]:
    try:
        af, bf = float(a), float(b)
    except (TypeError, ValueError):
        raise InputError(f"trim bounds must be numbers, got a={a!r}, b={b!r}") from None
    if not (0 <= af < bf <= 1):
        raise InputError(f"trim bounds must satisfy 0 ≤ a < b ≤ 1, got a={a!r}, b={b!r}")
    return af, bf


# ----------------------------------------------------------------------------- float path

def _y_float(x: float) -> float:
    z = x / math.sqrt(2.0)
    minus_log_sf = -math.log1p(-math.erf(z)) if z < 1 else -(math.log(special.erfcx(z)) - z * z)
    return math.log(minus_log_sf)


def anchor(a: float = 0.1, b: float = 0.9) -> Anchor:
    """(k0, λ0/σ) for the trim [a, b] (float64; scipy QAGS in x = |w|/σ)."""
    a, b = _check_trim(a, b)
    lo = 0.0 if a == 0 else math.sqrt(2.0) * float(special.erfinv(a))
    hi = math.inf if b == 1 else math.sqrt(2.0) * float(special.erfinv(b))
    norm = math.sqrt(2.0 / math.pi) / (b - a)

    def mean(fun):
        val, _ = integrate.quad(lambda x: fun(x) * math.exp(-0.5 * x * x), lo, hi,
                                epsabs=0.0, epsrel=1e-13, limit=400)
        return norm * val

    g = mean(math.log)
    y = mean(_y_float)
    var_g = mean(lambda x: (math.log(x) - g) ** 2)
    cov = mean(lambda x: (math.log(x) - g) * (_y_float(x) - y))
    k0 = cov / var_g
    return Anchor(k0, math.exp(g - y / k0))


def noise_curve(p) -> np.ndarray:
    """V(p) = p / ((1−p) ln²(1−p)), p ∈ (0, 1) (float64)."""
    p = np.asarray(p, dtype=float)
    if np.any(~(p > 0) | ~(p < 1)):
        raise InputError("noise_curve needs 0 < p < 1")
    return p / ((1.0 - p) * np.log1p(-p) ** 2)


def p_star() -> float:
    """Minimiser of V: p* = 1 + W₀(−2e^{−2})/2."""
    return 1.0 + 0.5 * float(special.lambertw(-2.0 * math.exp(-2.0), 0).real)


def noise_ratio(p: float = 0.1) -> float:
    """V(p)/V(p*) (paper: V(0.1)/V(p*) ≈ 6.5)."""
    return float(noise_curve(p)) / float(noise_curve(p_star()))


def weibull_mean_sd(k: float, lam: float = 1.0) -> tuple[float, float]:
    """Mean λΓ(1+1/k) and sd λ√(Γ(1+2/k) − Γ²(1+1/k)) of Weibull(k, λ)."""
    k, lam = check_positive(k, "k"), check_positive(lam, "lambda")
    g1, g2 = math.gamma(1 + 1 / k), math.gamma(1 + 2 / k)
    return lam * g1, lam * math.sqrt(g2 - g1 * g1)


def halfnormal_mean_sd(sigma: float = 1.0) -> tuple[float, float]:
    """Mean σ√(2/π) and sd σ√(1 − 2/π) of |w|, w ~ N(0, σ²)."""
    sigma = check_positive(sigma, "sigma")
    return sigma * math.sqrt(2 / math.pi), sigma * math.sqrt(1 - 2 / math.pi)


def closure_ratios(a: float = 0.1, b: float = 0.9) -> tuple[float, float]:
    """Γ closure at the anchor: (Weibull mean / half-normal mean, Weibull sd / half-normal sd)."""
    k0, lam0 = anchor(a, b)
    (wm, ws), (hm, hs) = weibull_mean_sd(k0, lam0), halfnormal_mean_sd(1.0)
    return wm / hm, ws / hs


# -------------------------------------------------------------------------------- mp path

def _moments_mp(a, b, tick=None):
    """(ḡ, Ȳ, Var g, Cov(g, Y)) for F uniform on [a, b] at mp precision (:mod:`._anchor_moments`).
    """
    return _anchor_moments.moments(a, b, tick)


@functools.lru_cache(maxsize=16)
def _anchor_cached(a, b, dps: int) -> Anchor:
    with mp.workdps(dps):
        g, y, var, cov = _moments_mp(a, b, _anchor_moments._TICK.get())
        k0 = cov / var
        return Anchor(k0, mp.exp(g - y / k0))


def anchor_mp(a="0.1", b="0.9", dps: int | None = None) -> Anchor:
    """(k0, λ0/σ) as mpf for the trim [a, b] (strings for exact decimals), at ``dps`` + 10 digits,
    cached per trim and precision."""
    _check_trim(a, b)
    with working_dps(dps):
        k0, lam = _anchor_cached(a, b, mp.mp.dps)
        return Anchor(+k0, +lam)


def noise_curve_mp(p, dps: int | None = None):
    """V(p) as mpf."""
    if not (0 < float(p) < 1):
        raise InputError("noise_curve needs 0 < p < 1")
    with working_dps(dps):
        p = mp.mpf(p)
        return p / ((1 - p) * mp.log1p(-p) ** 2)


def p_star_mp(dps: int | None = None):
    """p* = 1 + W₀(−2e^{−2})/2 as mpf."""
    with working_dps(dps):
        return 1 + mp.lambertw(-2 * mp.exp(-2), 0).real / 2


def noise_ratio_mp(p="0.1", dps: int | None = None):
    """V(p)/V(p*) as mpf, using V(p*) = 1/(4p*(1−p*))."""
    with working_dps(dps) as target:
        ps = p_star_mp(dps=target)
        return noise_curve_mp(p, dps=target) * 4 * ps * (1 - ps)


def weibull_mean_sd_mp(k, lam=1, dps: int | None = None):
    """Weibull(k, λ) mean and sd as mpf."""
    check_positive(k, "k")
    check_positive(lam, "lambda")
    with working_dps(dps):
        k, lam = mp.mpf(k), mp.mpf(lam)
        g1, g2 = mp.gamma(1 + 1 / k), mp.gamma(1 + 2 / k)
        return lam * g1, lam * mp.sqrt(g2 - g1 * g1)


def closure_ratios_mp(a="0.1", b="0.9", dps: int | None = None):
    """Γ closure ratios at the anchor as mpf (see :func:`closure_ratios`)."""
    with working_dps(dps) as target:
        k0, lam0 = anchor_mp(a, b, dps=target)
        wm, ws = weibull_mean_sd_mp(k0, lam0, dps=target)
        return wm / mp.sqrt(2 / mp.pi), ws / mp.sqrt(1 - 2 / mp.pi)
