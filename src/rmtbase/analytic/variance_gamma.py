"""Exact law of one entry of W_QK: a symmetric variance-gamma (Bessel-K) distribution.

X = Σ_{h=1}^{n} Q_h K_h, n = d_h, Q_h ~ N(0, σ_Q²), K_h ~ N(0, σ_K²), s = σ_Q σ_K, has
characteristic function (1 + s²t²)^(−n/2) (Gaunt 2014): X = s(Γ₁ − Γ₂), Γ_i ~ Gamma(n/2, 1),
or X | V ~ N(0, 2s²V), V ~ Gamma(n/2, 1). With ν = (n − 1)/2 and y = |x|/s,

    f(x) = y^ν K_ν(y) / (s √π 2^ν Γ(n/2))

(n = 1: K_0(y)/(πs); n = 2: Laplace e^{−y}/(2s)). Variance n s², excess kurtosis 6/n,
f(0) = Γ(ν)/(2√π Γ(ν+½) s) for n ≥ 2. CDF (tests' independent check):
F(x) = ½ + (y/2)[K_ν(y) L_{ν−1}(y) + K_{ν−1}(y) L_ν(y)], x ≥ 0, L modified Struve.

Float64: log f by scipy's ``kve`` for ν < 30, the Debye expansion (DLMF 10.41.4;
:mod:`rmtbase.analytic._bessel`) above, where kve overflows. CDF/SF by the normal variance
mixture sf(y) = E_V[Φc(y/√(2V))], trapezoid in ln V around the integrand's maximum, so tails
keep relative accuracy (:mod:`._mixture_tail`). Entropy and KL by the trapezoid in ln y; KL as
∫ φ (r ln r − r + 1), r = f/φ, which stays accurate when tiny (≈ 3/(4n²)).
mp path: mpmath's besselk, the forward recurrence or the Debye series; quadratures by mp.quad."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
from scipy import special

from ..errors import check_positive_int
from . import _bessel
from ._mixture_tail import _sf_unit
from ._numeric import working_dps

__all__ = [
    "variance", "excess_kurtosis", "logpdf", "pdf", "pdf_mp", "logpdf_mp", "cdf", "sf", "cdf_mp",
    "entropy", "entropy_mp", "kl_to_gaussian", "kl_to_gaussian_mp",
]

#: Orders ν = (n−1)/2 at or above which the float path uses the Debye expansion.
NU_DEBYE = 30.0


def _check_n(d_h) -> int:
    from ..limits import MAX_DIM

    return check_positive_int(d_h, "d_h", MAX_DIM)


def _check_s(s) -> float:
    """s = σ_Q σ_K: finite, > 0, within the square of :data:`rmtbase.limits.SIGMA_RANGE`."""
    from ..errors import InputError, check_positive
    from ..limits import SIGMA_RANGE

    v = check_positive(s, "s = sigma_q * sigma_k")
    lo, hi = SIGMA_RANGE[0] ** 2, SIGMA_RANGE[1] ** 2
    if not lo <= v <= hi:
        raise InputError(f"s = sigma_q * sigma_k must be in [{lo:g}, {hi:g}], got {s!r}")
    return v


def variance(d_h: int, s: float = 1.0) -> float:
    """Var X = d_h s²."""
    return _check_n(d_h) * _check_s(s) ** 2


def excess_kurtosis(d_h: int) -> float:
    """Excess kurtosis 6/d_h (cumulants κ₂ = n s², κ₄ = 6 n s⁴)."""
    return 6.0 / _check_n(d_h)


# ----------------------------------------------------------------------------- float path

def _logpdf_unit(y: np.ndarray, n: int) -> np.ndarray:
    """ln f at s = 1 for y = |x| ≥ 0 (float64)."""
    nu = 0.5 * (n - 1)
    y = np.asarray(y, dtype=float)
    out = np.empty(y.shape)
    zero = y == 0
    pos = ~zero
    # ln f(0) = ln[Γ(ν)/(2√π Γ(ν+½))] for n ≥ 2 (the y → 0 limit of y^ν K_ν(y) is 2^{ν−1}Γ(ν))
    at_zero = np.inf if n == 1 else (special.gammaln(nu) - math.log(2.0) - 0.5 * math.log(math.pi)
                                     - special.gammaln(nu + 0.5))
    out[zero] = at_zero
    yp = y[pos]
    if nu < NU_DEBYE:
        with np.errstate(over="ignore", divide="ignore"):
            lk = np.log(special.kve(nu, yp)) - yp
        val = (nu * np.log(yp) + lk - 0.5 * math.log(math.pi) - nu * math.log(2.0)
               - special.gammaln(nu + 0.5))
        val[~np.isfinite(lk)] = at_zero    # kve overflows only at tiny y (< 1e-9): the y → 0 limit
        out[pos] = val
    else:
        z = yp / nu
        q = np.sqrt(1.0 + z * z)
        w = z * z / (2.0 * (1.0 + q))
        e = np.log1p(w) - 2.0 * w                      # 1 − q + ln((1+q)/2)
        out[pos] = (-0.5 * math.log(2.0 * math.pi * (n - 1)) + nu * e - 0.25 * np.log1p(z * z)
                    + _bessel.log_debye_series(nu, 1.0 / q) - _bessel.stirling_half_remainder(nu))
    return out


def logpdf(x, d_h: int, s: float = 1.0) -> np.ndarray:
    """ln f(x) (float64)."""
    n, s = _check_n(d_h), _check_s(s)
    return _logpdf_unit(np.abs(np.asarray(x, dtype=float)) / s, n) - math.log(s)


def pdf(x, d_h: int, s: float = 1.0) -> np.ndarray:
    """f(x) (float64)."""
    return np.exp(logpdf(x, d_h, s))


def sf(x, d_h: int, s: float = 1.0) -> np.ndarray:
    """P(X > x) (float64, relative accuracy kept in the upper tail)."""
    n, s = _check_n(d_h), _check_s(s)
    x = np.asarray(x, dtype=float)
    tail = _sf_unit(np.abs(x).ravel() / s, n).reshape(x.shape)
    return np.where(x >= 0, tail, 1.0 - tail)


def cdf(x, d_h: int, s: float = 1.0) -> np.ndarray:
    """P(X ≤ x) (float64, relative accuracy kept in the lower tail)."""
    n, s = _check_n(d_h), _check_s(s)
    x = np.asarray(x, dtype=float)
    tail = _sf_unit(np.abs(x).ravel() / s, n).reshape(x.shape)
    return np.where(x <= 0, tail, 1.0 - tail)


def _t_grid(n: int, h: float = 1.0 / 64):
    """Grid in t = ln y covering y ∈ [e^{-45}, y_max] (y_max beyond the last relevant tail)."""
    y_max = 60.0 + 1.5 * n + 16.0 * math.sqrt(n)
    t = np.arange(-45.0, math.log(y_max) + h, h)
    return t, np.exp(t), h


def entropy(d_h: int, s: float = 1.0) -> float:
    """Differential entropy −∫ f ln f (nats), float64: H(s) = H(1) + ln s."""
    n, s = _check_n(d_h), _check_s(s)
    t, y, h = _t_grid(n)
    lf = _logpdf_unit(y, n)
    return float(-2.0 * h * np.sum(np.exp(lf) * lf * y)) + math.log(s)


def _kl_density(lf: np.ndarray, lphi: np.ndarray) -> np.ndarray:
    """φ (r ln r − r + 1) with r = f/φ = e^δ, from ln f and ln φ: a Taylor series in δ for
    |δ| < 0.1 (no cancellation), f (δ − 1) + φ otherwise (no overflow where φ underflows)."""
    delta = lf - lphi
    small = np.abs(delta) < 0.1
    d = np.where(small, delta, 0.0)
    series = np.zeros_like(d)
    term = d.copy()                        # δ^k / k!, from k = 1
    for k in range(2, 16):                 # Σ_{k≥2} (k−1) δ^k / k!
        term = term * d / k
        series += (k - 1) * term
    direct = np.exp(lf) * (delta - 1.0) + np.exp(lphi)
    return np.where(small, np.exp(lphi) * series, direct)


def kl_to_gaussian(d_h: int) -> float:
    """KL(f ‖ N(0, d_h s²)) in nats (scale-free), float64, as ∫ φ (r ln r − r + 1), r = f/φ."""
    n = _check_n(d_h)
    t, y, h = _t_grid(n)
    lphi = -0.5 * math.log(2.0 * math.pi * n) - y * y / (2.0 * n)
    return float(2.0 * h * np.sum(_kl_density(_logpdf_unit(y, n), lphi) * y))


# -------------------------------------------------------------------------------- mp path

def _logpdf_unit_mp(y, n: int):
    """ln f at s = 1 (mp) for y ≥ 0."""
    nu = mp.mpf(n - 1) / 2
    if y == 0:
        if n == 1:
            return mp.inf
        return mp.loggamma(nu) - mp.log(2) - mp.log(mp.pi) / 2 - mp.loggamma(nu + mp.mpf(1) / 2)
    if nu >= 60:
        with mp.workdps(mp.mp.dps + len(str(n)) + 3):
            z = y / nu
            q = mp.sqrt(1 + z * z)
            series = _bessel.debye_series_mp(nu, 1 / q, mp.eps * 2**-8)
            if series is not None:
                r = mp.loggamma(nu + mp.mpf(1) / 2) - nu * mp.log(nu) + nu - mp.log(2 * mp.pi) / 2
                e = 1 - q + mp.log((1 + q) / 2)
                return (-mp.log(2 * mp.pi * (n - 1)) / 2 + nu * e - mp.log(1 + z * z) / 4
                        + mp.log(series) - r)
    k = _bessel.besselk_mp(nu, y)
    return (nu * mp.log(y) + mp.log(k) - mp.log(mp.pi) / 2 - nu * mp.log(2)
            - mp.loggamma(nu + mp.mpf(1) / 2))


def logpdf_mp(x, d_h: int, s=1, dps: int | None = None):
    """ln f(x) as mpf."""
    n = _check_n(d_h)
    _check_s(s)
    with working_dps(dps):
        s = mp.mpf(s)
        return _logpdf_unit_mp(abs(mp.mpf(x)) / s, n) - mp.log(s)


def pdf_mp(x, d_h: int, s=1, dps: int | None = None):
    """f(x) as mpf."""
    with working_dps(dps) as target:
        return mp.exp(logpdf_mp(x, d_h, s, dps=target))


def _breaks(n: int, start=0.0):
    """Quadrature break points from ``start`` (s = 1) to a finite end beyond which f is below
    f(start)·10^{−(dps+20)} (f decreases on y > 0; located with the float log-density)."""
    drop = math.log(10.0) * (mp.mp.dps + 20)
    start_f = float(start)
    level = float(_logpdf_unit(np.array([start_f if start_f > 0 else 1e-300]), n)[0])
    level = min(level, float(_logpdf_unit(np.array([1e-300]), n)[0]))
    step = max(1.0, math.sqrt(n))
    end = start_f + step
    while float(_logpdf_unit(np.array([end]), n)[0]) > level - drop:
        end = start_f + 2.0 * (end - start_f)
    sd = mp.sqrt(n)
    pts = [mp.mpf(start) + k * sd for k in (0, 1, 4, 16) if start_f + k * float(sd) < end]
    return pts + [mp.mpf(end)]


def cdf_mp(x, d_h: int, s=1, dps: int | None = None):
    """P(X ≤ x) as mpf (the smaller tail integrated directly by mp.quad)."""
    n = _check_n(d_h)
    _check_s(s)
    with working_dps(dps):
        x = mp.mpf(x) / mp.mpf(s)
        y = abs(x)
        if y == 0:
            return mp.mpf(1) / 2
        # scaled by f(y): mp.quad's tolerance is absolute, and deep tails are tiny
        ly = _logpdf_unit_mp(y, n)
        tail = mp.quad(lambda t: mp.exp(_logpdf_unit_mp(t, n) - ly), _breaks(n, y)) * mp.exp(ly)
        return tail if x <= 0 else 1 - tail


def entropy_mp(d_h: int, s=1, dps: int | None = None):
    """Differential entropy −∫ f ln f as mpf."""
    n = _check_n(d_h)
    _check_s(s)
    with working_dps(dps):
        def g(t):
            lf = _logpdf_unit_mp(t, n)
            return -mp.exp(lf) * lf if lf != mp.inf else mp.mpf(0)

        return 2 * mp.quad(g, _breaks(n)) + mp.log(mp.mpf(s))


def kl_to_gaussian_mp(d_h: int, dps: int | None = None):
    """KL(f ‖ N(0, d_h s²)) = ∫ f ln(f/φ) as mpf (scale-free); extra digits cover the
    cancellation in the integrand when the result is O(1/n²)."""
    n = _check_n(d_h)
    with working_dps(dps, guard=10 + 2 * len(str(n))):
        lnorm = -mp.log(2 * mp.pi * n) / 2

        def g(t):
            lf = _logpdf_unit_mp(t, n)
            if lf == mp.inf:
                return mp.mpf(0)
            return mp.exp(lf) * (lf - lnorm + t * t / (2 * n))

        return 2 * mp.quad(g, _breaks(n))
