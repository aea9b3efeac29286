"""Means and standard errors over prompts or sequences: one definition for every circuit
finder (``sd / √N`` with ``ddof = 1``, the standard error of a mean over independent
draws)."""

from __future__ import annotations

import numpy as np


def mean_se(x, axis: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """Mean and ``sd / √N`` (``ddof = 1``) of ``x`` over ``axis``, float64."""
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[axis]
    return x.mean(axis), x.std(axis, ddof=1) / np.sqrt(n)


def mean_se_of_sums(total, total2, n: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`mean_se` of ``n`` values from their sum and sum of squares (none of them kept)."""
    mean = total / n
    return mean, np.sqrt(np.maximum(total2 - n * mean ** 2, 0.0) / (n - 1) / n)


def finite_mean_se(x, least: int = 1) -> tuple[float, float]:
    """Mean and se of the finite values of ``x``: ``(nan, nan)`` with fewer than ``least`` of
    them, the se nan with one."""
    x = np.asarray(x, dtype=np.float64).ravel()
    x = x[np.isfinite(x)]
    if x.size < max(1, least):
        return np.nan, np.nan
    if x.size == 1:
        return float(x[0]), np.nan
    return float(x.mean()), float(x.std(ddof=1) / np.sqrt(x.size))


__all__ = ["finite_mean_se", "mean_se", "mean_se_of_sums"]
