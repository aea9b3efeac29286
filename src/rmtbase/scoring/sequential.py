"""The heads against their nulls' references, each spectral reference grown while needed.

:func:`decide` tests every head against the reference of its layers
(:class:`rmtbase.scoring.reference.Reference`, one per group of layers stored alike) through
:func:`rmtbase.decision.verdict.score_values_by_layer` (per-statistic tests and each head's
combination from its own layers' draws, Benjamini–Hochberg over all heads). Statistics
undefined under some reference are left out for every head. A reference that is
:attr:`~rmtbase.scoring.reference.Reference.sequential` (the Gaussian null's tables) has its
spectral draws extended ×5 at a time: under the default rule while some head's decision is not
settled (:func:`rmtbase.scoring.stopping.unsettled`, stated error
:data:`~rmtbase.scoring.stopping.STOP_ERROR`), with ``max_draws`` up to it wherever a head near
a flag lies beyond all but 10 draws (Besag & Clifford 1991). The rules are in
:mod:`rmtbase.scoring.stopping` and :mod:`rmtbase.scoring.score`. Then, under the default
rule, the joint table (element statistics and the omnibus calibration) is grown through
:data:`~rmtbase.scoring.joint_stopping.SCHEDULE` while some head's decision on its statistics
p could differ at :data:`~rmtbase.scoring.joint_stopping.JOINT_DRAWS` draws
(:mod:`rmtbase.scoring.joint_stopping`); ``head_calibration_draws`` states the draws behind
each head's statistics p.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..decision.family import in_family
from ..decision.scale import normalise
from ..decision.tails import TailModel
from ..decision.verdict import score_values_by_layer
from .reference import spectral_names
from .stopping import GROWTH, MAX_DRAWS, STOP_ERROR, looks, stopping_note, unsettled


@dataclass
class Decided:
    """What :func:`decide` returns: the verdict ``ds``, the statistics tested and their values
    (without those undefined under some reference), and the undefined ones {name: (finite,
    draws, storage)}."""

    ds: object
    tested: list
    values: dict
    undefined: dict


@dataclass(frozen=True)
class Decision:
    """How the heads are decided: the null (its name and which statistics enter), BH level,
    query heads per key head, statistics kept out, the extension cap (None: the stopping
    rule), progress lines."""

    null: object
    alpha: float
    group_size: int
    unreliable: tuple
    max_draws: int | None
    progress: bool


def _groups(refs):
    return [(None if len(refs) == 1 else g.rows, g.joint, g.spectral_null) for g in refs]


def _verdict(refs, values, how: Decision):
    """The verdict on the draws there are, with ``head_p_exceedances`` (the calibration count
    behind each head p, for :func:`_joint_bounds`; dropped by :func:`_grow_joint`, every
    verdict's last step)."""
    return score_values_by_layer(values, values["q.rms"], values["k.rms"], _groups(refs),
                                 alpha=how.alpha, null_kind=how.null,
                                 group_size=how.group_size, unreliable=how.unreliable)


def _thin_spectral(ds, values, ref, names, alpha) -> list[str]:
    """Spectral statistics on which a head that is, or is close to being, flagged
    (head q ≤ 2α) has fewer than 10 null draws beyond it: there more draws turn an
    extrapolated p into an empirical one (Besag & Clifford 1991's sequential rule)."""
    near = np.asarray(ds["head_q_value"].values <= 2 * alpha)
    if not near.any():
        return []
    out = []
    for s in names:
        model = TailModel(normalise(s, ref[s], ref["q.rms"], ref["k.rms"]))
        if model.needs_more(normalise(s, values[s], values["q.rms"], values["k.rms"])[near]):
            out.append(s)
    return out


def _prune(refs, values, tested):
    """(tested, values, undefined) without the statistics undefined under some reference
    (e.g. Weibull fits of a Q4_0 null: exact zeros among the fitted ranks)."""
    undefined = {}
    for g in refs:
        for k, (fin, n) in g.undefined(tested).items():
            undefined.setdefault(k, (fin, n, g.storage))
    if undefined:
        tested = [k for k in tested if k not in undefined]
        values = {k: v for k, v in values.items() if k not in undefined}
        for g in refs:
            g.drop(undefined)
    return tested, values, undefined


def _why_decide(g, open_heads, counts) -> str | None:
    """Why reference ``g`` is extended under the stopping rule (None: it is not)."""
    from .stopping import open_reasons

    if not open_heads[g.rows].any():
        return None
    why = f"{int(open_heads[g.rows].sum())} heads' decisions are not settled"
    if counts is not None:
        mine = np.zeros_like(open_heads)
        mine[g.rows] = open_heads[g.rows]
        why += f" ({open_reasons(mine, *counts)})"
    return why


def _why_tail(g, ds, values, names, refs, alpha) -> str | None:
    """Why reference ``g`` is extended under the ``max_draws`` rule (None: it is not)."""
    part = ds.isel(layer=g.rows) if len(refs) > 1 else ds
    sub = {k: v[g.rows] for k, v in values.items()} if len(refs) > 1 else values
    thin = _thin_spectral(part, sub, g.spectral_ref, names, alpha)
    if not thin:
        return None
    return (f"heads near a flag lie beyond all but a few of {g.spectral_ref['q.rms'].size} "
            f"null draws of {', '.join(thin)}")


def _extend(refs, names, values, ds, how: Decision, cap, n_looks):
    """One look: extend every reference that needs it; returns (grown, settled)."""
    from ..progress import message
    from .stopping import tail_counts

    decide = how.max_draws is None
    open_heads, counts, settled = None, None, True
    if decide:
        open_heads = unsettled(_groups(refs), values, names, alpha=how.alpha,
                               unreliable=how.unreliable, n_looks=n_looks)
        settled = not open_heads.any()
        if how.progress and not settled:  # which heads and statistics
            counts = tail_counts(_groups(refs), values, names)
    grown = False
    for g in refs:
        have = g.spectral_ref["q.rms"].size
        if not g.can_extend() or have >= cap:
            continue
        why = _why_decide(g, open_heads, counts) if decide else \
            _why_tail(g, ds, values, names, refs, how.alpha)
        if why is None:
            continue
        n_next = min(cap, GROWTH * have)
        if how.progress:
            where = "" if len(refs) == 1 else f" ({g.storage} layers)"
            message(f"rmtbase: {why}; extending the spectral null{where} to {n_next}")
        got = g.extend(names, n_next)
        if how.progress and got != n_next:  # a larger shipped or cached table is used whole
            message(f"rmtbase: a stored spectral null of {got} draws serves it")
        grown = True
    return grown, settled


def _calibration_draws(g, how: Decision, grow: bool = False):
    """The draws behind each head's statistics p in ``g``: an int for a shared table, per head
    ``(layer, head)`` for a per-head null (:func:`rmtbase.scoring.head_growth.calibration_draws`);
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
    (:func:`rmtbase.scoring.joint_stopping.p_bounds`), each head from its own draws; with
    ``grow``, a growing per-head null's heads at its largest size instead."""
    from .joint_stopping import JOINT_DRAWS, p_bounds

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
    """Grow a per-head null (:mod:`rmtbase.scoring.head_growth`) for the heads whose decision
    could differ at its largest size, then decide again; returns the last verdict."""
    from ..progress import message
    from . import head_growth as G
    from .joint_stopping import unsettled

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
        ds = _verdict(refs, values, how)
    return ds


def _state_open(refs, ds, how: Decision) -> None:
    """attrs ``head_open_decisions``: heads read from fewer draws than the joint null's full size
    whose decision could differ there (:func:`rmtbase.scoring.joint_stopping.unsettled`) —
    fixed by the caller (``draws``, ``max_draws``) or per head (the permutation null) — said
    on stderr too (issue 56 item 3: the error stated where it could move a decision)."""
    from ..progress import message
    from .joint_stopping import JOINT_DRAWS, unsettled

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


def _grow_joint(refs, values, ds, how: Decision):
    """Grow the joint tables (:mod:`rmtbase.scoring.joint_stopping`) while some head's
    decision could differ at their full size; returns the verdict on the draws used, with
    ``head_calibration_draws`` (the joint draws behind each head's statistics p)."""
    from ..progress import message
    from . import joint_stopping as J

    while (how.max_draws is None and "head_p_value" in ds
           and any(J.can_grow(g) for g in refs)):
        lo, hi = _joint_bounds(refs, ds, len(J.SCHEDULE) + 1, how)
        open_heads = J.unsettled(lo, hi, how.alpha)
        grown = False
        for g in refs:
            rows = slice(None) if g.rows is None else g.rows
            if not (J.can_grow(g) and open_heads[rows].any()):
                continue
            n_next = J.next_size(np.asarray(g.joint["q.rms"]).size)
            if how.progress:
                message(f"rmtbase: {int(open_heads[rows].sum())} head(s) could change their "
                        f"decision with more joint null draws; drawing {n_next}")
            J.grow(g, n_next)
            grown = True
        if not grown:
            break
        ds = _verdict(refs, values, how)
    ds = _grow_heads(refs, values, ds, how)
    _state_open(refs, ds, how)
    draws = np.full((ds.sizes["layer"], ds.sizes["head"]), -1, dtype=np.int64)
    for g in refs:
        draws[slice(None) if g.rows is None else g.rows] = _calibration_draws(g, how)
    ds["head_calibration_draws"] = (("layer", "head"), draws, {"definition": (
        "joint null draws calibrating the head's statistics p (head_p_statistics: the omnibus "
        "calibration and the element statistics' p); its Monte Carlo se at p is about "
        "sqrt(p (1 - p) / draws)")})
    ds.attrs["joint_null_draws"] = int(draws.min())
    return ds.drop_vars("head_p_exceedances", errors="ignore")


def decide(refs, values, tested, how: Decision) -> Decided:
    """The heads against ``refs`` (module docstring)."""
    tested, values, undefined = _prune(refs, values, tested)
    names = spectral_names(tested)
    for g in refs:
        if g.sequential:
            g.start_spectral(names)
    ds = _verdict(refs, values, how)
    if not (names and any(g.sequential for g in refs)):
        return Decided(_grow_joint(refs, values, ds, how), tested, values, undefined)
    cap = MAX_DRAWS if how.max_draws is None else int(how.max_draws)
    n_looks = looks(min(g.spectral_ref["q.rms"].size for g in refs), cap)
    while True:
        grown, settled = _extend(refs, names, values, ds, how, cap, n_looks)
        if not grown:
            break
        ds = _verdict(refs, values, how)
    ds = _grow_joint(refs, values, ds, how)
    if how.max_draws is None:
        used = int(min(g.spectral_ref["q.rms"].size for g in refs))
        ds.attrs.update(stop_rule="decision", stop_error=STOP_ERROR,
                        stopping_note=stopping_note(used, settled, cap))
    else:
        ds.attrs["stop_rule"] = "tail"
    return Decided(ds, tested, values, undefined)


__all__ = ["Decided", "Decision", "decide"]
