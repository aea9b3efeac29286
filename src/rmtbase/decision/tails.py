"""Per-statistic Monte Carlo p-values that resolve the tails: empirical add-one, then a GPD tail.

:class:`TailModel`, from N finite null draws, gives one-sided p: with ≥ :data:`MIN_EXCEEDANCES`
draws at or beyond v, p = (1 + #{x ≥ v})/(1 + N) (Phipson & Smyth 2010); further out
p = (k/N)·S_GPD(v − t) (``"gpd"``; Knijnenburg et al. 2009), the GPD fitted to the excesses over
the k-th most extreme draw, k = min(250, ⌊N/8⌋), with shape the upper 95 % bound
ξ̂ + 1.645 (1 + ξ̂)/√k (Smith 1987; ≥ :data:`XI_MIN`), which is conservative. No fit (k < 50 or
ξ̂ > 1): ``"floor"``. p ≥ :data:`P_MIN` = 10⁻¹⁶. Two-sided p = min(1, 2·min(p_lo, p_hi)); the
bounded *effect* is Φ⁻¹((n_< + ½n_= + ½)/(N + 1)) in the bulk, ∓Φ⁻¹(p_side) beyond.
``loo=True`` evaluates at the model's own draws, each left out (GPD fitted once)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

MIN_EXCEEDANCES = 10
MAX_TAIL = 250
MIN_TAIL = 50
XI_RANGE = (0.0, 1.0)
XI_Z = 1.645  # one-sided 95 % normal quantile for the shape's upper bound
#: The shape used is at least this (module docstring: heavier beyond the threshold).
XI_MIN = 0.1
#: Smallest p reported. An extrapolated tail is a model, and no model fitted to a few thousand
#: draws is credible beyond ~10⁻¹⁶ (a head's z and effect still order such heads).
P_MIN = 1e-16

METHODS = ("empirical", "gpd", "floor")
_METHOD_NAMES = np.array(METHODS + ("",), dtype=object)  # "": a NaN value
_GPD, _FLOOR, _NO_METHOD = 1, 2, 3


@dataclass(frozen=True)
class _Tail:
    """GPD fit of one side: excesses over ``threshold`` (measured away from the bulk)."""

    threshold: float
    k: int
    xi: float
    beta: float

    def sf(self, excess):
        from scipy import stats  # here: importing scipy.stats costs ~1 CPU-s

        return stats.genpareto.sf(excess, self.xi, loc=0.0, scale=self.beta)


def _gpd_profile(u, exc, xmax):
    """Profile log-likelihood per excess of the GPD at θ = u / x_max (Grimshaw 1993):
    given θ = ξ/β the ML shape is ξ̂(θ) = mean log(1 + θx), and
    ℓ*(θ)/k = −log(ξ̂/θ) − ξ̂ − 1 (θ → 0: the exponential, −log mean(x) − 1)."""
    u = np.atleast_1d(np.asarray(u, dtype=np.float64))
    theta = u / xmax
    small = np.abs(u) < 1e-9
    th = np.where(small, 1.0, theta)
    xi = np.mean(np.log1p(th[:, None] * exc[None, :]), axis=1)
    ll = -np.log(xi / th) - xi - 1.0
    ll = np.where(small, -np.log(np.mean(exc)) - 1.0, ll)
    xi = np.where(small, 0.0, xi)
    return ll, xi


#: θ·x_max grid of the profile likelihood: (−1, 0) for bounded tails, (0, 10⁸) for heavy ones.
_U_GRID = np.concatenate([-(1.0 - np.geomspace(1e-7, 1.0, 60, endpoint=False)),
                          [0.0], np.geomspace(1e-6, 1e8, 140)])


def gpd_fit(exc) -> tuple[float, float]:
    """Maximum-likelihood GPD (ξ, β) of positive excesses (location 0), by the profile likelihood in
    θ = ξ/β (Grimshaw 1993, *Technometrics* 35:185): a grid over θ·x_max, then Brent's method
    between the best point's neighbours (to 1e-10 in θ·x_max)."""
    from scipy.optimize import minimize_scalar

    exc = np.asarray(exc, dtype=np.float64)
    xmax = float(exc.max())
    ll, _ = _gpd_profile(_U_GRID, exc, xmax)
    ll = np.where(np.isfinite(ll), ll, -np.inf)
    i = int(np.argmax(ll))
    lo, hi = _U_GRID[max(i - 1, 0)], _U_GRID[min(i + 1, _U_GRID.size - 1)]
    best_u = _U_GRID[i]
    if hi > lo:
        res = minimize_scalar(lambda u: -_gpd_profile(u, exc, xmax)[0][0], bounds=(lo, hi),
                              method="bounded", options={"xatol": 1e-10 * max(1.0, abs(best_u))})
        if np.isfinite(res.fun) and -res.fun >= ll[i]:
            best_u = float(res.x)
    _, xi = _gpd_profile(best_u, exc, xmax)
    xi = float(xi[0])
    beta = float(np.mean(exc)) if abs(best_u) < 1e-9 else xi * xmax / best_u
    return xi, beta


def gpd_scale(exc, xi: float) -> float:
    """ML scale β of a GPD with the shape fixed at ``xi`` ≥ 0: the root of
    k = (1 + ξ) Σ x/(β + ξx), unique because the right side decreases in β and at most
    (1 + ξ)·mean(x) (there the right side is ≤ k); bracketed and solved by Brent's method.
    ξ = 0 is the exponential, β = mean(x)."""
    from scipy.optimize import brentq

    exc = np.asarray(exc, dtype=np.float64)
    mean = float(np.mean(exc))
    if xi <= 0.0:
        return mean
    f = lambda b: (1.0 + xi) * np.mean(exc / (b + xi * exc)) - 1.0  # noqa: E731
    hi = (1.0 + xi) * mean  # f(hi) <= 0 since x/(b + ξx) <= x/b
    lo = hi
    while f(lo) <= 0.0 and lo > 1e-300:
        lo *= 0.5
    if f(lo) <= 0.0:
        return lo
    return float(brentq(f, lo, hi, xtol=1e-14 * hi, rtol=1e-14))


def _fit_tail(extreme: np.ndarray, n: int) -> _Tail | None:
    """GPD fit to the most extreme draws of one side, ``extreme`` sorted away from the bulk
    (largest first for the upper side, as negatives for the lower side)."""
    k = min(MAX_TAIL, n // 8)
    if k < MIN_TAIL or extreme.size <= k:
        return None
    threshold = 0.5 * (extreme[k - 1] + extreme[k])
    exc = extreme[:k] - threshold
    if not np.all(np.isfinite(exc)) or np.ptp(exc) <= 0:
        return None
    with np.errstate(all="ignore"):
        xi, beta = gpd_fit(exc)
    if not (np.isfinite(xi) and np.isfinite(beta) and beta > 0) or xi > XI_RANGE[1]:
        return None
    # upper one-sided 95 % bound on ξ (ML: sd(ξ̂) ≈ (1 + ξ)/√k), at least 0; scale refitted
    xi_up = max(XI_MIN, xi + XI_Z * (1.0 + xi) / np.sqrt(k))
    with np.errstate(all="ignore"):
        beta = gpd_scale(exc, xi_up)
    if not (np.isfinite(beta) and beta > 0):
        return None
    return _Tail(float(threshold), int(k), float(xi_up), float(beta))


class TailModel:
    """Tail-resolving p-values of one statistic against its null draws (module docstring)."""

    def __init__(self, draws):
        x = np.asarray(draws, dtype=np.float64).ravel()
        x = np.sort(x[~np.isnan(x)])
        if x.size < 2:
            raise ValueError("a tail model needs at least 2 non-NaN null draws")
        self.x = x
        self.n = x.size
        self._tails: dict[str, _Tail | None] = {}

    def _tail(self, side: str) -> _Tail | None:
        if side not in self._tails:
            ext = self.x[::-1] if side == "hi" else -self.x
            self._tails[side] = _fit_tail(ext[np.isfinite(ext)], self.n)
        return self._tails[side]

    def _counts(self, v):
        """(#{x < v}, #{x ≤ v}), float64; ``v`` searched in sorted order (a cache-friendly walk)."""
        order = np.argsort(v, kind="stable")
        ordered = v[order]
        n_lt, n_le = np.empty(v.size), np.empty(v.size)
        n_lt[order] = np.searchsorted(self.x, ordered, side="left")
        n_le[order] = np.searchsorted(self.x, ordered, side="right")
        return n_lt, n_le

    def evaluate(self, values, *, loo: bool = False) -> dict[str, np.ndarray]:
        """``{"p", "p_lo", "p_hi", "method", "effect"}`` of ``values``; ``method``: from
        :data:`METHODS`, ``""`` for NaN (p and effect NaN). ``loo``: ``values`` are this
        model's own draws, each one's occurrence removed from the counts."""
        v = np.asarray(values, dtype=np.float64)
        shape = v.shape
        v = v.ravel()
        self_count = 1.0 if loo else 0.0  # a draw evaluated against the others
        n_lt, n_le = self._counts(v)
        n_le -= self_count
        n_ge = (self.n - n_lt) - self_count
        n = self.n - self_count
        n_eq = n_le - n_lt
        p_lo = (1.0 + n_le) / (1.0 + n)
        p_hi = (1.0 + n_ge) / (1.0 + n)
        m_lo = np.zeros(v.shape, dtype=np.int8)  # an index into _METHOD_NAMES
        m_hi = np.zeros(v.shape, dtype=np.int8)
        for side, counts, p, m in (("lo", n_le, p_lo, m_lo), ("hi", n_ge, p_hi, m_hi)):
            thin = (counts < MIN_EXCEEDANCES) & ~np.isnan(v)
            if not thin.any():
                continue
            tail = self._tail(side)
            if tail is None:
                m[thin] = _FLOOR
                continue
            exc = (v[thin] if side == "hi" else -v[thin]) - tail.threshold
            p_gpd = (tail.k / self.n) * tail.sf(np.maximum(exc, 0.0))
            p[thin] = np.maximum(p_gpd, P_MIN)
            m[thin] = _GPD
        p_two = np.minimum(1.0, 2.0 * np.minimum(p_lo, p_hi))
        bad = np.isnan(v)
        method = np.where(bad, _NO_METHOD, np.where(p_lo <= p_hi, m_lo, m_hi))
        mid = (n_lt + 0.5 * n_eq + 0.5) / (n + 1.0)
        effect = special.ndtri(mid)
        with np.errstate(divide="ignore"):
            effect = np.where(m_lo == _GPD, special.ndtri(np.maximum(p_lo, P_MIN)), effect)
            effect = np.where(m_hi == _GPD, -special.ndtri(np.maximum(p_hi, P_MIN)), effect)
        out = {"p": np.where(bad, np.nan, p_two), "p_lo": np.where(bad, np.nan, p_lo),
               "p_hi": np.where(bad, np.nan, p_hi), "effect": np.where(bad, np.nan, effect),
               "method": _METHOD_NAMES[method]}
        return {k: a.reshape(shape) for k, a in out.items()}

    def needs_more(self, values) -> bool:
        """True if some value has fewer than :data:`MIN_EXCEEDANCES` draws on its side: more
        draws (where they are cheap) would replace an extrapolated p by an empirical one."""
        v = np.asarray(values, dtype=np.float64).ravel()
        v = v[~np.isnan(v)]
        if not v.size:
            return False
        n_lt, n_le = self._counts(v)
        return bool(np.any(np.minimum(n_le, self.n - n_lt) < MIN_EXCEEDANCES))
