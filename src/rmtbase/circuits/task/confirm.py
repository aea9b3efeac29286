"""Which exactly patched edges of a task are confirmed: the rule of :mod:`..core.rule`
(:func:`~..core.rule.passes`, :func:`~..core.rule.keeps`), as the head search applies it.
An edge's ``δ = m(M) − m(M ∖ e)`` is confirmed when ``|δ| ≥ 3 se`` and ``≥ 10 %`` of
``|m(M) − m(∅)|`` on at least :data:`~..core.rule.MIN_SEQUENCES` pairs (an se of 0 is no
evidence: never confirmed), and the other counterfactual (:data:`OTHER`), measured only where
the first part passes, keeps half of ``δ`` with its sign; where it does not, ``depends`` says
``zero`` (an edge only zero ablation shows is not an edge: Heimersheim & Nanda 2024,
arXiv:2404.15255) or ``counterfactual``. In context (``within`` a circuit ``C``,
:func:`..core.exact.patch_edges`), ``δ = m(C) − m(C ∖ e)`` under
both counterfactuals."""

from __future__ import annotations

import numpy as np

from ..core import rule
from ..core.counterfactual import TASK_OTHER
from ..core.exact import patch_edges
from ..core.runner import Runner

#: The counterfactual that checks each one.
OTHER = TASK_OTHER


def confirm(runner: Runner, edges, effect, se, behaviour: float, within=None,
            require_other: bool = True) -> dict:
    """``{edge: {"confirmed", "other", "exact_other", "depends"}}`` for exactly patched
    ``edges`` with ``effect``, ``se`` under ``runner``'s counterfactual (module docstring);
    ``behaviour``: ``m(M) − m(∅)``. ``exact_other`` is NaN where the other counterfactual
    was not measured, ``depends`` None where nothing failed; ``within``: in that circuit's
    context; ``require_other`` False: the other is reported, not required."""
    edges = [int(e) for e in edges]
    effect, se = np.asarray(effect, dtype=np.float64), np.asarray(se, dtype=np.float64)
    enough = runner.task.n >= rule.MIN_SEQUENCES
    first = [enough and b > 0 and rule.passes(a, b, behaviour, True)  # se 0: no evidence
             for a, b in zip(effect, se, strict=True)]
    other = OTHER[runner.counterfactual]
    check = np.full(len(edges), np.nan)
    idx = np.flatnonzero(first)
    if idx.size:
        r2 = Runner(runner.tm, runner.task, metric=runner.metric, counterfactual=other,
                    batch=runner.batch, progress=runner.progress)
        check[idx] = patch_edges(r2, [edges[i] for i in idx], within=within)[0]
    floor = rule.floor_of(behaviour, True)
    out = {}
    for i, e in enumerate(edges):
        kept = rule.keeps(effect[i], check[i], floor)
        ok = bool(first[i]) and (kept or not require_other)
        depends = None
        if first[i] and not ok:
            depends = "zero" if runner.counterfactual == "zero" else "counterfactual"
        out[e] = {"confirmed": ok, "other": other, "exact_other": float(check[i]),
                  "depends": depends}
    return out


def stop_rule(behaviour: float, n_pairs: int):
    """:func:`.prune.prune`'s ``stop``: every live ``δ`` of the behaviour's sign and past the
    rule's first part (:func:`~..core.rule.passes`) on ≥ 8 pairs."""
    def stop(d, se) -> bool:
        return n_pairs >= rule.MIN_SEQUENCES and len(d) > 0 and all(
            x * behaviour > 0 and s > 0 and rule.passes(x, s, behaviour, True)
            for x, s in zip(d, se, strict=True))
    return stop


def confirm_within(runner: Runner, circuit, edges, d, se, behaviour: float) -> dict:
    """Every edge's verdict: those of ``edges`` (each in ``circuit``, ``(n_edges,)`` bools)
    by :func:`confirm` on their in-context ``(d, se)``, ``context`` holding them; every other
    edge None and not confirmed. The other counterfactual replaces the whole context too: not
    required for the corrupted twin where the circuit leaves edges out (mean ablation outside a
    circuit found on twins leaves it nothing: ≈ 0 for every edge on the trained zoo)."""
    circuit = np.asarray(circuit, dtype=bool)
    edges = [int(e) for e in edges]
    out = confirm(runner, edges, d, se, behaviour, within=circuit,
                  require_other=runner.counterfactual != "corrupted" or circuit.all()) \
        if edges else {}
    for e, a, b in zip(edges, d, se, strict=True):
        out[e]["context"] = (float(a), float(b))
    for e in range(circuit.size):
        if e not in out:
            out[e] = {"confirmed": False, "other": OTHER[runner.counterfactual],
                      "exact_other": float("nan"), "depends": None, "context": None}
    return out


def confirm_in_context(runner: Runner, pruned: dict, behaviour: float) -> dict:
    """:func:`confirm_within` the stopped circuit of ``pruned`` (:func:`.prune.prune`), on the
    ``δ`` and se its round measured."""
    kept = np.asarray(pruned["stopped"], dtype=bool)
    idx = np.flatnonzero(kept)
    return confirm_within(runner, kept, idx, pruned["stopped_effect"][idx],
                          pruned["stopped_se"][idx], behaviour)


_OTHER_IN_CONTEXT = ("the other counterfactual keeps half of that loss with its sign in the "
                     "same context (for corrupted, reported, not required where the circuit "
                     "leaves edges out: mean ablates the whole context); no correction for "
                     "the selection")
RULE_IN_CONTEXT = ("in context: the pruning's first circuit whose every edge, removed from it "
                   "alone, loses >= 3 se and >= 10 % of |full - empty| on >= 8 fit pairs; "
                   + _OTHER_IN_CONTEXT)
RULE_IN_CIRCUIT = ("in context: the reported circuit's top edges, each removed from it alone, "
                   "lose >= 3 se and >= 10 % of |full - empty| on >= 8 fit pairs; "
                   + _OTHER_IN_CONTEXT)
#: :func:`confirmation`'s rule by the circuit the verdicts were taken in.
RULES = {"stopped": RULE_IN_CONTEXT, "reported": RULE_IN_CIRCUIT}


def verdict_row(v: dict) -> dict:
    """One edge's verdict as the summary lists it."""
    ctx = v.get("context")
    return {"confirmed": v["confirmed"], "other_counterfactual": v["other"],
            "exact_other": None if np.isnan(v["exact_other"]) else v["exact_other"],
            "depends": v["depends"], "effect_in_context": None if ctx is None else ctx[0],
            "effect_in_context_se": None if ctx is None else ctx[1]}


def confirmation(verdicts: dict, patched: int, context: str, n_prompts: int) -> dict:
    """The summary's ``confirmation``: the rule (:data:`RULES` of ``context``, the circuit
    the verdicts were taken in), the edges patched, tested in that circuit and confirmed,
    and the null edges expected to pass ``≥ 3 se`` on the ``n_prompts`` fit prompts."""
    from .weights import expected_false_confirmations

    tested = sum(v.get("context") is not None for v in verdicts.values())
    return {"rule": RULES[context], "in_context": True,
            "patched": int(patched), "tested": tested,
            "confirmed": int(sum(v["confirmed"] for v in verdicts.values())),
            "expected_false_confirmations": expected_false_confirmations(tested, n_prompts)}


__all__ = ["OTHER", "RULES", "RULE_IN_CIRCUIT", "RULE_IN_CONTEXT", "confirm",
           "confirm_in_context", "confirm_within", "confirmation", "stop_rule", "verdict_row"]
