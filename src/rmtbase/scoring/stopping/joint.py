"""The statistics' joint null sized by its own Monte Carlo error, drawn only where a decision could
change.

The joint draws give the element statistics' p and calibrate p_S (:mod:`rmtbase.decision.omnibus`);
the null rate of p_S ≤ a = α/2 is off by √(a(1 − a)/N), so :data:`JOINT_DRAWS` = 18,000 (≥ 16,000:
a quarter of a 1,000-head calibration's se). Sizes of :data:`SCHEDULE` are drawn (draw i the same
in each) while some head is :func:`unsettled`: p_S from a count k of n, (1 + k)/(1 + n) or the
Cauchy tail, is bracketed by :func:`count_bounds` (Clopper–Pearson, then the binomial range of the
draws to come); unsettled = BH over min(1, 2p) flags at p_lo but not p_hi. Level ε / (heads ·
looks), ε = :data:`~rmtbase.scoring.stopping.rule.STOP_ERROR`; element p and p_A are not covered.
"""

from __future__ import annotations

import numpy as np
from scipy import stats as _st

from ...baseline.cache import TABLE_DRAWS
from ...decision.significance import benjamini_hochberg
from ...decision.tails import MIN_EXCEEDANCES, P_MIN
from .rule import sizes_after

#: The joint null's full size (module docstring).
JOINT_DRAWS = 18_000
#: Sizes a score draws in turn after its first table of
#: :data:`~rmtbase.baseline.cache.TABLE_DRAWS` (the last is JOINT_DRAWS): the spectral
#: ladder's (:data:`rmtbase.scoring.stopping.rule.LADDER`) above it up to it (1,500, 2,000,
#: 3,000, ..., 15,000, 18,000), each the continuation of the last, so a finer step costs only
#: the bound's share of the error.
SCHEDULE = sizes_after(TABLE_DRAWS, JOINT_DRAWS)
#: The level α/2 whose rate the size controls, and the calibration it is compared with.
RATE_LEVEL, CALIBRATION_HEADS = 0.025, 1000


def rate_sd(draws: int, level: float = RATE_LEVEL) -> float:
    """Monte Carlo sd of the rate of p ≤ ``level`` that a shared null of ``draws`` draws gives
    null heads: its (1 − level) quantile covers a Beta(N(1 − level), N·level) mass."""
    return float(np.sqrt(level * (1.0 - level) / int(draws)))


def needed_draws(level: float = RATE_LEVEL, heads: int = CALIBRATION_HEADS,
                 fraction: float = 0.25) -> int:
    """Draws that keep :func:`rate_sd` at most ``fraction`` of the binomial se of a
    ``heads``-head calibration at ``level``: N ≥ heads / fraction² (16,000 by default)."""
    return int(np.ceil(heads / fraction ** 2))


def count_bounds(k_lo, k_hi, n: int, n_final: int, level: float):
    """Bounds of a count at ``n_final`` draws, given that of the first ``n`` it is in
    [k_lo, k_hi]: the tail probability's Clopper–Pearson interval at level/2, then the
    binomial quantiles of the ``n_final − n`` draws to come at level/2 (arrays broadcast)."""
    k_lo = np.asarray(k_lo, dtype=np.float64)
    k_hi = np.asarray(k_hi, dtype=np.float64)
    m = int(n_final) - int(n)
    if m <= 0:
        return k_lo, k_hi
    a = level / 4
    with np.errstate(invalid="ignore"):
        pi_lo = np.where(k_lo > 0, _st.beta.ppf(a, np.maximum(k_lo, 1), n - k_lo + 1), 0.0)
        pi_hi = np.where(k_hi < n, _st.beta.ppf(1 - a, k_hi + 1, np.maximum(n - k_hi, 1)), 1.0)
        rest_lo = np.where(pi_lo > 0, _st.binom.ppf(a, m, np.clip(pi_lo, 0, 1)), 0.0)
        rest_hi = np.where(pi_hi < 1, _st.binom.ppf(1 - a, m, np.clip(pi_hi, 0, 1)), m)
    return k_lo + np.nan_to_num(rest_lo), k_hi + np.nan_to_num(rest_hi, nan=m)


def p_bounds(p, method, n: int, n_final: int, level: float, exceedances=None):
    """(p_lo, p_hi) at ``n_final`` draws of omnibus p-values ``p`` (with ``method``) read from ``n``
    calibration draws. ``exceedances``: each head's count k (``head_p_exceedances``); without it a
    non-empirical p is taken at every k < 10. NaN stays NaN."""
    p = np.asarray(p, dtype=np.float64)
    method = np.asarray(method, dtype=object)
    emp = method == "empirical"
    k = np.where(emp, np.rint(np.nan_to_num(p) * (n + 1) - 1), 0.0)
    k_lo = np.where(emp, np.maximum(k, 0), 0.0)
    k_hi = np.where(emp, np.maximum(k, 0), MIN_EXCEEDANCES - 1)
    if exceedances is not None:  # the counts themselves (k < 10 where not empirical)
        e = np.asarray(exceedances, dtype=np.float64)
        known = ~emp & (e >= 0) & (e < MIN_EXCEEDANCES)
        k_lo, k_hi = np.where(known, e, k_lo), np.where(known, e, k_hi)
    lo, hi = count_bounds(k_lo, k_hi, n, n_final, level)
    # a count below 10 at n_final gives the Cauchy tail beyond the 10th largest draw: at most
    # 10/n_final, at least P_MIN (rmtbase.decision.omnibus.calibrated_p)
    p_lo = np.where(lo >= MIN_EXCEEDANCES, (1 + lo) / (1 + n_final),
                    np.maximum(np.where(emp, lo, 0.0) / n_final, P_MIN))
    p_hi = np.minimum(1.0, (1 + np.maximum(hi, MIN_EXCEEDANCES)) / (1 + n_final))
    bad = ~np.isfinite(p)
    return (np.where(bad, np.nan, np.minimum(p_lo, p)),
            np.where(bad, np.nan, np.maximum(p_hi, p)))


def unsettled(p_lo, p_hi, alpha: float) -> np.ndarray:
    """Heads whose flag could differ at the full size: flagged by BH (over every finite head,
    of min(1, 2p)) with ``p_lo`` and not with ``p_hi``."""
    lo = np.minimum(1.0, 2.0 * np.asarray(p_lo, dtype=np.float64))
    hi = np.minimum(1.0, 2.0 * np.asarray(p_hi, dtype=np.float64))
    return benjamini_hochberg(lo, alpha)[0] & ~benjamini_hochberg(hi, alpha)[0]


def next_size(n: int) -> int | None:
    """The next size of :data:`SCHEDULE` above ``n`` (None at or past :data:`JOINT_DRAWS`)."""
    return next((s for s in SCHEDULE if s > int(n)), None)


def grow(ref, n: int) -> int:
    """Grow the joint table of ``ref`` (a :class:`~rmtbase.scoring.heads.reference.TableReference`)
    to ``n`` draws, keeping its statistics: a stored table of ≥ n draws serves truncated, else
    the draws held continue (:mod:`rmtbase.baseline.table_growth`); returns the draws got."""
    from ...baseline.cache import null_table
    from ..nulls.layer_null import null_arrays

    c = ref.cells
    names = [k for k in ref.joint if k not in ("q.rms", "k.rms")]
    ref.table = null_table(c.d, c.d_h, stats=c.kind, min_draws=int(n), seed=ref.seed,
                           storage=ref.storage, progress=ref.progress)
    ref.joint = null_arrays(ref.table, names, c.d, c.d_h)
    return int(np.asarray(ref.joint["q.rms"]).size)


def can_grow(ref) -> bool:
    """A reference whose joint table the rule may grow: the Gaussian tables
    (``sequential``) with element statistics — beside a separate spectral reference, or with
    no spectral statistic (``elementwise``) — the size not fixed by the caller, below
    :data:`JOINT_DRAWS`."""
    return bool(getattr(ref, "sequential", False) and ref.cells.kind != "spectral"
                and getattr(ref, "min_draws", 1) is None
                and (ref.spectral_null is not None or ref.cells.kind == "elementwise")
                and np.asarray(ref.joint["q.rms"]).size < JOINT_DRAWS)


__all__ = ["JOINT_DRAWS", "SCHEDULE", "can_grow", "count_bounds", "grow", "needed_draws",
           "next_size", "p_bounds", "rate_sd", "unsettled"]
