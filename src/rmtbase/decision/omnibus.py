"""One decision per head: a Cauchy combination of its statistics' one-sided evidence, calibrated
on joint null draws.

For a head h and its family F of statistics (:mod:`rmtbase.decision.family`: duplicates enter
once), each statistic s has a tail-resolving two-sided p-value p_s
(:class:`rmtbase.decision.tails.TailModel`). They are combined by the Cauchy combination
(Liu & Xie 2020, "Cauchy combination test", JASA 115:393) of the p-values *capped at ½*:

    T = (1/|F|) Σ_{s ∈ F} tan((½ − min(p_s, ½)) π)  ≥ 0.

Why the cap. Uncapped, a statistic with p → 1 adds tan((½ − p)π) → −∞: one statistic that
agrees with the null perfectly vetoes any evidence elsewhere. Measured before the cap: the
bfloat16 copy of MiniLM, L4H11, had component p-values 2·10⁻¹⁶, 7·10⁻¹⁵ and 7·10⁻¹² and head
p 0.96, because ``k.mean`` sits at p = 1 exactly on the bf16 grid; a random GPT-2 head under the
permutation null with λ_min p 0.0021 and condition-number p 0.017 got head p 0.90 from a
spectral entropy at p 0.999 (``tests/test_omnibus.py`` reproduces both). With the cap a
statistic at p ≥ ½ contributes 0, T is monotone non-increasing in every p_s, and evidence can
only add. The cap changes T's null law, so it is *not* read off the Cauchy formula: it is
calibrated on the null draws, below.

Calibration. The statistics of one head are strongly dependent (npr, spectral entropy and
stable rank move together), so the Cauchy tail is used only as a tail *shape*. Every joint null
draw j (one draw gives all statistics at once, through the same estimator as the heads) gets
its own T_j, its p_s evaluated against the null with draw j left out. The head's p-value is
then empirical,

    p = (1 + #{j : T_j ≥ T}) / (1 + N),

while at least :data:`MIN_EXCEEDANCES` draws lie beyond T. Further out the tail is extended
with the Cauchy law's tail index 1 anchored at the m-th largest T_(m) of the draws
(m = :data:`MIN_EXCEEDANCES`), p = (m / N) · T_(m) / T (marked ``"extrapolated"``); where the
anchor is not positive (a degenerate null, e.g. few permutations all at the add-one floor) no
tail is extrapolated and the add-one floor 1/(1 + N) is kept (``"floor"``).

Resolution. A head's p never claims more than its statistics resolve: it is never below the
smallest family p-value of the head (:func:`resolution_floor`). This is the combination's own
bound — for small p-values T is a harmonic mean, (1/|F|) Σ 1/(π p_s), and its tail law
P(T > t) ≈ 1/(π t) turns it into a p-value no smaller than min p_s — so the floor only removes
what the calibration's finite anchor would invent (measured before: heads whose every
component sat at the 200-permutation floor p = 0.00995 got head p 10⁻¹⁶). BH (1995) over all
heads then gives ``head_flag``; heads sharing a key head under GQA share their ``k.*``
statistics, a positive dependence under which BH keeps its level (Benjamini & Yekutieli 2001).
"""

from __future__ import annotations

import numpy as np

from .tails import MIN_EXCEEDANCES, P_MIN

#: p-values are capped here before the Cauchy transform (module docstring).
P_CAP = 0.5


def cauchy_statistic(p) -> np.ndarray:
    """T = mean over the last axis of tan((½ − min(p, ½))π) ≥ 0; NaN p-values are left out of
    the mean (a head with no finite p-value gets NaN). p is clipped below at P_MIN."""
    p = np.asarray(p, dtype=np.float64)
    ok = np.isfinite(p)
    pc = np.clip(np.where(ok, p, P_CAP), P_MIN, P_CAP)
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
    p, method, _ = calibrated(t_heads, t_null)
    return p, method


def calibrated(t_heads, t_null) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`calibrated_p`'s ``(p, method)`` and the count it reads: per head the finite null
    statistics at or beyond its own (``k`` ≥ :data:`MIN_EXCEEDANCES`: the empirical p; fewer:
    the Cauchy tail; the joint stopping rule brackets p through it,
    :func:`rmtbase.scoring.joint_stopping.p_bounds`), −1 where the head's statistic is not
    finite."""
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
    if anchor > 0:
        with np.errstate(divide="ignore", invalid="ignore"):
            p_far = (m / n) * np.where(th > 0, anchor / th, 1.0)
        p = np.where(far, np.maximum(p_far, P_MIN), p)
        method = np.where(far, "extrapolated", "empirical").astype(object)
    else:  # no tail to extend: keep the add-one floor
        p = np.where(far, np.maximum(p, 1.0 / (1.0 + n)), p)
        method = np.where(far & (n_ge == 0), "floor", "empirical").astype(object)
    bad = ~np.isfinite(th)
    inf = np.isposinf(th)
    p = np.where(inf, P_MIN, np.where(bad, np.nan, p))
    method = np.where(bad & ~inf, "", method)
    return p, method, np.where(bad, -1, n_ge)


def resolution_floor(p_heads, p_stats) -> np.ndarray:
    """Head p-values raised to at least the smallest finite p of each head's statistics
    (``p_stats``: last axis the family; module docstring, "Resolution")."""
    p_stats = np.asarray(p_stats, dtype=np.float64)
    floor = np.min(np.where(np.isfinite(p_stats), p_stats, np.inf), axis=-1, initial=np.inf)
    p = np.asarray(p_heads, dtype=np.float64)
    return np.where(np.isfinite(floor) & np.isfinite(p), np.maximum(p, floor), p)
