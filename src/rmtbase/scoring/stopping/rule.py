"""When to stop drawing: extend the spectral null only while some head's flag could change.

Besag & Clifford (1991) made simultaneous over heads, with a stated error after Gandy (2009):
per head and spectral statistic, the Clopper–Pearson interval (level 1 − ε') of tail count k of
N bounds its two-sided p, and head p (:mod:`rmtbase.decision.omnibus`) and BH are monotone, so
a head flagged at the upper ends, or unflagged at the lower ends, is settled; extend to the next
size of :func:`next_size`'s ladder (about ×1.4 a step) while some head is unsettled, up to the
cap. ε' = ε / (heads × statistics × looks), ε =
:data:`STOP_ERROR`: by the union bound, with probability ≥ 1 − ε the stopped decisions equal an
infinite reference's (joint table, profile null, block-quantised nulls not covered). With
``max_draws``: extend up to it wherever a head with q ≤ 2α lies beyond all but 10 draws."""

from __future__ import annotations

import numpy as np
from scipy import stats as _st

#: Probability that some decision declared settled differs from the infinite-null decision.
STOP_ERROR = 0.01


#: Cap of the extension under the stopping rule (``max_draws=None``).
MAX_DRAWS = 100_000


#: The spectral reference's sizes: these mantissas times 10^k (1,000, 1,500, 2,000, 3,000,
#: 4,000, 6,000, 8,000, 10,000, ...), at most ×1.5 a step. A grown table continues the draws
#: it holds (:mod:`rmtbase.baseline.table_growth`), so a look costs only its new draws, and a
#: stop overshoots the draws a head needs by ×1.2 on average (×2.5 for steps of ×5); each look
#: costs the bound only a share of the error: the draws a settled head needs grow like
#: log(1/ε'), about 10 % more for four times the looks.
LADDER = (1, 1.5, 2, 3, 4, 6, 8)


def next_size(n: int, cap: int) -> int:
    """The smallest whole size of the :data:`LADDER` above ``n`` draws, at most ``cap``."""
    n, scale = int(n), 1
    while True:
        for m in LADDER:
            if int(m * scale) > n:
                return min(int(cap), int(m * scale))
        scale *= 10


def sizes_after(n0: int, cap: int) -> tuple[int, ...]:
    """The sizes :func:`next_size` visits from ``n0`` draws up to ``cap``, ``n0`` left out."""
    n, out = max(int(n0), 1), []
    while n < cap:
        n = next_size(n, cap)
        out.append(n)
    return tuple(out)


def looks(n0: int, cap: int) -> int:
    """Number of tables the :func:`next_size` schedule from ``n0`` draws can visit up to ``cap``."""
    return 1 + len(sizes_after(n0, cap))


def p_interval(value, ref, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Clopper–Pearson bounds of the two-sided p of ``value`` (any shape) against the finite
    draws ``ref``: k draws at or beyond the value on its nearer side of N, the tail
    probability's interval at level 1 − ``level`` doubled and capped at 1 (module docstring).
    NaN values give NaN bounds."""
    x = np.sort(np.asarray(ref, dtype=np.float64).ravel())
    x = x[np.isfinite(x)]
    n = x.size
    v = np.asarray(value, dtype=np.float64)
    n_le = np.searchsorted(x, v, side="right")
    n_ge = n - np.searchsorted(x, v, side="left")
    k = np.minimum(n_le, n_ge).astype(np.float64)
    a = float(level) / 2
    with np.errstate(invalid="ignore"):
        lo = np.where(k > 0, _st.beta.ppf(a, np.maximum(k, 1), n - k + 1), 0.0)
        hi = np.where(k < n, _st.beta.ppf(1 - a, k + 1, np.maximum(n - k, 1)), 1.0)
    bad = np.isnan(v)
    return (np.where(bad, np.nan, np.minimum(1.0, 2 * lo)),
            np.where(bad, np.nan, np.minimum(1.0, 2 * hi)))


def unsettled(groups, values, spectral, *, alpha: float, n_looks: int, unreliable=(),
              error: float = STOP_ERROR) -> np.ndarray:
    """(layer, head) mask of heads whose flag could still change. groups: ``[(rows, joint,
    spectral_null)]``; values: {stat: (layer, head)} with ``q.rms``, ``k.rms``; spectral: the
    statistics the extension refines."""
    bounds = head_bounds(groups, values, spectral, n_looks=n_looks, unreliable=unreliable,
                         error=error)
    if bounds is None:
        return np.zeros(np.shape(values["q.rms"]), dtype=bool)
    from ...decision.significance import benjamini_hochberg

    flag_lo, _ = benjamini_hochberg(bounds[0], alpha)
    flag_hi, _ = benjamini_hochberg(bounds[1], alpha)
    return flag_lo & ~flag_hi


def head_bounds(groups, values, spectral, *, n_looks: int, unreliable=(),
                error: float = STOP_ERROR):
    """(p_lo, p_hi), (layer, head): each head's p (:func:`rmtbase.decision.verdict.head_p`)
    with each refined statistic's p at the lower, then upper, end of its :func:`p_interval`
    (level as in :func:`unsettled`), the calibration held; None where no statistic of
    ``spectral`` is in the family. With probability ≥ 1 − ``error`` every head's p on an
    unlimited spectral reference lies in its bracket (module docstring)."""
    from ...decision.family import NOT_TESTED, in_family
    from ...decision.scale import normalise
    from ...decision.verdict import head_p, null_cauchy, stat_tests

    names = [n for n in values if n not in NOT_TESTED]
    family = in_family(names, unreliable=unreliable)  # the Gaussian null (its tables extend)
    refine = [n for n in spectral if n in family]
    rq = np.asarray(values["q.rms"], dtype=np.float64)
    rk = np.asarray(values["k.rms"], dtype=np.float64)
    shape = rq.shape
    if not refine:
        return None
    level = error / (int(np.prod(shape)) * len(refine) * max(1, int(n_looks)))
    p_lo, p_hi = np.full(shape, np.nan), np.full(shape, np.nan)
    for rows, joint, spec in groups:
        rows = np.arange(shape[0]) if rows is None else np.asarray(rows, dtype=np.int64)
        sub = {k: np.asarray(v)[rows] for k, v in values.items()}
        out, models, _ = stat_tests(sub, names, rq[rows], rk[rows], joint, spec)
        ref = joint if spec is None else spec
        bounds = {}
        for n in refine:
            r = normalise(n, ref[n], ref["q.rms"], ref["k.rms"])
            lo, hi = p_interval(normalise(n, sub[n], rq[rows], rk[rows]), r, level)
            cur = out["p_value"][..., names.index(n)]
            bounds[n] = (np.fmin(lo, cur), np.fmax(hi, cur))
        t_null = null_cauchy(family, models, joint, rq[rows].shape)
        for side, dest in ((0, p_lo), (1, p_hi)):
            o = dict(out, p_value=out["p_value"].copy())
            for n, b in bounds.items():
                o["p_value"][..., names.index(n)] = b[side]
            dest[rows] = head_p(o, names, family, models, joint, rq[rows].shape, t_null)[
                "head_p_value"]
    return p_lo, p_hi


__all__ = ["LADDER", "MAX_DRAWS", "STOP_ERROR", "head_bounds", "looks", "next_size", "p_interval",
           "sizes_after", "unsettled"]
