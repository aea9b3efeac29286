"""A task's edges ranked by pruning in context: each edge's exact effect measured against the
circuit being built. From every edge kept (``C = M``) each round measures, for every edge ``e``
in ``C``, ``δ_e = m(C) − m(C ∖ {e})`` (mean over prompts) and removes the ``fraction`` with the
smallest ``δ`` (from ``2 · tail`` edges down ``⌈n / MID_STEP⌉``, from ``tail`` down
``⌈n / TAIL_STEP⌉``), while their joint loss ``m(C) − m(C ∖ D)`` exceeds their losses alone
by at most ``guard`` se or :data:`TOLERANCE` of the behaviour (edges that back each other up
each look idle), else fewer (:func:`_guarded`); in the tail an edge whose removal idles one
more (a two-edge path) costs half its ``δ``. Later rounds rank first; a round's removed ``D``
by ``m(C' ∪ {e}) − m(C')``, each added back to the circuit ``C' = C ∖ D`` it leaves, where
the ranking's curve places them (in ``C`` backups hide them). ACDC's greedy pruning (Conmy et
al. 2023, arXiv:2304.14997) without its threshold; ``stop`` marks the first round whose every
``δ`` passes a rule. Cost (:func:`plan`): about ``(1 / fraction + 1) E + tail² / 3`` edge
sets, each a pass over the prompts from where it differs from ``C``, a stage's sets together
(:meth:`..core.runner.Runner.metrics`).

Where that is too many, :func:`prune_estimated` prunes on estimates: each round scores every
edge of ``C`` by the integrated gradient in ``C``'s context (:func:`..core.attribution.attribute`
with ``within``: the path from the counterfactual input to ``C``'s run, EAP-IG's estimate of
``δ_e``) and keeps the ``keep`` fraction that carries most; the first round, in the full
model, is EAP-IG (Hanna et al. 2024). A round costs ``steps`` forward and backward passes,
whatever the graph's size."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...checks import check_int
from ...errors import InputError
from ...limits import MAX_COUNT
from ..core.attribution import attribute
from ..core.runner import Runner
from ..core.se import mean_se

#: Fraction of the circuit's edges removed per round while more than :data:`TAIL` are left.
FRACTION = 0.5
#: From this many edges down, a round removes one edge per :data:`TAIL_STEP` left; from twice
#: as many, one per :data:`MID_STEP` (an edge whose worth came from edges removed with it is
#: measured again before it is kept).
TAIL = 32
TAIL_STEP = 16
MID_STEP = 8
#: A round removes several edges only while they lose at most this many se together, or
#: this fraction of the behaviour ``m(M) − m(∅)``.
GUARD = 2.0
TOLERANCE = 0.02
#: The fraction of the live edges an estimated round keeps, and its integral's points.
KEEP = 0.1
STEPS = 5
#: Edge sets × prompts the pruning may run by default (:func:`fits`): a 262-edge graph on
#: 32 prompts plans 1,073 sets, 34,336 set-prompts.
BUDGET = 400_000


def plan(n_edges: int, *, fraction: float = FRACTION, tail: int = TAIL) -> int:
    """Edge sets :func:`prune` runs on ``n_edges`` edges (each a pass over the prompts)."""
    n, total = int(n_edges), 0
    while n:
        out = _removed(n, fraction, tail)
        total += n + (out if 1 < out < n else 0)
        n -= out
    return total


def fits(n_edges: int, n_prompts: int, budget: int = BUDGET) -> bool:
    """Whether :func:`plan` × ``n_prompts`` is within ``budget`` set-prompts."""
    return plan(n_edges) * int(n_prompts) <= int(budget)


def plan_line(n_edges: int, pairs: int, tokens: int, fit: int, *, budget: int = BUDGET,
              top: int = 20, steps: int = STEPS) -> str:
    """The search's size before it starts: pairs × tokens, the graph's edges and the edge sets
    the ranking runs, each a forward pass over the ``fit`` pairs (:func:`plan` where it
    :func:`fits` ``budget``, else :func:`prune_estimated`'s rounds and the ``top`` edges
    patched exactly; there, two lines)."""
    n, size = plan(n_edges), f"{pairs} prompt pairs x {tokens} tokens ({fit} to rank)"
    if budget and fits(n_edges, fit, budget):
        return (f"plan: {size}, {n_edges:,} edges; pruning in context: {n:,} edge sets, each "
                f"a forward pass over the {fit} pairs ({n * fit:,} of {budget:,} set-prompts)")
    return (f"plan: {size}, {n_edges:,} edges; pruning would take {n:,} edge sets x {fit} "
            f"pairs, over {budget:,}:\n    pruning on integrated gradients, "
            f"{estimated_rounds(n_edges)} rounds of {steps} forward and backward passes, then "
            f"the top {min(top, n_edges)} edges patched exactly")


def rate_line(total: int, n: int, seconds: float) -> str:
    """The pruning's ``total`` set-prompts timed at its first batch's rate (``n`` in ``seconds``)."""
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
    """Edges a round of ``n`` live edges removes at most: the ``fraction`` above ``2 · tail``
    (down to ``tail``), ``⌈n / MID_STEP⌉`` above ``tail`` (down to it), then ``⌈n /
    TAIL_STEP⌉``."""
    if n <= tail:
        return -(-n // TAIL_STEP)
    step = -(-n // MID_STEP) if n <= 2 * tail else int(fraction * n)
    return max(1, min(step, n - tail))


def _behaviour(runner: Runner) -> float:
    """``m(M) − m(∅)`` on ``runner``'s task."""
    g = runner.tm.graph
    full, empty = runner.metrics([g.full(), g.empty()], desc="full and empty graphs").mean(-1)
    return float(full - empty)


def behaviour_sign(runner: Runner) -> float:
    """The sign of ``m(M) − m(∅)`` on ``runner``'s task (+1 where it does not move)."""
    return -1.0 if _behaviour(runner) < 0 else 1.0


def prune(runner: Runner, *, fraction: float = FRACTION, tail: int = TAIL, say=None,
          stop=None, behaviour: float | None = None, guard: float = GUARD) -> dict:
    """Rank every edge of ``runner``'s graph by pruning in context (module docstring):
    ``order`` (edge numbers, later rounds first), ``key`` ``(E,)`` (``E`` for the first
    edge of ``order`` down to 1), ``context``, ``context_se`` ``(E,)`` (each edge's ``δ``, se
    over prompts in the round that removed it), ``round`` ``(E,)`` (that round, from 0: edges
    of round ``≥ r`` form the circuit round ``r`` started from), ``clean``, ``clean_se`` (the
    first round's: every edge against the clean run), ``rounds``, ``sets`` (run), ``skipped``
    (planned, known: :func:`_toggled`). ``say``: told :func:`rate_line` after the first batch.
    ``stop(d, se) → bool`` on a round's live ``δ``, se: ``stopped`` ``(E,)``, the first such
    round's circuit (or none), its ``stopped_effect``, ``stopped_se`` (NaN elsewhere).
    ``behaviour``: ``m(M) − m(∅)`` (None: measured here); a round removes the edges of least
    ``sign · δ`` (under ``kl``, lower is better: the edges whose removal raises the divergence
    most are kept longest); :func:`_guarded` allows ``guard`` se or :data:`TOLERANCE` of
    ``|behaviour|`` (``guard`` 0: no check)."""
    if not 0 < fraction < 1:
        raise InputError(f"the pruning fraction lies in (0, 1), got {fraction!r}")
    tail = check_int("tail", tail, 1, MAX_COUNT)
    g = runner.tm.graph
    kept, removed, rounds, sets, skipped = g.full(), [], 0, 0, 0
    out = {"context": np.zeros(g.n_edges), "context_se": np.zeros(g.n_edges),
           "round": np.zeros(g.n_edges, dtype=np.int64), "clean": None, "clean_se": None,
           "stopped": g.empty(), "stopped_effect": np.full(g.n_edges, np.nan),
           "stopped_se": np.full(g.n_edges, np.nan)}
    behaviour = _behaviour(runner) if behaviour is None else float(behaviour)
    sign = -1.0 if behaviour < 0 else 1.0
    limits = Limits(sign, guard, TOLERANCE * abs(behaviour))
    if say is not None:
        runner.on_batch = _told_once(runner, say, plan(g.n_edges, fraction=fraction,
                                                       tail=tail) * runner.task.n)
    try:
        while kept.any():
            live = np.flatnonzero(kept)
            at_kept, d, se, run = _toggled(runner, kept, live, f"pruning, {live.size} edges")
            _record_round(out, live, d, se, stop)
            drop = np.argsort(_cost(g, kept, live, sign * d, _forward(runner))
                              if live.size <= tail else sign * d, kind="stable")
            n_drop, tried = _guarded(runner, kept, live[drop], sign * d[drop], at_kept,
                                     _removed(live.size, fraction, tail), limits)
            drop, edges = drop[:n_drop], live[drop[:n_drop]]
            out["context"][edges], out["context_se"][edges] = d[drop], se[drop]
            out["round"][edges] = rounds
            kept[edges] = False
            skipped += live.size - run
            if 1 < edges.size < live.size:  # ranked added back to the circuit left
                _, added, _, n = _toggled(runner, kept, edges, f"ranking {edges.size} removed")
                edges = edges[np.argsort(sign * added, kind="stable")]
                tried, skipped = tried + n, skipped + edges.size - n
            removed.extend(edges.tolist())
            rounds, sets = rounds + 1, sets + tried + run
    finally:  # the runner outlives a failed pruning
        runner.on_batch = None
    return {**_ranked(removed), **out, "rounds": rounds, "sets": sets, "skipped": skipped}


def _forward(runner: Runner) -> bool:
    """Whether an edge carries anything only reached from ``input`` (a run's counterfactual)."""
    return runner.counterfactual in ("corrupted", "resample")


def _cost(g, kept, live, loss, forward: bool) -> np.ndarray:
    """A tail round's removal order (module docstring): ``loss`` (``sign · δ``), halved where
    the edge's removal idles one more (:meth:`..core.graph.Graph.alive`)."""
    now = g.alive(kept, forward).sum()
    freed = np.empty(live.size)
    for i, e in enumerate(live):
        k = kept.copy()
        k[e] = False
        freed[i] = now - g.alive(k, forward).sum()
    return np.where((loss > 0) & (freed == 2), loss / 2, loss)


def _record_round(out: dict, live, d, se, stop) -> None:
    """Into ``out``: the first round's ``δ`` as ``clean``, the first to pass ``stop``'s."""
    if out["clean"] is None:
        out["clean"], out["clean_se"] = d, se
    elif stop is not None and not out["stopped"].any() and stop(d, se):
        out["stopped"][live], out["stopped_effect"][live], out["stopped_se"][live] = True, d, se


def _toggled(runner: Runner, kept, edges, desc: str):
    """(``m(kept)`` per prompt, ``δ``, its se, edge sets run): each edge's exact effect, ``m``
    with it less ``m`` without it, the other set ``kept`` with that edge toggled; an edge off
    every kept path (:meth:`..core.graph.Graph.carrying`) carries nothing: 0, and no pass."""
    on = runner.tm.graph.carrying(kept, _forward(runner))[edges]
    trial = []
    for e in edges[on]:
        k = kept.copy()
        k[e] = not k[e]
        trial.append(k)
    vals = runner.metrics([kept, *trial], desc=desc, base=kept)
    d, se = np.zeros(edges.size), np.zeros(edges.size)
    if on.any():
        d[on], se[on] = mean_se((vals[1:] - vals[:1]) * np.where(kept[edges[on]], -1.0, 1.0)
                                [:, None])
    return vals[0], d, se, int(on.sum())


class Limits(NamedTuple):
    """:func:`_guarded`'s: the behaviour's ``sign``, ``guard`` se, ``tolerance`` metric units."""

    sign: float
    guard: float
    tolerance: float


def _guarded(runner: Runner, kept, candidates, alone, at_kept, n_drop: int,
             limits: Limits) -> tuple[int, int]:
    """(edges a round removes, edge sets run): the longest prefix ``D`` of the first ``n_drop``
    ``candidates`` (``alone``: their ``sign · δ``) whose joint loss ``sign · (m(C) − m(C ∖ D))``
    (``at_kept``: ``m(C)`` per prompt) exceeds ``Σ_D max(sign · δ, 0)`` by at most ``guard`` se
    or ``tolerance``, searched in chunks (a failing chunk halved); one edge at least."""
    sign, guard, tolerance = limits
    if n_drop <= 1 or guard <= 0:
        return n_drop, 0
    alone = np.cumsum(np.maximum(np.asarray(alone, dtype=np.float64), 0.0))
    tried, pos, size = 0, 0, n_drop
    while size >= 1 and pos < n_drop:
        size = min(size, n_drop - pos)
        k = kept.copy()
        k[candidates[:pos + size]] = False
        loss, loss_se = mean_se(sign * (at_kept - runner.metrics([k], desc="pruning, joint",
                                                                 base=kept)[0]))
        tried += 1
        if loss - alone[pos + size - 1] <= max(guard * loss_se, tolerance):
            pos += size
        else:
            size //= 2
    return max(pos, 1), tried


def _ranked(removed: list) -> dict:
    """``order`` (``removed`` reversed) and ``key`` (``E`` for ``order``'s first edge down to 1)."""
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


__all__ = ["BUDGET", "FRACTION", "GUARD", "KEEP", "STEPS", "TAIL", "behaviour_sign",
           "estimated_rounds", "fits", "plan", "plan_line", "prune", "prune_estimated", "rate_line"]
