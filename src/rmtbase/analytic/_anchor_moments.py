"""Moments of the continuum Weibull probability-plot fit to a half-normal, to any precision.

For :mod:`rmtbase.analytic.weibull`. x = |w|/σ, φ(x) = √(2/π) e^{−x²/2}, x ∈ [lo, hi] =
√2 erfinv([a, b]), g = ln x, Y = ln(−ln(1 − F)) = ln W(x), W(x) = −ln erfc(x/√2):

- ∫ gᵏ dF (k = 1, 2): the series of e^{−x²/2} with ∫_0^X x^m lnᵏx dx in closed form
  (positive terms); over [0, ∞) −(γ + ln 2)/2 and π²/8 + (γ + ln 2)²/4.
- ∫_a^b Y dF = (1 − a) ln u_a + E₁(u_a) − (1 − b) ln u_b − E₁(u_b), u = −ln(1 − F).
- ∫ g Y dF = ∫ s Y(eˢ) φ(eˢ) eˢ ds, s = ln x, by Gauss–Legendre panels (:mod:`._gauss_legendre`;
  analytic in a strip, about 0.9 N nodes for N digits); below x_c = 10⁻¹² the power series of
  ln(W/x); the Gaussian tail cut at x_max, where φ < 10^{−N−8}."""

from __future__ import annotations

import contextvars
import functools

import mpmath as mp

from ._erfcx import Z_MIN, erfcx, grid_bits
from ._gauss_legendre import integrate, legendre_rule

__all__ = ["moments", "planned_panels", "planned_evaluations"]

#: Below this x the cross moment uses the power series (N/12 + 8 terms suffice).
_X_SERIES = "1e-12"
#: Fixed panel break points in x (besides the trim's own ends and the 5 % / 95 % quantiles).
_BREAKS = ("1e-12", "3.3546262790251185e-4", "6", "16", "24", "36", "52")


def _n_nodes(digits: int) -> int:
    """Nodes per Gauss–Legendre panel for ``digits`` correct digits (the slowest panels
    gain ≥ 1.1 digits per node; multiples of 16 so that few rules are built)."""
    return 16 * -(-(int(0.9 * digits) + 24) // 16)


def _bounds(a, b):
    a, b = mp.mpf(a), mp.mpf(b)
    lo = mp.mpf(0) if a == 0 else mp.sqrt(2) * mp.erfinv(a)
    hi = mp.inf if b == 1 else mp.sqrt(2) * mp.erfinv(b)
    return a, b, lo, hi


def _log_moments(x):
    """(∫_0^x ln t φ dt, ∫_0^x ln²t φ dt) for finite x > 0, by the series of e^{−t²/2}."""
    if x == mp.inf:
        c = (mp.euler + mp.log(2)) / 2
        return -c, mp.pi**2 / 8 + c * c
    with mp.workdps(mp.mp.dps + int(x * x / 4.6) + 5):   # terms up to e^{x²/2}
        return _log_moments_series(x)


def _log_moments_series(x):
    L, eps = mp.log(x), mp.eps * 2**-20
    m1 = m2 = mp.mpf(0)
    term, j = x, 0                          # term = (−1)^j x^(2j+1) / (2^j j!)
    while True:
        m = 2 * j + 1
        m1 += term * (L - mp.mpf(1) / m) / m
        m2 += term * (L * L - 2 * L / m + mp.mpf(2) / (m * m)) / m
        j += 1
        term = -term * x * x / (2 * j)
        if abs(term) < eps and j > 2:
            break
    r = mp.sqrt(2 / mp.pi)
    return +(r * m1), +(r * m2)


def _y_integral(a, b):
    """∫_a^b ln(−ln(1 − F)) dF in closed form (exponential integral E₁)."""
    def part(f):
        if f == 0:
            return -mp.euler                # lim_{u→0} ln u + E₁(u)
        if f == 1:
            return mp.mpf(0)
        u = -mp.log1p(-f)
        return (1 - f) * mp.log(u) + mp.e1(u)
    return part(a) - part(b)


def _w(x, bits_grid: int):
    """W(x) = −ln erfc(x/√2) = −ln P(|Z| > x) (for z ≥ 4 as z² − ln erfcx z, see :mod:`._erfcx`)."""
    z = x / mp.sqrt(2)
    if z < 1:
        return -mp.log1p(-mp.erf(z))
    if z < Z_MIN:
        return -mp.log(mp.erfc(z))
    return z * z - mp.log(erfcx(z, bits_grid))


def _integrand(dps: int):
    """s ↦ s Y(eˢ) e^{s − e^{2s}/2} (the cross moment in s = ln x, without √(2/π))."""
    bits_grid = grid_bits(dps)

    def f(s):
        x = mp.exp(s)
        return s * mp.log(_w(x, bits_grid)) * mp.exp(s - x * x / 2)
    return f


def _series_log(a: list) -> list:
    """Power series of ln(a(x)) for a[0] = 1 (same length)."""
    b = [mp.mpf(0)] * len(a)
    for k in range(1, len(a)):
        b[k] = a[k] - sum(j * b[j] * a[k - j] for j in range(1, k)) / k
    return b


def _near_zero(xc):
    """∫_0^{xc} ln x · Y(x) φ(x) dx for tiny xc: Y = ln x + h(x), h·e^{−x²/2} = Σ cₖ xᵏ."""
    n = int(mp.mp.dps / 12) + 8
    r = mp.sqrt(2 / mp.pi)
    erfc = [mp.mpf(1)] + [mp.mpf(0)] * n        # erfc(x/√2) = 1 − r Σ (−1)^j x^(2j+1)/(2^j j!(2j+1))
    t = r
    for j in range(0, (n + 1) // 2 + 1):
        if 2 * j + 1 <= n:
            erfc[2 * j + 1] = -t / (2 * j + 1)
        t = -t / (2 * (j + 1))
    w = [-c for c in _series_log(erfc)]          # W = −ln erfc, W[0] = 0
    q = [c / w[1] for c in w[1:]]                # W/(x W₁), q[0] = 1
    h = _series_log(q[:n])
    h[0] = mp.log(w[1])
    gauss = [mp.mpf(0)] * n                      # e^{−x²/2}
    t = mp.mpf(1)
    for j in range(0, (n + 1) // 2):
        gauss[2 * j] = t
        t = -t / (2 * (j + 1))
    lx = mp.log(xc)
    total, power = mp.mpf(0), xc                 # Σ cₖ ∫_0^{xc} xᵏ ln x dx
    for k in range(n):
        ck = sum(h[i] * gauss[k - i] for i in range(0, k + 1, 1) if (k - i) % 2 == 0)
        total += ck * power * (lx / (k + 1) - mp.mpf(1) / (k + 1) ** 2)
        power *= xc
    return _log_moments(xc)[1] + r * total


@functools.lru_cache(maxsize=8)
def _breaks(dps: int) -> tuple:
    with mp.workdps(dps):
        fixed = [mp.mpf(t) for t in _BREAKS]
        return tuple(fixed + [mp.sqrt(2) * mp.erfinv(mp.mpf(f)) for f in ("0.05", "0.95")])


def _panels(lo, hi, dps: int) -> list[tuple]:
    """Panel ends in x covering [max(lo, x_c), min(hi, x_max)] (see module docstring)."""
    x_max = mp.sqrt(2 * (dps + 8) * mp.log(10))
    start, stop = max(lo, mp.mpf(_X_SERIES)), min(hi, x_max)
    if start >= stop:
        return []
    margin = 1 + mp.mpf(1) / 64
    inner = sorted(p for p in _breaks(dps) if start * margin < p < stop / margin)
    ends = [start, *inner, stop]
    return list(zip(ends[:-1], ends[1:], strict=True))


def _panel_digits(p, dps: int) -> int:
    """Digits a panel starting at x = p needs: φ ≤ 10^{−k} beyond p."""
    return max(30, min(dps, dps - int(p * p / 2 / mp.log(10))))


#: Progress callback of the running :func:`moments` call (k integrand evaluations done).
_TICK: contextvars.ContextVar = contextvars.ContextVar("anchor_tick", default=None)


@functools.lru_cache(maxsize=64)
def _panel(p, q, dps: int):
    """∫_p^q ln x · Y(x) φ(x) dx (x-ends as mpf), computed in s = ln x at the precision
    the panel's size needs (cached: the 5–95 % panel serves both wider trims)."""
    # one rule for all panels: the Gauss–Legendre error is set by the integrand's size on the
    # Bernstein ellipse, which for a tail panel reaches far towards the (larger) bulk, so a
    # tail panel keeps all the nodes; only its working precision shrinks with its size
    rule = legendre_rule(_n_nodes(dps), dps + 10)
    with mp.workdps(_panel_digits(p, dps) + 10):
        val = mp.sqrt(2 / mp.pi) * integrate(_integrand(dps), mp.log(p), mp.log(q), rule)
    tick = _TICK.get()
    if tick:
        tick(_n_nodes(dps))
    return val


def planned_panels(a, b, dps: int) -> set:
    """Keys ``(p, q, dps)`` of the quadrature panels :func:`moments` needs at ``dps`` digits
    for the trim [a, b]; ``planned_evaluations`` of their union is the work to expect."""
    with mp.workdps(dps):
        _, _, lo, hi = _bounds(a, b)
        return {(p, q, dps) for p, q in _panels(lo, hi, dps)}


def planned_evaluations(panels) -> int:
    """Integrand evaluations for a set of panel keys from :func:`planned_panels`."""
    return sum(_n_nodes(dps) for _p, _q, dps in panels)


def moments(a, b, tick=None):
    """(ḡ, Ȳ, Var g, Cov(g, Y)) over F uniform on [a, b] at the current precision;
    ``tick(k)`` is called after each new quadrature panel with its k integrand evaluations."""
    a, b, lo, hi = _bounds(a, b)
    dps = mp.mp.dps
    g1_lo, g2_lo = (mp.mpf(0), mp.mpf(0)) if lo == 0 else _log_moments(lo)
    g1_hi, g2_hi = _log_moments(hi)
    width = b - a
    g = (g1_hi - g1_lo) / width
    var = (g2_hi - g2_lo) / width - g * g
    y = _y_integral(a, b) / width
    cross = mp.mpf(0) if lo > 0 else _near_zero(mp.mpf(_X_SERIES))
    token = _TICK.set(tick)
    try:
        for p, q in _panels(lo, hi, dps):
            cross += _panel(p, q, dps)
    finally:
        _TICK.reset(token)
    return g, y, var, cross / width - g * y
