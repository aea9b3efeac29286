"""Limit Lyapunov exponents of product networks (square layers; d → ∞, then L → ∞).

As :mod:`.product_network` (W_l entries N(0, G/d)); μ = ln s / L of M_L's singular values. The
law of x^{1/L} under ν^{⊠L} tends to the quantile function t ↦ 1/S(t − 1) (Tucci 2010;
Haagerup & Möller 2013), so at rank fraction t from the bottom μ(t) = −½ ln S_1(t − 1)."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np

from ..errors import InputError
from ._network_kind import check_gain, check_kind
from ._numeric import working_dps


def lyapunov_quantile(t, kind: str, gain: float = 1.0) -> np.ndarray:
    """Limit Lyapunov exponent μ(t) = −½ ln S_1(t − 1) at rank fraction t ∈ [0, 1] from the bottom
    (square layers; d → ∞ then L → ∞): Ginibre ½ ln(Gt), residual ½ ln[(1 − G + 2Gt +
    √((1−G)² + 4Gt))/2]. −inf where the exponent diverges (t = 0; residual with G ≥ 1)."""
    kind, gain = check_kind(kind), float(check_gain(gain))
    t = np.asarray(t, dtype=float)
    if np.any(~(t >= 0) | ~(t <= 1)):
        raise InputError("rank fractions t must lie in [0, 1]")
    with np.errstate(divide="ignore"):
        if kind == "ginibre":
            return 0.5 * np.log(gain * t)
        q = 1.0 - gain
        return 0.5 * np.log((q + 2 * gain * t + np.sqrt(q * q + 4 * gain * t)) / 2)


def _residual_mean(g, log):
    """∫_0^1 μ(t) dt for the residual kind = ln Δ(1 + c), c circular of variance G (Fuglede–Kadison;
    Haagerup & Larsen 2000): 0 for G ≤ 1, ½ ln G − ½ + 1/(2G) above."""
    return 0 * g if g <= 1 else log(g) / 2 - (1 - 1 / g) / 2


def lyapunov_limits(kind: str, gain: float = 1.0) -> dict:
    """max, mean and min of the limit Lyapunov exponents (see :func:`lyapunov_quantile`)."""
    kind, g = check_kind(kind), float(check_gain(gain))
    if kind == "ginibre":
        return {"max": 0.5 * math.log(g), "mean": 0.5 * (math.log(g) - 1), "min": -math.inf}
    return {"max": 0.5 * math.log1p(g), "mean": _residual_mean(g, math.log),
            "min": 0.5 * math.log1p(-g) if g < 1 else -math.inf}


def lyapunov_limits_mp(kind: str, gain=1, dps: int | None = None) -> dict:
    """:func:`lyapunov_limits` as mpf."""
    kind = check_kind(kind)
    check_gain(gain)
    with working_dps(dps):
        g = mp.mpf(gain)
        if kind == "ginibre":
            return {"max": mp.log(g) / 2, "mean": (mp.log(g) - 1) / 2, "min": mp.ninf}
        return {"max": mp.log(1 + g) / 2, "mean": _residual_mean(g, mp.log),
                "min": mp.log(1 - g) / 2 if g < 1 else mp.ninf}
