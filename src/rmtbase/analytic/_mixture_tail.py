"""Upper tail P(X > y) of the unit symmetric variance-gamma law (s = 1), float64.

X | V ~ N(0, 2V), V ~ Gamma(n/2, 1), so sf(y) = E_V[Φc(y/√(2V))], by the trapezoid rule in
ln V on the window where the concave log-integrand is within 40 of its maximum."""

from __future__ import annotations

import math

import numpy as np
from scipy import special


def _sf_unit(y: np.ndarray, n: int, nodes: int = 600) -> np.ndarray:
    """P(X > y), s = 1, y ≥ 0: trapezoid in u = ln V of exp(h), h = a u − e^u − lnΓ(a) + ln Φc(w),
    w = y e^{−u/2}/√2 (h is strictly concave), on the window where h > max h − 40."""
    a = 0.5 * n
    y = np.atleast_1d(np.asarray(y, dtype=float))
    out = np.full(y.shape, 0.5)
    pos = y > 0
    if not pos.any():
        return out
    yp = y[pos]
    lga = special.gammaln(a)

    def h(u):
        yy = yp.reshape(yp.shape + (1,) * (np.ndim(u) - 1))
        return a * u - np.exp(u) - lga + special.log_ndtr(-yy * np.exp(-0.5 * u) / math.sqrt(2.0))

    def dh(u):
        w = yp * np.exp(-0.5 * u) / math.sqrt(2.0)
        with np.errstate(over="ignore"):   # Mills ratio ~ w at huge w: +inf·w is still > 0
            mills = np.exp(-0.5 * w * w - 0.5 * math.log(2 * math.pi) - special.log_ndtr(-w))
        return a - np.exp(u) + 0.5 * mills * w

    def bisect(fun, lo, hi, iters):
        for _ in range(iters):
            mid = 0.5 * (lo + hi)
            up = fun(mid) > 0
            lo, hi = np.where(up, mid, lo), np.where(up, hi, mid)
        return 0.5 * (lo + hi)

    u_star = bisect(dh, np.full(yp.shape, -120.0), np.full(yp.shape, 120.0), 90)
    h_star = h(u_star)
    # bisect() wants a function that is positive at the left end and negative at the right
    u_lo = bisect(lambda u: -(h(u) - h_star + 40.0), u_star - 200.0, u_star, 60)
    u_hi = bisect(lambda u: h(u) - h_star + 40.0, u_star, u_star + 60.0, 60)
    grid = np.linspace(0.0, 1.0, nodes)
    u = u_lo[:, None] + (u_hi - u_lo)[:, None] * grid[None, :]
    vals = np.exp(h(u) - h_star[:, None])
    step = (u_hi - u_lo) / (nodes - 1)
    total = step * (vals.sum(axis=1) - 0.5 * (vals[:, 0] + vals[:, -1]))
    out[pos] = np.exp(h_star) * total
    return out
