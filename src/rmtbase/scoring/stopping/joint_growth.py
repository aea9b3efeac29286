"""The joint table grown through :data:`~rmtbase.scoring.stopping.joint.SCHEDULE` while a head's
statistics decision could differ at :data:`~rmtbase.scoring.stopping.joint.JOINT_DRAWS` (a step
the growth budget cannot pay for is not taken: :mod:`rmtbase.scoring.stopping.budget`), and a
per-head null's open heads (:mod:`rmtbase.scoring.stopping.head_growth`); sets
``head_calibration_draws`` and ``head_open_decisions``.
"""

from __future__ import annotations

import numpy as np

from ...decision.family import in_family
from ..measures.verdict import Decision, verdict
from .rule import STOP_ERROR


def _calibration_draws(g, how: Decision, grow: bool = False):
    """The draws behind each head's statistics p in ``g``: an int for a shared table, per head
    ``(layer, head)`` for a per-head null (:func:`rmtbase.scoring.stopping.head_growth.calibration_draws`);
    with ``grow``, a growing per-head null's largest (else None)."""
    from . import head_growth as G

    if np.asarray(g.joint["q.rms"]).ndim < 3:
        return None if grow else int(np.asarray(g.joint["q.rms"]).shape[-1])
    family = in_family(list(g.joint), null=how.null, unreliable=how.unreliable)
    if grow:
        return G.final_draws(g, family) if G.can_grow(g) else None
    return G.calibration_draws(g, family)


def _joint_bounds(refs, ds, n_looks: int, how: Decision, grow: bool = False):
    """(p_lo, p_hi) of every head's statistics p at the joint null's full size
    (:func:`rmtbase.scoring.stopping.joint.p_bounds`), each head from its own draws; with
    ``grow``, a growing per-head null's heads at its largest size instead."""
    from .joint import JOINT_DRAWS, p_bounds

    p = ds["head_p_value"].transpose("layer", "head").values.astype(np.float64)
    meth = ds["head_p_method"].transpose("layer", "head").values.astype(object)
    k = ds["head_p_exceedances"].transpose("layer", "head").values
    lo, hi = np.full(p.shape, np.nan), np.full(p.shape, np.nan)
    level = STOP_ERROR / (max(int(np.isfinite(p).sum()), 1) * n_looks)
    for g in refs:
        rows = slice(None) if g.rows is None else g.rows
        n = np.broadcast_to(_calibration_draws(g, how), p[rows].shape)
        top = _calibration_draws(g, how, grow=True) if grow else None
        top = np.broadcast_to(np.maximum(n, JOINT_DRAWS) if top is None else top, n.shape)
        sub_lo, sub_hi = np.full(n.shape, np.nan), np.full(n.shape, np.nan)
        for a, b in set(zip(n.ravel().tolist(), top.ravel().tolist(), strict=True)):
            at = (n == a) & (top == b)
            sub_lo[at], sub_hi[at] = p_bounds(p[rows][at], meth[rows][at], a, max(a, b), level,
                                              exceedances=k[rows][at])
        lo[rows], hi[rows] = sub_lo, sub_hi
    return lo, hi


def _grow_heads(refs, values, ds, how: Decision):
    """Grow a per-head null (:mod:`rmtbase.scoring.stopping.head_growth`) for the heads whose decision
    could differ at its largest size, then decide again; returns the last verdict."""
    from ...progress import message
    from . import head_growth as G
    from .joint import unsettled

    growing = [g for g in refs if G.can_grow(g)]
    while how.max_draws is None and growing and "head_p_value" in ds:
        open_heads = unsettled(*_joint_bounds(refs, ds, G.LOOKS, how, grow=True), how.alpha)
        grown = 0
        for g in growing:
            mine = open_heads[slice(None) if g.rows is None else g.rows]
            fac = G.factors(g)
            for f in sorted(set(fac[mine & (fac < G.MAX_FACTOR)].tolist())):
                heads = mine & (fac == f)
                if not G.fits(g, f * G.GROWTH):
                    if how.progress:
                        message(f"rmtbase: {int(heads.sum())} open head(s) kept at "
                                f"{g.draws * f} permutations: more do not fit in memory")
                    continue
                if how.progress:
                    message(f"rmtbase: {int(heads.sum())} head(s) could change their decision "
                            f"with more permutations; drawing {g.draws * f * G.GROWTH} each")
                grown += G.grow(g, heads)
        if not grown:
            break
        ds = verdict(refs, values, how)
    return ds


def _state_open(refs, ds, how: Decision) -> None:
    """attrs ``head_open_decisions``: heads read from fewer draws than the joint null's full size
    whose decision could differ there (:func:`rmtbase.scoring.stopping.joint.unsettled`) —
    fixed by the caller (``draws``, ``max_draws``) or per head (the permutation null) — said
    on stderr too (the error stated where it could move a decision)."""
    from ...progress import message
    from .joint import JOINT_DRAWS, unsettled

    if "head_p_value" not in ds or "head_p_exceedances" not in ds:
        return
    short = np.zeros((ds.sizes["layer"], ds.sizes["head"]), dtype=bool)
    for g in refs:  # heads read from fewer draws than the full size
        if np.asarray(g.joint["q.rms"]).shape[-1] < JOINT_DRAWS:
            short[slice(None) if g.rows is None else g.rows] = True
    n_open = int((unsettled(*_joint_bounds(refs, ds, 1, how), how.alpha) & short).sum())
    ds.attrs["head_open_decisions"] = n_open
    if n_open and how.progress:
        message(f"rmtbase: {n_open} head(s) could change their decision at {JOINT_DRAWS} null "
                "draws (theirs were fixed or at their largest; head_calibration_draws says how "
                "many each read)")


def grow_joint(refs, values, ds, how: Decision):
    """Grow the joint tables (:mod:`rmtbase.scoring.stopping.joint`) while some head's
    decision could differ at their full size; returns the verdict on the draws used, with
    ``head_calibration_draws`` (the joint draws behind each head's statistics p)."""
    from ...progress import message
    from . import joint as J

    said = set()  # references whose growth plan (and its cost) was said
    while (how.max_draws is None and "head_p_value" in ds
           and any(J.can_grow(g) for g in refs)):
        lo, hi = _joint_bounds(refs, ds, len(J.SCHEDULE) + 1, how)
        open_heads = J.unsettled(lo, hi, how.alpha)
        grown = False
        for g in refs:
            rows = slice(None) if g.rows is None else g.rows
            if not (J.can_grow(g) and open_heads[rows].any()):
                continue
            have = np.asarray(g.joint["q.rms"]).size
            n_next = J.next_size(have)
            budget = getattr(how, "budget", None)
            if budget is not None and not budget.afford(
                    g.cells.d, g.cells.d_h, g.cells.kind, have, n_next):
                if how.progress:
                    message(f"rmtbase: the growth budget leaves the joint null at {have} draws; "
                            f"{int(open_heads[rows].sum())} open head(s) are reported undecided")
                continue
            if how.progress and id(g) not in said:
                from ...baseline.draw_cost import growth_line

                said.add(id(g))
                message(growth_line(g.cells.d, g.cells.d_h, g.cells.kind, str(g.storage), have,
                                    J.JOINT_DRAWS))
                if budget is not None and budget.line():
                    message(budget.line())
            if how.progress:
                message(f"rmtbase: {int(open_heads[rows].sum())} head(s) could change their "
                        f"decision with more joint null draws; drawing {n_next}")
            J.grow(g, n_next)
            grown = True
        if not grown:
            break
        ds = verdict(refs, values, how)
    ds = _grow_heads(refs, values, ds, how)
    _state_open(refs, ds, how)
    budget = getattr(how, "budget", None)
    if budget is not None and any(k != "spectral" for k, _, _ in budget.refused):
        # the bracket of each head's p at the full size, for the undecided heads
        budget.joint_bounds = _joint_bounds(refs, ds, len(J.SCHEDULE) + 1, how)
    draws = np.full((ds.sizes["layer"], ds.sizes["head"]), -1, dtype=np.int64)
    for g in refs:
        draws[slice(None) if g.rows is None else g.rows] = _calibration_draws(g, how)
    ds["head_calibration_draws"] = (("layer", "head"), draws, {"definition": (
        "joint null draws calibrating the head's statistics p (head_p_statistics: the omnibus "
        "calibration and the element statistics' p); its Monte Carlo se at p is about "
        "sqrt(p (1 - p) / draws)")})
    ds.attrs["joint_null_draws"] = int(draws.min())
    return ds.drop_vars("head_p_exceedances", errors="ignore")
