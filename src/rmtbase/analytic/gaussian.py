"""Gaussian and half-normal references (entropy ½ ln(2πeσ²) nats, Cover & Thomas Thm 8.4.1), and
the quarter-circle law of the singular values s/(σ√d) of a d × d i.i.d. N(0, σ²) matrix
(Marchenko & Pastur 1967, c = 1)."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np

from ..errors import InputError, check_positive
from ._numeric import check_probability, working_dps

__all__ = [
    "entropy", "entropy_mp", "halfnormal_mean", "halfnormal_sd", "halfnormal_entropy",
    "halfnormal_mp", "quarter_circle_density", "quarter_circle_cdf", "quarter_circle_quantile",
    "quarter_circle_cdf_mp", "quarter_circle_moment",
]


def entropy(sigma=1.0):
    """½ ln(2πeσ²) (float64; vectorised over σ)."""
    s = np.asarray(sigma, dtype=float)
    if np.any(~(s > 0)):
        raise InputError("sigma must be > 0")
    out = 0.5 * np.log(2 * np.pi * np.e) + np.log(s)
    return float(out) if out.ndim == 0 else out


def entropy_mp(sigma=1, dps: int | None = None):
    """½ ln(2πeσ²) as mpf."""
    check_positive(sigma, "sigma")
    with working_dps(dps):
        return (mp.log(2 * mp.pi) + 1) / 2 + mp.log(mp.mpf(sigma))


def halfnormal_mean(sigma: float = 1.0) -> float:
    """E|w| = σ√(2/π)."""
    return check_positive(sigma, "sigma") * math.sqrt(2 / math.pi)


def halfnormal_sd(sigma: float = 1.0) -> float:
    """sd |w| = σ√(1 − 2/π)."""
    return check_positive(sigma, "sigma") * math.sqrt(1 - 2 / math.pi)


def halfnormal_entropy(sigma: float = 1.0) -> float:
    """Entropy of |w|: ½ ln(πeσ²/2) = Gaussian entropy − ln 2."""
    return 0.5 * math.log(math.pi * math.e / 2) + math.log(check_positive(sigma, "sigma"))


def halfnormal_mp(sigma=1, dps: int | None = None) -> dict:
    """{"mean", "sd", "entropy"} of the half-normal as mpf."""
    check_positive(sigma, "sigma")
    with working_dps(dps):
        s = mp.mpf(sigma)
        return {"mean": s * mp.sqrt(2 / mp.pi), "sd": s * mp.sqrt(1 - 2 / mp.pi),
                "entropy": (mp.log(mp.pi / 2) + 1) / 2 + mp.log(s)}


def quarter_circle_density(s) -> np.ndarray:
    """√(4 − s²)/π on [0, 2] (singular values of a d × d Gaussian over σ√d)."""
    s = np.asarray(s, dtype=float)
    inside = (s >= 0) & (s <= 2)
    return np.where(inside, np.sqrt(np.clip(4 - s * s, 0, None)) / np.pi, 0.0)


def quarter_circle_cdf(s) -> np.ndarray:
    """(s√(4 − s²)/2 + 2 arcsin(s/2))/π, clipped to [0, 1] outside [0, 2]."""
    s = np.clip(np.asarray(s, dtype=float), 0.0, 2.0)
    return (0.5 * s * np.sqrt(4 - s * s) + 2 * np.arcsin(0.5 * s)) / np.pi


def quarter_circle_cdf_mp(s, dps: int | None = None):
    """Quarter-circle CDF as mpf."""
    with working_dps(dps):
        s = min(max(mp.mpf(s), 0), 2)
        return (s * mp.sqrt(4 - s * s) / 2 + 2 * mp.asin(s / 2)) / mp.pi


def quarter_circle_quantile(q) -> np.ndarray:
    """Inverse quarter-circle CDF (vectorised bisection)."""
    q = check_probability(q)
    lo, hi = np.zeros(q.shape), np.full(q.shape, 2.0)
    for _ in range(64):
        mid = 0.5 * (lo + hi)
        below = quarter_circle_cdf(mid) < q
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return hi


def quarter_circle_moment(k: int) -> int:
    """E s^{2k} = Catalan(k) = C(2k, k)/(k+1)."""
    k = int(k)
    if k < 0:
        raise InputError(f"k must be ≥ 0, got {k}")
    return math.comb(2 * k, k) // (k + 1)
