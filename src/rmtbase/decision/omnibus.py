"""One decision per head: a Cauchy combination of its statistics' evidence, calibrated on joint
draws. For a head's family F (:mod:`rmtbase.decision.family`) with two-sided tail-resolving p_s
(:class:`rmtbase.decision.tails.TailModel`), the Cauchy combination (Liu & Xie 2020, JASA
115:393) of p-values capped at ½:

    T = (1/|F|) Σ_{s ∈ F} tan((½ − min(p_s, ½)) π)  ≥ 0.

The cap keeps one p_s → 1 from vetoing evidence elsewhere and changes T's null law, so T is
calibrated: every joint null draw j gets its own T_j (p_s against the null without draw j), and

    p = (1 + #{j : T_j ≥ T}) / (1 + N)

while at least :data:`MIN_EXCEEDANCES` draws lie beyond T; further out p = (m / N) · T_(m) / T
(Cauchy tail index 1 at the m-th largest, ``"extrapolated"``), or the add-one floor where
T_(m) ≤ 0 (``"floor"``). p is never below the head's smallest family p
(:func:`resolution_floor`). BH (1995) over heads gives ``head_flag``; GQA heads sharing ``k.*``
statistics are positively dependent, under which BH keeps its level (Benjamini & Yekutieli 2001)."""

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
    docstring). NaN statistics give NaN p and method ``""``."""
    p, method, _ = calibrated(t_heads, t_null)
    return p, method


def calibrated(t_heads, t_null) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`calibrated_p`'s ``(p, method)`` and per head the count of finite null statistics at or
    beyond its own (−1 where not finite), which :func:`rmtbase.scoring.stopping.joint.p_bounds`
    reads."""
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
    (``p_stats``: last axis the family), the combination's own bound for small p-values
    (T ≈ (1/|F|) Σ 1/(π p_s))."""
    p_stats = np.asarray(p_stats, dtype=np.float64)
    floor = np.min(np.where(np.isfinite(p_stats), p_stats, np.inf), axis=-1, initial=np.inf)
    p = np.asarray(p_heads, dtype=np.float64)
    return np.where(np.isfinite(floor) & np.isfinite(p), np.maximum(p, floor), p)
