"""A task's edges ranked by pruning in context: each edge's exact effect measured against the
circuit being built. From every edge kept (``C = M``) each round measures, for every edge
``e`` in ``C``, ``δ_e = m(C) − m(C ∖ {e})`` (mean over prompts; positive: the edge carries the
metric) and removes the ``fraction`` with the smallest ``δ`` (one at a time below ``tail``
edges). The removal order, reversed, ranks every edge, so each top ``k`` was itself measured
as a circuit: ACDC's greedy pruning (Conmy et al. 2023, arXiv:2304.14997) without its
threshold. The first round is every edge against the clean run (:mod:`..core.exact`); later rounds
see what a gradient at a saturated clean run cannot. ``stop``: the first round whose every ``δ``
passes a rule marks a circuit (ACDC's, statistically stopped). Cost (:func:`plan`): about
``E / fraction + tail² / 2`` edge sets, each a pass over the prompts, each starting at the
stage where it differs from the round's circuit.

Where that is too many, :func:`prune_estimated` prunes on estimates: each round scores every
edge of ``C`` by the integrated gradient in ``C``'s context (:func:`..core.attribution.attribute`
with ``within``: the path from the counterfactual input to ``C``'s run, EAP-IG's estimate of
``δ_e``) and keeps the ``keep`` fraction that carries most; the first round, in the full
model, is EAP-IG (Hanna et al. 2024). A round costs ``steps`` forward and backward passes,
whatever the graph's size."""

from __future__ import annotations

import numpy as np

from ...checks import check_int
from ...errors import InputError
from ...limits import MAX_COUNT
from ..core.attribution import attribute
from ..core.runner import Runner
from ..core.se import mean_se

#: Fraction of the circuit's edges removed per round while more than :data:`TAIL` are left.
FRACTION = 0.1
#: Below this many edges, one edge is removed per round.
TAIL = 32
#: The fraction of the live edges an estimated round keeps, and its integral's points.
KEEP = 0.1
STEPS = 5
#: Edge sets × prompts the pruning may run by default (:func:`fits`): a 262-edge graph on
#: 32 prompts plans about 2,900 sets, 93,000 set-prompts.
BUDGET = 400_000


def plan(n_edges: int, *, fraction: float = FRACTION, tail: int = TAIL) -> int:
    """Edge sets :func:`prune` runs on ``n_edges`` edges (each a pass over the prompts)."""
    n, total = int(n_edges), 0
    while n:
        total += n
        n -= _removed(n, fraction, tail)
    return total


def fits(n_edges: int, n_prompts: int, budget: int = BUDGET) -> bool:
    """Whether :func:`plan` × ``n_prompts`` is within ``budget`` set-prompts."""
    return plan(n_edges) * int(n_prompts) <= int(budget)


def plan_line(n_edges: int, pairs: int, tokens: int, fit: int, *, budget: int = BUDGET,
              top: int = 20, steps: int = STEPS) -> str:
    """The search's size before it starts: pairs × tokens, the graph's edges and the edge sets
    the ranking runs, each a forward pass over the ``fit`` pairs (:func:`plan` where it
    :func:`fits` ``budget``, else :func:`prune_estimated`'s rounds and the ``top`` edges
    patched exactly)."""
    n, size = plan(n_edges), f"{pairs} prompt pairs x {tokens} tokens ({fit} to rank)"
    if budget and fits(n_edges, fit, budget):
        return (f"plan: {size}, {n_edges:,} edges; pruning in context: {n:,} edge sets, each "
                f"a forward pass over the {fit} pairs ({n * fit:,} of {budget:,} set-prompts)")
    return (f"plan: {size}, {n_edges:,} edges; pruning would take {n:,} edge sets x {fit} "
            f"pairs, over {budget:,}: pruning on integrated gradients, "
            f"{estimated_rounds(n_edges)} rounds of {steps} forward and backward passes, then "
            f"the top {min(top, n_edges)} edges patched exactly")


def rate_line(total: int, n: int, seconds: float) -> str:
    """The pruning's ``total`` set-prompts timed at the rate of its first batch (``n`` in
    ``seconds``)."""
    rate = n / max(seconds, 1e-9)
    t = total / rate
    took = f"{t:.0f} s" if t < 90 else f"{t / 60:.0f} min" if t < 5400 else f"{t / 3600:.1f} h"
    return (f"pruning in context: about {took} for its {total:,} set-prompts at its first "
            f"batch's {rate:,.0f} a second")


def _told_once(runner: Runner, say, total: int):
    """An ``on_batch`` for ``runner`` that says :func:`rate_line` once, then removes itself."""
    def tell(n, seconds):
        runner.on_batch = None
        say(rate_line(total, n, seconds))
    return tell


def _removed(n: int, fraction: float, tail: int) -> int:
    return 1 if n <= tail else max(1, int(fraction * n))


def behaviour_sign(runner: Runner) -> float:
    """The sign of ``m(M) − m(∅)`` on ``runner``'s task (+1 where it does not move)."""
    g = runner.tm.graph
    full, empty = runner.metrics([g.full(), g.empty()], desc="full and empty graphs").mean(-1)
    return -1.0 if full < empty else 1.0


def prune(runner: Runner, *, fraction: float = FRACTION, tail: int = TAIL, say=None,
          stop=None, sign: float | None = None) -> dict:
    """Rank every edge of ``runner``'s graph by pruning in context (module docstring):
    ``order`` (edge numbers, the last removed first), ``key`` ``(E,)`` (``E`` for the first
    edge of ``order`` down to 1), ``context`` and ``context_se`` ``(E,)`` (each edge's ``δ``
    and its se over prompts in the round that removed it), ``round`` ``(E,)`` (that round,
    from 0: edges of round ``≥ r`` form the circuit round ``r`` started from), ``clean`` and
    ``clean_se`` (the first round's: every edge against the clean run), ``rounds`` and
    ``sets``. ``say``: given :func:`rate_line` after the first batch (None: nothing said).
    ``stop(d, se) → bool`` on a round's live ``δ``, se: ``stopped`` ``(E,)``, the first such
    round's circuit (or none), its ``stopped_effect``, ``stopped_se`` (NaN elsewhere).
    ``sign``: the behaviour's, of ``m(M) − m(∅)`` (None: measured here); a round removes the
    edges of least ``sign · δ``, so that under ``kl`` (lower is better) the edges whose removal
    raises the divergence most are kept longest."""
    if not 0 < fraction < 1:
        raise InputError(f"the pruning fraction lies in (0, 1), got {fraction!r}")
    tail = check_int("tail", tail, 1, MAX_COUNT)
    g = runner.tm.graph
    sign = behaviour_sign(runner) if sign is None else float(np.sign(sign))
    kept = g.full()
    removed, rounds, sets = [], 0, 0
    context, context_se = np.zeros(g.n_edges), np.zeros(g.n_edges)
    at = np.zeros(g.n_edges, dtype=np.int64)
    clean = clean_se = None
    stopped = g.empty()
    st_d, st_se = np.full(g.n_edges, np.nan), np.full(g.n_edges, np.nan)
    if say is not None:
        runner.on_batch = _told_once(runner, say, plan(g.n_edges, fraction=fraction,
                                                       tail=tail) * runner.task.n)
    try:
        while kept.any():
            live = np.flatnonzero(kept)
            trial = []
            for e in live:
                k = kept.copy()
                k[e] = False
                trial.append(k)
            vals = runner.metrics([kept, *trial], desc=f"pruning, {live.size} edges", base=kept)
            d, se = mean_se(vals[:1] - vals[1:])
            if clean is None:
                clean, clean_se = d, se
            if stop is not None and not stopped.any() and stop(d, se):
                stopped[live], st_d[live], st_se[live] = True, d, se
            drop = np.argsort(sign * d, kind="stable")[:_removed(live.size, fraction, tail)]
            context[live[drop]], context_se[live[drop]] = d[drop], se[drop]
            at[live[drop]] = rounds
            removed.extend(live[drop].tolist())
            kept[live[drop]] = False
            rounds, sets = rounds + 1, sets + live.size
    finally:  # the runner outlives a failed pruning
        runner.on_batch = None
    return {**_ranked(removed), "context": context, "context_se": context_se,
            "round": at, "clean": clean, "clean_se": clean_se, "rounds": rounds, "sets": sets,
            "stopped": stopped, "stopped_effect": st_d, "stopped_se": st_se}


def _ranked(removed: list) -> dict:
    """``order`` (the edges ``removed``, the last removed first) and ``key`` (``E`` for the
    first edge of ``order`` down to 1)."""
    order = np.asarray(removed[::-1], dtype=np.int64)
    key = np.empty(order.size)
    key[order] = np.arange(order.size, 0, -1)
    return {"order": order, "key": key}


def _estimated_kept(n: int, keep: float, tail: int) -> int:
    """The live edges an estimated round keeps of ``n``: none at ``tail`` or fewer."""
    return 0 if n <= tail else max(tail, int(keep * n))


def estimated_rounds(n_edges: int, *, keep: float = KEEP, tail: int = TAIL) -> int:
    """Rounds :func:`prune_estimated` runs on ``n_edges`` edges (each ``steps`` passes)."""
    n, rounds = _estimated_kept(int(n_edges), keep, tail), 1
    while n:
        n, rounds = _estimated_kept(n, keep, tail), rounds + 1
    return rounds


def prune_estimated(runner: Runner, *, keep: float = KEEP, steps: int = STEPS,
                    tail: int = TAIL, sign: float | None = None, say=None,
                    first=None) -> dict:
    """Rank every edge by pruning on in-context estimates (module docstring): ``order``,
    ``key``, ``round`` as :func:`prune`; ``context``, ``context_se`` each edge's estimated
    ``δ`` and its se in the round that removed it; ``rounds``. A round keeps ``max(tail,
    ⌊keep · n⌋)`` of its ``n`` live edges, by ``sign · δ`` (:func:`prune`'s ``sign``); the
    last removes the rest, the edge of largest ``sign · δ`` ranked first. ``say``: told each
    round's size; ``first``: the first round's ``(δ, se)`` where the caller holds them
    (:func:`..core.attribution.attribute` with these ``steps``), not computed again."""
    if not 0 < keep < 1:
        raise InputError(f"the kept fraction lies in (0, 1), got {keep!r}")
    steps = check_int("steps", steps, 1, MAX_COUNT)
    tail = check_int("tail", tail, 1, MAX_COUNT)
    g = runner.tm.graph
    sign = behaviour_sign(runner) if sign is None else float(np.sign(sign))
    kept, removed = g.full(), []
    context, context_se = np.zeros(g.n_edges), np.zeros(g.n_edges)
    at = np.zeros(g.n_edges, dtype=np.int64)
    rounds = 0
    while kept.any():
        live = np.flatnonzero(kept)
        if say is not None:
            say(f"pruning on integrated gradients: round {rounds + 1}, {live.size:,} edges")
        if rounds == 0 and first is not None:
            d, se = (np.asarray(x, dtype=np.float64) for x in first)
        else:
            d, se = attribute(runner, steps=steps, within=None if rounds == 0 else kept)
        d, se = d[live], se[live]
        n_out = live.size - _estimated_kept(live.size, keep, tail)
        drop = np.argsort(sign * d, kind="stable")[:n_out]
        context[live[drop]], context_se[live[drop]] = d[drop], se[drop]
        at[live[drop]] = rounds
        removed.extend(live[drop].tolist())
        kept[live[drop]] = False
        rounds += 1
    return {**_ranked(removed), "context": context, "context_se": context_se, "round": at,
            "rounds": rounds}


__all__ = ["BUDGET", "FRACTION", "KEEP", "STEPS", "TAIL", "behaviour_sign", "estimated_rounds",
           "fits", "plan", "plan_line", "prune", "prune_estimated", "rate_line"]
