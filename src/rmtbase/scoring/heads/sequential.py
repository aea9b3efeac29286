"""The heads against their nulls' references, each spectral reference grown while needed.

:func:`decide` tests every head (:func:`rmtbase.decision.verdict.score_values_by_layer`),
extends the spectral draws (:mod:`rmtbase.scoring.stopping.rule`), then grows the joint table
(:mod:`rmtbase.scoring.stopping.joint_growth`); where the growth budget refused a step each
head's statistics p is bracketed (:func:`brackets`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..measures.verdict import Decision, verdict
from ..stopping.joint_growth import grow_joint
from ..stopping.rule import MAX_DRAWS, STOP_ERROR, looks
from .reference import spectral_names
from .spectral_extension import extend_spectral
from .stopping_text import stopping_note


@dataclass
class Decided:
    """What :func:`decide` returns: the verdict ``ds``, the statistics tested and their values
    (without those undefined under some reference), and the undefined ones {name: (finite,
    draws, storage)}."""

    ds: object
    tested: list
    values: dict
    undefined: dict
    #: (p_lo, p_hi, draws) of each head's statistics p where the growth budget refused a step
    #: (:func:`brackets`), else None
    bracket: tuple | None = None


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


def decide(refs, values, tested, how: Decision) -> Decided:
    """The heads against ``refs`` (module docstring)."""
    tested, values, undefined = _prune(refs, values, tested)
    names = spectral_names(tested)
    for g in refs:
        if g.sequential:
            g.start_spectral(names)
    ds = verdict(refs, values, how)
    if not (names and any(g.sequential for g in refs)):
        ds = grow_joint(refs, values, ds, how)
        return Decided(ds, tested, values, undefined, brackets(refs, values, names, ds, how, 1))
    cap = MAX_DRAWS if how.max_draws is None else int(how.max_draws)
    n_looks = looks(min(g.spectral_ref["q.rms"].size for g in refs), cap)
    said: set = set()  # references whose growth plan (and its cost) was said
    while True:
        grown, settled = extend_spectral(refs, names, values, ds, how, cap, n_looks, said)
        if not grown:
            break
        ds = verdict(refs, values, how)
    ds = grow_joint(refs, values, ds, how)
    if how.max_draws is None:
        used = int(min(g.spectral_ref["q.rms"].size for g in refs))
        ds.attrs.update(stop_rule="decision", stop_error=STOP_ERROR,
                        stopping_note=stopping_note(
                            used, settled, cap, budget=any(
                                k == "spectral" for k, _, _ in getattr(how.budget, "refused", ()))))
    else:
        ds.attrs["stop_rule"] = "tail"
    return Decided(ds, tested, values, undefined, brackets(refs, values, names, ds, how, n_looks))


def brackets(refs, values, names, ds, how: Decision, n_looks: int):
    """(p_lo, p_hi, draws) of every head's statistics p where the growth budget refused a step,
    else None: for a refused spectral step the spectral rule's bracket
    (:func:`rmtbase.scoring.stopping.rule.head_bounds`, of p on an unlimited spectral
    reference), for a refused joint step the joint rule's (of p at
    :data:`~rmtbase.scoring.stopping.joint.JOINT_DRAWS`); both refused, the union of the two.
    Each bracket holds its p with probability ≥ 1 − STOP_ERROR. ``draws``: the tables' sizes
    in words ("spectral 8000, joint 3000")."""
    import numpy as np

    from ..measures.verdict import reference_groups
    from ..stopping.rule import head_bounds

    budget = getattr(how, "budget", None)
    if budget is None or not budget.bitten:
        return None
    kinds = {k for k, _, _ in budget.refused}
    p = ds["head_p_value"].transpose("layer", "head").values.astype(np.float64)
    lo, hi, words = p.copy(), p.copy(), []
    if "spectral" in kinds:
        b = head_bounds(reference_groups(refs), values, names, n_looks=n_looks,
                        unreliable=how.unreliable)
        if b is not None:
            lo, hi = np.fmin(lo, b[0]), np.fmax(hi, b[1])
        words.append(f"spectral {min(g.spectral_ref['q.rms'].size for g in refs)}")
    if kinds - {"spectral"} and budget.joint_bounds is not None:
        b = budget.joint_bounds
        lo, hi = np.fmin(lo, b[0]), np.fmax(hi, b[1])
        words.append(f"joint {int(ds.attrs.get('joint_null_draws', 0))}")
    return lo, hi, ", ".join(words)


__all__ = ["Decided", "brackets", "decide"]
