"""How many profile-null draws a score uses: a first block, more only where a decision could change.

The :data:`SCHEDULE` sizes up to N = ``PROFILE_DRAWS`` are drawn (draw i the same at every size)
until no decision (``profile_flag``, ``head_flag``, ``symmetry_unaligned_flag``) could differ
from N's (:func:`open_heads`): each p is bracketed by :func:`count_bounds` (Clopper–Pearson from
n, then the binomial range of the draws to come); decisions are monotone in p. Each interval at
level ε / (heads · (axes + 2) · looks) (:func:`interval_level`), so P(some decision differs from
N's) ≤ ε by the union bound. Effects, bands, p and q are n draws'.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..stopping.growth import grow_until_settled
from ..stopping.joint import count_bounds  # one Clopper–Pearson + binomial bracket for both rules
from .factors import PROFILE_DRAWS

#: Profile-null draws a score tries in turn (the last is ``PROFILE_DRAWS``), each size the
#: continuation of the last. 5,000 is the last size at which :mod:`.tail_count`'s claim can
#: close a head with 9 draws beyond it; finer steps would divide the error over more looks.
SCHEDULE = (2_000, 4_000, 5_000, 6_000, 10_000, PROFILE_DRAWS)


def _side_bounds(k, n, n_final, level):
    """(lo, hi) of one side's add-one p at n_final given k of n (P_MIN below where the tail
    model may extrapolate at n_final: fewer than MIN_EXCEEDANCES, the count's interval
    :func:`rmtbase.scoring.stopping.tail_count.count_interval`)."""
    from ...decision.tails import MIN_EXCEEDANCES, P_MIN
    from ..stopping.tail_count import count_interval

    lo, hi = count_interval(k, n, n_final, level)
    p_lo = np.where(lo < MIN_EXCEEDANCES, P_MIN, (1 + lo) / (1 + n_final))
    p_hi = (1 + np.maximum(hi, np.where(hi < MIN_EXCEEDANCES, MIN_EXCEEDANCES, 0))) / (
        1 + n_final)
    return p_lo, np.minimum(1.0, p_hi)


def tail_p_bounds(model, values, n_final: int, level: float):
    """(lo, hi) of :class:`rmtbase.decision.tails.TailModel`'s two-sided p at ``n_final``
    draws (each side's count bracketed, :func:`_side_bounds`), widened to hold the current p."""
    v = np.asarray(values, dtype=np.float64)
    cur = model.evaluate(v)["p"]
    if model.n >= n_final:
        return cur, cur
    n_le = np.searchsorted(model.x, v, side="right")
    n_ge = model.n - np.searchsorted(model.x, v, side="left")
    sides = [_side_bounds(k, model.n, n_final, level / 2) for k in (n_le, n_ge)]
    lo = np.minimum(1.0, 2 * np.minimum(sides[0][0], sides[1][0]))
    hi = np.minimum(1.0, 2 * np.minimum(sides[0][1], sides[1][1]))
    ok = np.isfinite(v)
    return np.where(ok, np.fmin(lo, cur), np.nan), np.where(ok, np.fmax(hi, cur), np.nan)


def axes_p_bounds(values, draws, n_final: int, level: float):
    """(lo, hi) of p_A (:func:`rmtbase.decision.combined.axes_p`) of heads ``values`` (..., A)
    against ``n_final`` draws of which ``draws`` (n, A) are the first: each axis p at its
    ends, the calibration count on the draws' own statistics bracketed, the resolution floor
    at the ends (module docstring)."""
    from ...decision.combined import axes_p, axis_null
    from ...decision.omnibus import calibrated_p, cauchy_statistic, resolution_floor
    from ...decision.tails import MIN_EXCEEDANCES, P_MIN

    values = np.asarray(values, dtype=np.float64)
    draws = np.asarray(draws, dtype=np.float64)
    null = axis_null(draws) if draws.ndim == 2 else None
    cur, _ = axes_p(values, draws, null)
    if draws.shape[0] >= n_final:
        return cur, cur
    models, t_null = null
    ends = [tail_p_bounds(m, values[..., a], n_final, level) for a, m in enumerate(models)]
    p_lo = np.stack([e[0] for e in ends], -1)
    p_hi = np.stack([e[1] for e in ends], -1)
    t_null = np.sort(t_null)
    n = t_null.size
    t_hi, t_lo = cauchy_statistic(p_lo), cauchy_statistic(p_hi)
    k_lo = n - np.searchsorted(t_null, t_hi, side="left")
    k_hi = n - np.searchsorted(t_null, t_lo, side="left")
    c_lo, c_hi = count_bounds(k_lo, k_hi, n, n_final, level)
    low = np.where(c_lo < MIN_EXCEEDANCES, P_MIN, (1 + c_lo) / (1 + n_final))
    high = np.maximum(calibrated_p(t_lo, t_null)[0], (1 + np.maximum(c_hi, np.where(
        c_hi < MIN_EXCEEDANCES, MIN_EXCEEDANCES, 0))) / (1 + n_final))
    lo = np.fmin(cur, resolution_floor(low, p_lo))
    hi = np.fmax(cur, np.minimum(1.0, resolution_floor(high, p_hi)))
    return np.where(np.isfinite(cur), lo, np.nan), np.where(np.isfinite(cur), hi, np.nan)


def _open(p_lo, p_hi, alpha: float) -> np.ndarray:
    """Heads flagged by Benjamini–Hochberg with the lower ends of their p and not with the
    upper ends (NaN p: never flagged)."""
    from ...decision.significance import benjamini_hochberg

    if not np.isfinite(p_lo).any():
        return np.zeros(p_lo.shape, dtype=bool)
    return benjamini_hochberg(p_lo, alpha)[0] & ~benjamini_hochberg(p_hi, alpha)[0]


def interval_level(n_heads: int, n_axes: int, unaligned: bool, n_looks: int,
                   error: float | None = None) -> float:
    """Level of each interval at one look (module docstring, "Error"): ε / (heads · (axes + 1
    + unaligned) · looks) — one interval per head and axis (the profile flag's and p_A's are
    the same event), one for p_A's calibration count, one for ``symmetry_unaligned``."""
    from ..stopping.rule import STOP_ERROR

    eps = STOP_ERROR if error is None else float(error)
    return eps / (max(1, int(n_heads)) * (int(n_axes) + 1 + bool(unaligned))
                  * max(1, int(n_looks)))


def open_heads(values, p_stats, nulls: dict, groups: dict, *, n_final: int, alpha: float,
               level: float, unaligned=None) -> np.ndarray:
    """(layer, head) mask of heads whose ``profile_flag`` on some axis or ``head_flag`` could differ
    at ``n_final`` draws, intervals at ``level``. values: (layer, head, axis); p_stats: (layer,
    head) statistics' head p; nulls: {null storage: {axis: (n,)}}; groups: {null storage: layer
    positions}; unaligned: (layer, head) ``symmetry_unaligned`` or None."""
    from ...decision.combined import DECISION_AXES, combined_p
    from ...decision.tails import TailModel
    from .factors import FACTOR_AXES

    values = np.asarray(values, dtype=np.float64)
    n_layers, n_heads, n_axes = values.shape
    prof = np.full((2,) + values.shape, np.nan)
    pa = np.full((2, n_layers, n_heads), np.nan)
    pick = [FACTOR_AXES.index(a) for a in DECISION_AXES]
    for s, rows in groups.items():
        rows = np.asarray(rows, dtype=np.int64)
        for j, a in enumerate(FACTOR_AXES):
            lo, hi = tail_p_bounds(TailModel(nulls[s][a]), values[rows, :, j], n_final, level)
            prof[0, rows, :, j], prof[1, rows, :, j] = lo, hi
        draws = np.stack([np.asarray(nulls[s][a], np.float64) for a in DECISION_AXES], -1)
        pa[0, rows], pa[1, rows] = axes_p_bounds(values[rows][..., pick], draws, n_final, level)
    heads = np.zeros((n_layers, n_heads), dtype=bool)
    for j in range(n_axes):
        heads |= _open(prof[0, ..., j], prof[1, ..., j], alpha)
    if unaligned is not None:  # symmetry_unaligned_flag: against the symmetry draws
        un = np.full((2, n_layers, n_heads), np.nan)
        for s, rows in groups.items():
            rows = np.asarray(rows, dtype=np.int64)
            un[0, rows], un[1, rows] = tail_p_bounds(TailModel(nulls[s]["symmetry"]),
                                                     np.asarray(unaligned)[rows], n_final, level)
        heads |= _open(un[0], un[1], alpha)
    p_stats = np.asarray(p_stats, dtype=np.float64)
    return heads | _open(combined_p(p_stats, pa[0])[0], combined_p(p_stats, pa[1])[0], alpha)


def first_draws(d: int, d_h: int, storage, seed: int = 0) -> int:
    """Where a score starts: all :data:`SCHEDULE`'s draws where they ship (reading them costs
    nothing), else its first size (``storage``: a name or a record)."""
    from .cache import profile_path, shipped_profile

    full = SCHEDULE[-1]
    ship = shipped_profile(profile_path(d, d_h, storage, full, seed).name)
    return full if ship is not None else SCHEDULE[0]


def looks_from(n0: int, schedule=None) -> int:
    """Looks at which intervals are made from ``n0`` draws on: the sizes of ``schedule``
    (default :data:`SCHEDULE`) from ``n0`` below its last (at the last the p are exact)."""
    schedule = SCHEDULE if schedule is None else tuple(schedule)
    n0, last = int(n0), schedule[-1]
    return max(1, int(n0 < last) + sum(1 for n in schedule[:-1] if n > n0))


class Heads(NamedTuple):
    """What :func:`open_heads` reads of a score's heads: ``values`` (layer, head, axis),
    ``p_stats`` (layer, head), ``groups`` {null storage: layer positions}, ``unaligned``
    (layer, head) or None."""

    values: np.ndarray
    p_stats: np.ndarray
    groups: dict
    unaligned: np.ndarray | None = None


def settle(heads: Heads, draw, size: dict, *, alpha: float, schedule=None,
           error: float | None = None, on_grow=None):
    """({storage: {axis: (n,)}}, {storage: n}): drawn along ``schedule`` from ``size`` until no head
    is open (:func:`open_heads`, intervals at :func:`interval_level`). ``draw(storage, n)``: first n
    draws; ``on_grow(storage, n)``: told before a storage grows."""
    schedule = SCHEDULE if schedule is None else tuple(schedule)
    values = np.asarray(heads.values, dtype=np.float64)
    p_stats, groups, unaligned = heads.p_stats, heads.groups, heads.unaligned
    level = interval_level(values.shape[0] * values.shape[1], values.shape[2],
                           unaligned is not None, looks_from(min(size.values()), schedule),
                           error)

    def open_groups(nulls):
        open_ = open_heads(values, p_stats, nulls, groups, n_final=schedule[-1], alpha=alpha,
                           level=level, unaligned=unaligned)
        return [s for s, rows in groups.items() if open_[np.asarray(rows, np.int64)].any()]

    return grow_until_settled(size, schedule, lambda s, n, _: draw(s, n), open_groups, on_grow)


def sequential_nulls(ds, profiles, null_storages, d: int, d_h: int, *, alpha: float,
                     seed: int, progress: bool = False, start: dict | None = None):
    """({null storage: {axis: (n,)}}, {null storage: n}): each layer null storage's profile null
    (``null_storages``, per layer), from :func:`first_draws` along :data:`SCHEDULE` until no head
    is open (:func:`settle`). ``start``: {name: n} least draws; ``profiles``: per layer
    {axis: (head,)}; ``ds``: the score (its ``head_p_value``)."""
    from ...progress import message
    from .cache import cached_profile_null
    from .factors import FACTOR_AXES, null_storage

    groups: dict = {}  # {null storage's record: layer positions}
    for i, s in enumerate(null_storages):
        groups.setdefault(null_storage(s), []).append(i)
    values = np.stack([np.stack([np.asarray(p[a], np.float64) for a in FACTOR_AXES], -1)
                       for p in profiles])
    p_stats = (ds["head_p_value"].transpose("layer", "head").values if "head_p_value" in ds
               else np.full(values.shape[:2], np.nan))
    unaligned = (np.stack([np.asarray(p["symmetry_unaligned"], np.float64) for p in profiles])
                 if all("symmetry_unaligned" in p for p in profiles) else None)
    size = {s: max(first_draws(d, d_h, s, seed), int((start or {}).get(s.name, 0)))
            for s in groups}

    def draw(s, n):
        return cached_profile_null(d, d_h, s, n=n, seed=seed, progress=progress)

    def said(s, n):
        if progress:
            message(f"rmtbase: some heads' profile decisions are not settled on the {s.name} "
                    f"profile null; drawing it to {n}")

    return settle(Heads(values, p_stats, groups, unaligned), draw, size, alpha=alpha,
                  on_grow=said)
