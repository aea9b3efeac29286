"""How many composition and QK-overlap null draws a run uses: the rule of
:mod:`rmtbase.scoring.profile.stopping` applied to the pairs.

:func:`schedule` draws the ``SCHEDULE`` sizes below N = ``draws``, then N, each continuing the
last. A pair is **open** when its flag could differ at N (tail p bracketed by
:func:`~rmtbase.scoring.profile.stopping.tail_p_bounds`); the run stops when none is. Intervals
at level ε / (m · looks), so with probability ≥ 1 − ε every flag equals N draws'.
"""

from __future__ import annotations

import numpy as np

from ..profile.stopping import SCHEDULE, _side_bounds, looks_from
from ..stopping.growth import grow_until_settled


def schedule(draws: int) -> tuple[int, ...]:
    """Sizes a null of ``draws`` is drawn through: those of the profile schedule below
    ``draws``, then ``draws``."""
    draws = int(draws)
    return tuple(n for n in SCHEDULE[:-1] if n < draws) + (draws,)


def p_bounds(values, null_sorted, n_final: int, level: float):
    """(lo, hi) of the one-sided upper tail p (TailModel's ``p_hi``) of ``values`` at
    ``n_final`` draws of which ``null_sorted`` are the first, each side's count bracketed at
    ``level`` (:func:`rmtbase.scoring.profile.stopping._side_bounds`), widened to hold the
    current p; NaN values give NaN."""
    from ...decision.tails import TailModel

    x = np.asarray(null_sorted, np.float64)
    v = np.asarray(values, np.float64)
    cur = TailModel(x).evaluate(v)["p_hi"]
    if x.size >= int(n_final):
        return cur, cur
    k = x.size - np.searchsorted(x, v, side="left")
    counts, at = np.unique(k, return_inverse=True)  # a function of the count: once per count
    lo, hi = (b[at].reshape(k.shape) for b in _side_bounds(counts, x.size, int(n_final), level))
    ok = np.isfinite(v)
    return np.where(ok, np.fmin(lo, cur), np.nan), np.where(ok, np.fmax(hi, cur), np.nan)


def open_values(values: dict, nulls: dict, n_final: int, alpha: float,
                level: float) -> dict:
    """{table: mask of its ``values``} of the values whose flag could differ at ``n_final``
    (module docstring): one Benjamini–Hochberg over the finite values of every table."""
    from ...decision.significance import benjamini_hochberg

    lo, hi, where = [], [], []
    for name, v in values.items():
        v = np.asarray(v, np.float64).ravel()
        a, b = p_bounds(v, nulls[name], n_final, level)
        fin = np.isfinite(v)
        lo.append(a[fin])
        hi.append(b[fin])
        where.append((name, np.flatnonzero(fin), v.size))
    out = {name: np.zeros(size, bool) for name, _, size in where}
    if not sum(x.size for x in lo):
        return out
    lo, hi = np.concatenate(lo), np.concatenate(hi)
    both = benjamini_hochberg(lo, alpha)[0] & ~benjamini_hochberg(hi, alpha)[0]
    at = 0
    for name, idx, _ in where:
        out[name][idx] = both[at:at + idx.size]
        at += idx.size
    return out


def settle(values: dict, draw, draws: int, *, alpha: float, error: float | None = None,
           on_grow=None) -> tuple[dict, dict]:
    """({table: sorted null}, {table: n}): each table drawn by :func:`schedule` until no value is
    open. ``values``: {table: values}; ``draw(table, n, previous)`` continues ``previous``;
    ``on_grow(table, n)`` is told before a table grows."""
    from ..stopping.rule import STOP_ERROR

    sizes = schedule(draws)
    m = sum(int(np.isfinite(np.asarray(v, np.float64)).sum()) for v in values.values())
    eps = STOP_ERROR if error is None else float(error)
    level = eps / (max(1, m) * looks_from(sizes[0], sizes))

    def open_groups(nulls):
        open_ = open_values(values, nulls, sizes[-1], alpha, level)
        return [t for t in values if open_[t].any()]

    return grow_until_settled({t: sizes[0] for t in values}, sizes, draw, open_groups, on_grow)


def continued(previous, more) -> np.ndarray:
    """The sorted table of ``previous`` (sorted, or None) and the new draws ``more``: the same
    bytes as sorting all of them at once."""
    more = np.asarray(more, np.float64)
    if previous is None:
        return np.sort(more)
    return np.sort(np.concatenate([np.asarray(previous, np.float64), more]))


def null_plan(d: int, d_h: int, n_heads: int, n_kv: int, draws: int) -> dict:
    """Work of the composition and QK-overlap nulls' draws at most: {"null_flops", "null_draws"}.
    GEMM FLOPs a draw: 12 d_h³ (composition; 2 d_h³ by the bidiagonal sampler), 16 d_h³
    (overlap), 10 d_h³ (shared key head; none by the bidiagonal one,
    :mod:`rmtbase.baseline.composition_bidiagonal`); 16-bit storage draws whole factors
    (≈ 16 d d_h² + 2 d_h³). Memory fits :data:`~rmtbase.scoring.composition.run.RUNTIME_BYTES`."""
    from ...baseline.composition_bidiagonal import composition_bidiagonal, overlap_bidiagonal

    d_h, draws = int(d_h), int(draws)
    group = max(1, int(n_heads) // max(1, int(n_kv)))
    per = 2.0 if composition_bidiagonal(d, d_h, d_h) else 12.0
    if int(n_kv) > 1:
        per += 16.0
    if group > 1 and not overlap_bidiagonal(d, d_h, True):
        per += 10.0
    return {"null_flops": per * d_h**3 * draws, "null_draws": draws}


__all__ = ["continued", "null_plan", "open_values", "p_bounds", "schedule", "settle"]
