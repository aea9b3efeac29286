"""A tail count's interval at N draws from the first n, claiming it reaches
:data:`~rmtbase.decision.tails.MIN_EXCEEDANCES` where the exact error stays within level.

p at N is (1 + T)/(1 + N) for T ≥ 10, else a GPD estimate.
:func:`~rmtbase.scoring.stopping.joint.count_bounds` brackets T from the first n's count K by
[lo(K), hi(K)]; the claim takes max(lo(K), 10) for K ≥ k₀.
With K ~ Binom(n, q), R = T − K ~ Binom(N − n, q) independent, the exact error is

    E(q) = Σ_k Binom(k; n, q) · [P(R < L(k) − k) + P(R > hi(k) − k)],
    L(k) = max(lo(k), 10) for k ≥ k₀, else lo(k);

:func:`claim_start` returns the least k₀ ≤ 9 with sup_q E(q) ≤ level (None if none), on a log
grid (:data:`_GRID`, margin :data:`_MARGIN`), bounded analytically outside [q_lo, q_hi].
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy import stats as _st

from ...decision.tails import MIN_EXCEEDANCES
from .joint import count_bounds

#: Points of the log grid of q on which the claim's interval error is computed.
_GRID = 300
#: Relative room left below the level for E between grid points (module docstring).
_MARGIN = 0.02
#: Relative size of what is left out of the grid's q range (module docstring).
_NEGLIGIBLE = 1e-12


def count_interval(k, n: int, n_final: int, level: float):
    """(lo, hi) of a tail count at ``n_final`` draws given ``k`` of the first ``n``:
    :func:`~rmtbase.scoring.stopping.joint.count_bounds` at ``level``, its lower end raised to
    MIN_EXCEEDANCES where k ≥ :func:`claim_start` (module docstring)."""
    k = np.asarray(k, dtype=np.float64)
    lo, hi = count_bounds(k, k, n, n_final, level)
    if int(n) >= int(n_final) or not np.any((lo < MIN_EXCEEDANCES) & (k > 0)):
        return lo, hi
    k0 = claim_start(int(n), int(n_final), float(level))
    if k0 is None:
        return lo, hi
    return np.where(k >= k0, np.maximum(lo, MIN_EXCEEDANCES), lo), hi


def _q_range(n: int, m: int, k_low: int, level: float) -> tuple[float, float]:
    """[q_lo, q_hi]: outside it P(K ≥ k_low) (below) or P(R ≤ 9) (above) is at most
    10⁻¹² · level (K ~ Binom(n, q), R ~ Binom(m, q)); where no q of the grid is so (fewer
    than 10 draws to come: P(R ≤ 9) = 1), the grid's end."""
    tiny = _NEGLIGIBLE * level
    grid = np.logspace(-30, 0, 6001)[:-1]
    below = np.flatnonzero(_st.binom.sf(k_low - 1, n, grid) <= tiny)
    above = np.flatnonzero(_st.binom.cdf(MIN_EXCEEDANCES - 1, m, grid) <= tiny)
    return (float(grid[below[-1] if below.size else 0]),
            float(grid[above[0] if above.size else -1]))


def interval_errors(n: int, n_final: int, level: float, q) -> np.ndarray:
    """(10, len(q)) exact errors E(q) with the claim from k₀ = 0 … 9 (k₀ = 0: none) at tail
    probabilities ``q``, summing counts k ≤ n·max(q) + 12 sd + 12."""
    n, n_final = int(n), int(n_final)
    m = n_final - n
    q = np.atleast_1d(np.asarray(q, dtype=np.float64))[:, None]
    top = float(q.max())
    k = np.arange(min(n, int(n * top + 12 * np.sqrt(n * top) + 12)) + 1, dtype=np.float64)
    lo, hi = count_bounds(k, k, n, n_final, level)
    w = _st.binom.pmf(k, n, q)  # (q, k)
    p_low = _st.binom.cdf(lo - k - 1, m, q)  # P(R < lo − k)
    p_high = _st.binom.sf(hi - k, m, q)  # P(R > hi − k)
    raised = _st.binom.cdf(np.maximum(lo, MIN_EXCEEDANCES) - k - 1, m, q)
    extra = w * (raised - p_low)  # D's term of count k (0 where lo ≥ 10 already)
    base = np.sum(w * (p_low + p_high), axis=1)
    # row k0: the claim from k0 on, for the counts below 10 (k ≥ 10 has lo ≥ 10 already)
    tail = np.cumsum(extra[:, ::-1], axis=1)[:, ::-1]  # Σ_{k' ≥ k} extra
    out = np.empty((MIN_EXCEEDANCES, q.shape[0]))
    out[0] = base
    for k0 in range(1, MIN_EXCEEDANCES):
        out[k0] = base + (tail[:, k0] if k0 < k.size else 0.0)
    return out


@lru_cache(maxsize=64)
def claim_start(n: int, n_final: int, level: float) -> int | None:
    """The least k₀ in 1 … 9 whose claim (T ≥ 10 at ``n_final`` where k ≥ k₀ of the first
    ``n``) keeps the interval's exact error within ``level`` (module docstring), else None."""
    if n >= n_final:
        return None
    ok = None
    for k0 in range(MIN_EXCEEDANCES - 1, 0, -1):  # E grows as k₀ falls: stop at the first miss
        q_lo, q_hi = _q_range(n, n_final - n, k0, level)
        if q_lo >= q_hi:
            ok = k0
            continue
        q = np.geomspace(q_lo, q_hi, _GRID)
        if np.max(interval_errors(n, n_final, level, q)[k0]) > (1 - _MARGIN) * level:
            break
        ok = k0
    return ok


__all__ = ["claim_start", "count_interval", "interval_errors"]
