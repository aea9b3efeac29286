"""Significance against Monte Carlo null draws: add-one p-values (:func:`empirical_p`, Davison &
Hinkley 1997; Phipson & Smyth 2010) and the Benjamini–Hochberg (1995) step-up
(:func:`benjamini_hochberg`)."""

from __future__ import annotations

import numpy as np

from ..errors import InputError, TableError


def empirical_p(value, null) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided add-one empirical p-value and mid-rank percentile of ``value`` in 1-d ``null``.

    Non-finite draws are dropped (N finite). p = min(1, 2 min(1 + #{null ≤ v}, 1 + #{null ≥ v})
    / (1 + N)); percentile = 100 (#{null < v} + ½ #{null = v}) / N; NaN for non-finite ``value``."""
    null = np.sort(np.asarray(null, dtype=np.float64).ravel())
    null = null[np.isfinite(null)]
    n = null.size
    if n == 0:
        raise TableError("the null has no finite draws for this statistic")
    v = np.asarray(value, dtype=np.float64)
    n_lt = np.searchsorted(null, v, side="left")
    n_le = np.searchsorted(null, v, side="right")
    p_lo = (1.0 + n_le) / (1.0 + n)
    p_hi = (1.0 + (n - n_lt)) / (1.0 + n)
    p = np.minimum(1.0, 2.0 * np.minimum(p_lo, p_hi))
    pct = 100.0 * (n_lt + 0.5 * (n_le - n_lt)) / n
    bad = ~np.isfinite(v)
    return np.where(bad, np.nan, p), np.where(bad, np.nan, pct)


def benjamini_hochberg(p, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """BH (1995) step-up over all finite entries of ``p`` (any shape): (flag, q_value).

    q_(i) = min_{j ≥ i} m p_(j) / j over the sorted finite p-values (m of them), capped at 1;
    flag = q ≤ alpha. NaN entries are not in the family and get flag False, q NaN."""
    alpha = _check_alpha(alpha)
    p = np.asarray(p, dtype=np.float64)
    q = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    pf = p[ok]
    m = pf.size
    if m:
        order = np.argsort(pf, kind="stable")
        ranked = pf[order] * m / np.arange(1, m + 1)
        ranked = np.minimum.accumulate(ranked[::-1])[::-1]
        qf = np.empty(m)
        qf[order] = np.minimum(ranked, 1.0)
        q[ok] = qf
    flag = np.zeros(p.shape, dtype=bool)
    flag[ok] = q[ok] <= alpha
    return flag, q


def _check_alpha(alpha) -> float:
    try:
        a = float(alpha)
    except (TypeError, ValueError) as exc:
        raise InputError(f"alpha must be a number in (0, 1), got {alpha!r}") from exc
    if not 0.0 < a < 1.0:
        raise InputError(f"alpha must be a number in (0, 1), got {alpha!r}")
    return a
