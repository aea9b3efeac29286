"""Exact finite-d moments of product networks: traces, element kurtosis, Lyapunov exponents.

Ensembles of :mod:`rmtbase.analytic.product_network`; exact in the arguments' arithmetic
(ints/Fractions → Fractions, floats → floats, mpf → mpf).

Traces (Wick, one layer at a time; W i.i.d. N(0, s²), n rows, A symmetric):
E tr(W A Wᵀ)² = s⁴ n[(tr A)² + (n + 1) tr A²], E (tr W A Wᵀ)² = s⁴[n² (tr A)² + 2n tr A²], so
X = E (tr MMᵀ)², Y = E tr (MMᵀ)² recur from X_0 = d_0², Y_0 = d_0: Ginibre X' = s⁴(n² X + 2n Y),
Y' = s⁴ n (X + (n+1) Y); residual (h = 2G + G²) Y' = (1 + h(d+1)/d) Y + (h/d) X,
X' = (1 + G)² X + (2h/d) Y.

Element kurtosis: one column c' = W c or c + W c; for an off-diagonal entry a and r² = ‖c‖²,
(E a², E r²) and (E a⁴, E a² r², E r⁴) recur linearly (``docs/product-networks.md``). It is the
ensemble's marginal excess kurtosis, O(L/d) (one matrix's sample kurtosis is lower).

Lyapunov exponents of square Ginibre products (Newman 1986; Forrester 2013): with
W_l Q_{l−1} = Q_l R_l, R_l,ii² ~ G/d · χ²_{d−i+1} independently, so (1/L) Σ_l ln |R_l,ii| has
mean μ_i = ½[ln(2G/d) + ψ((d − i + 1)/2)] at every L."""

from __future__ import annotations

from fractions import Fraction

import mpmath as mp
import numpy as np
from scipy.special import digamma

from ..errors import InputError, check_positive_int
from ._network_kind import check_gain, check_kind, check_widths
from ._numeric import working_dps

__all__ = [
    "expected_trace", "expected_trace_sq", "trace_moments", "element_moments",
    "element_kurtosis", "stream_kurtosis", "kurtosis_curve", "depth_from_kurtosis",
    "lyapunov_ginibre", "lyapunov_ginibre_mp", "lyapunov_gaussian", "lyapunov_gaussian_mp",
]


def _num(gain):
    """The arithmetic of ``gain``: Fraction for int/Fraction/str, else the type itself."""
    if isinstance(gain, int | Fraction):
        return Fraction(gain)
    if isinstance(gain, str):
        return Fraction(gain)
    return gain


def _setup(kind, d, depth, gain, widths):
    kind = check_kind(kind)
    depth = check_positive_int(depth, "depth")
    check_gain(gain)
    widths = check_widths(kind, depth, widths)
    if widths is None:
        d = check_positive_int(d, "d")
        widths = (d,) * (depth + 1)
    elif d is not None and int(d) != widths[0]:
        raise InputError(f"d={d} disagrees with widths[0]={widths[0]}")
    return kind, depth, _num(gain), widths


def trace_moments(kind: str, d, depth: int, gain=1, widths=None) -> tuple:
    """(E tr MᵀM, E tr (MᵀM)², E (tr MᵀM)²) at finite width, exactly (see module docstring)."""
    kind, depth, g, widths = _setup(kind, d, depth, gain, widths)
    one = g / g
    x, y = one * widths[0] ** 2, one * widths[0]
    for l in range(1, depth + 1):
        if kind == "ginibre":
            s2, n = g / widths[l - 1], widths[l]
            x, y = s2 * s2 * (n * n * x + 2 * n * y), s2 * s2 * n * (x + (n + 1) * y)
        else:
            dd, h = widths[0], 2 * g + g * g
            x, y = (1 + g) ** 2 * x + 2 * h * y / dd, (1 + h * (dd + 1) / dd) * y + h * x / dd
    mean = g**depth * widths[-1] if kind == "ginibre" else (1 + g) ** depth * widths[0]
    return mean, y, x


def expected_trace(kind: str, d, depth: int, gain=1, widths=None):
    """E tr(M_LᵀM_L): G^L d_L (Ginibre) or (1 + G)^L d (residual), exactly."""
    return trace_moments(kind, d, depth, gain, widths)[0]


def expected_trace_sq(kind: str, d, depth: int, gain=1, widths=None):
    """E tr((M_LᵀM_L)²) exactly at finite width."""
    return trace_moments(kind, d, depth, gain, widths)[1]


def _element_path(kind, g, widths):
    """(E a², E a⁴, E r², E r⁴) after each layer l = 1..L (generator; module docstring)."""
    one = g / g
    a2, r2 = 0 * one, one
    a4, a2r2, r4 = 0 * one, 0 * one, one
    for l in range(1, len(widths)):
        dd = widths[l - 1] if kind == "ginibre" else widths[0]
        s2 = g / dd
        if kind == "ginibre":
            n = widths[l]
            a2, r2 = s2 * r2, s2 * n * r2
            a4, a2r2, r4 = 3 * s2 * s2 * r4, 0 * one, s2 * s2 * n * (n + 2) * r4
        else:
            a4, a2r2, r4 = (a4 + 6 * s2 * a2r2 + 3 * s2 * s2 * r4,
                            (1 + s2 * (dd + 4)) * a2r2 + s2 * (1 + s2 * (dd + 2)) * r4,
                            ((1 + s2 * dd) ** 2 + 2 * dd * s2 * s2 + 4 * s2) * r4)
            a2, r2 = a2 + s2 * r2, (1 + s2 * dd) * r2
        yield a2, a4, r2, r4


def element_moments(kind: str, d, depth: int, gain=1, widths=None) -> tuple:
    """(E a², E a⁴) of an off-diagonal entry a of M_L, exactly (see module docstring)."""
    kind, depth, g, widths = _setup(kind, d, depth, gain, widths)
    *_, last = _element_path(kind, g, widths)
    return last[:2]


def element_kurtosis(kind: str, d, depth: int, gain=1, widths=None):
    """Excess kurtosis E a⁴/(E a²)² − 3 of an off-diagonal entry of M_L, exactly."""
    a2, a4 = element_moments(kind, d, depth, gain, widths)
    return a4 / (a2 * a2) - 3


def stream_kurtosis(kind: str, d, depth: int, gain=1):
    """Excess kurtosis of an entry of the residual stream y = M_L x, x ~ N(0, I_d), exactly (square
    layers): 3 E r⁴/(E r²)² − 3, r the norm of a row of M (distributed as a column)."""
    kind, depth, g, widths = _setup(kind, d, depth, gain, None)
    *_, (_, _, r2, r4) = _element_path(kind, g, widths)
    return 3 * r4 / (r2 * r2) - 3


def kurtosis_curve(kind: str, d: int, depths, gain: float = 1.0, *, of: str = "element"):
    """:func:`element_kurtosis` (``of="element"``) or :func:`stream_kurtosis` (``of="stream"``) at
    each of ``depths`` (square layers), one float64 pass of the recursion."""
    if of not in ("element", "stream"):
        raise InputError(f"of must be 'element' or 'stream', got {of!r}")
    depths = [check_positive_int(int(L), "depth") for L in np.atleast_1d(depths)]
    if not depths:
        return np.zeros(0)
    kind, _, g, widths = _setup(kind, d, max(depths), float(check_gain(gain)), None)
    if of == "element":
        path = [a4 / (a2 * a2) - 3 for a2, a4, _, _ in _element_path(kind, g, widths)]
    else:
        path = [3 * r4 / (r2 * r2) - 3 for _, _, r2, r4 in _element_path(kind, g, widths)]
    return np.array([path[L - 1] for L in depths], dtype=float)


def depth_from_kurtosis(kurtosis: float, d: int, *, kind: str = "residual", gain: float = 1.0,
                        max_depth: int = 200) -> float:
    """Depth L (real, interpolated) whose analytic element kurtosis equals ``kurtosis`` at width d;
    NaN outside the curve over 1..max_depth. The curve increases in L; for one matrix's sample
    kurtosis this underestimates L once L/d is not small (module docstring)."""
    k = float(kurtosis)
    depths = np.arange(1, check_positive_int(max_depth, "max_depth") + 1)
    curve = kurtosis_curve(kind, d, depths, gain)
    if not np.isfinite(k) or k < curve[0] or k > curve[-1]:
        return float("nan")
    return float(np.interp(k, curve, depths))


def lyapunov_ginibre(d: int, gain: float = 1.0) -> np.ndarray:
    """Exact finite-d Lyapunov exponents μ_1 ≥ … ≥ μ_d of square Ginibre products (float64)."""
    d = check_positive_int(d, "d")
    g = float(check_gain(gain))
    return 0.5 * (np.log(2.0 * g / d) + digamma((d - np.arange(1, d + 1) + 1) / 2.0))


def lyapunov_ginibre_mp(d: int, gain=1, dps: int | None = None) -> list:
    """:func:`lyapunov_ginibre` as mpf."""
    d = check_positive_int(d, "d")
    check_gain(gain)
    with working_dps(dps):
        g = mp.mpf(gain)
        return [(mp.log(2 * g / d) + mp.digamma(mp.mpf(d - i + 1) / 2)) / 2 for i in range(1, d + 1)]


#: Aliases under the kind's other spelling, "gaussian".
lyapunov_gaussian, lyapunov_gaussian_mp = lyapunov_ginibre, lyapunov_ginibre_mp
