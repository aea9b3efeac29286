"""One decision per head: a Cauchy combination of its statistics, calibrated on joint null draws.

For a head h and its family F of statistics (:mod:`rmtbase.decision.family`: duplicates enter
once), each statistic s has a tail-resolving two-sided p-value p_s
(:class:`rmtbase.decision.tails.TailModel`). They are combined by the Cauchy combination
(Liu & Xie 2020, "Cauchy combination test", JASA 115:393)

    T = (1/|F|) Σ_{s ∈ F} tan((½ − p_s) π),

which is dominated by the smallest p-values (T ≈ 1/(π |F| p_min) when one statistic is
extreme) and, unlike Fisher's method, needs no independence between the statistics: its tail
P(T > t) ~ 1/(π t) holds for arbitrary dependence of the p-values (Liu & Xie, Thm 1).

Calibration. The statistics of one head are strongly dependent (npr, spectral entropy and
stable rank move together), so the Cauchy tail formula is used only as a tail *shape*. Every
joint null draw j (one draw gives all statistics at once, through the same estimator as the
heads) gets its own T_j, its p_s evaluated against the null with draw j left out. The head's
p-value is then empirical,

    p = (1 + #{j : T_j ≥ T}) / (1 + N),

while at least :data:`MIN_EXCEEDANCES` draws lie beyond T. Further out the empirical
estimate stops resolving, and the tail is extended with the Cauchy law's tail index 1
anchored at the m-th largest T_(m) of the draws (m = :data:`MIN_EXCEEDANCES`):

    p = (m / N) · T_(m) / T        (marked ``"extrapolated"``).

Both pieces are monotone in T and agree at T_(m) up to the add-one term. So a head that is a
draw from the null gets a p-value that is uniform (exactly so in its empirical range), and a head
with one statistic far in the tail gets p ≈ (m/N)·T_(m)·π|F|·p_min — small, and never smaller
than its Bonferroni-free combination warrants. BH (1995) over all heads then gives
``head_flag``; heads sharing a key head under GQA share their ``k.*`` statistics, a positive
dependence under which BH keeps its level (Benjamini & Yekutieli 2001).
"""

from __future__ import annotations

import numpy as np

from .tails import MIN_EXCEEDANCES, P_MIN


def cauchy_statistic(p) -> np.ndarray:
    """T = mean over the last axis of tan((½ − p)π); NaN p-values are left out of the mean
    (a head with no finite p-value gets NaN). p is clipped to [P_MIN, 1 − 1e-16]."""
    p = np.asarray(p, dtype=np.float64)
    ok = np.isfinite(p)
    pc = np.clip(np.where(ok, p, 0.5), P_MIN, 1.0 - 1e-16)
    # tan((1/2 - p) pi) = cot(p pi) = 1 / tan(p pi), accurate for small p
    t = np.where(ok, 1.0 / np.tan(pc * np.pi), 0.0)
    n = ok.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, t.sum(axis=-1) / np.maximum(n, 1), np.nan)


def calibrated_p(t_heads, t_null) -> tuple[np.ndarray, np.ndarray]:
    """Head p-values of Cauchy statistics ``t_heads`` against null statistics ``t_null``.

    Returns ``(p, method)`` with method ``"empirical"`` or ``"extrapolated"`` (module
    docstring). NaN statistics give NaN p and method ``""``.
    """
    tn = np.sort(np.asarray(t_null, dtype=np.float64).ravel())
    tn = tn[np.isfinite(tn)]
    n = tn.size
    if n < 2 * MIN_EXCEEDANCES:
        raise ValueError(f"the omnibus calibration needs at least {2 * MIN_EXCEEDANCES} joint "
                         f"null draws, got {n}")
    th = np.asarray(t_heads, dtype=np.float64)
    n_ge = n - np.searchsorted(tn, th, side="left")
    p = (1.0 + n_ge) / (1.0 + n)
    m = MIN_EXCEEDANCES
    anchor = tn[n - m]
    far = n_ge < m
    with np.errstate(divide="ignore", invalid="ignore"):
        p_far = (m / n) * np.where(th > 0, anchor / th, 1.0)
    p = np.where(far, np.maximum(p_far, P_MIN), p)
    method = np.where(far, "extrapolated", "empirical").astype(object)
    bad = ~np.isfinite(th)
    inf = np.isposinf(th)
    p = np.where(inf, P_MIN, np.where(bad, np.nan, p))
    method = np.where(bad & ~inf, "", method)
    return p, method
