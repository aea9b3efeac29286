"""What a task circuit's numbers mean where they look wrong (summary.json's ``notes``, the
screen): a faithfulness curve above 1 (its peak and why: a small denominator
``m(M) − m(∅)`` against its se, or an overshoot: top edges giving the metric more than the
full model), and a confirmed edges' circuit keeping faithfulness near 0 (each edge was tested
inside a larger circuit; kept alone, the edges feeding it carry the counterfactual)."""

from __future__ import annotations

import numpy as np

from .behaviour import MIN_SE

#: A curve is said to be above 1 where its peak exceeds 1 by more than this.
ABOVE = 0.01
#: A confirmed circuit's faithfulness is explained where its magnitude is below this.
NEAR_ZERO = 0.1


def peak(cur: dict) -> dict:
    """The curve's largest faithfulness and the fewest edges reaching it."""
    f = np.asarray(cur["faithfulness"], dtype=np.float64)
    i = int(np.nanargmax(f))
    return {"faithfulness": float(f[i]), "edges": int(cur["k"][i])}


def curve_note(cur: dict, held: dict) -> str | None:
    """Why the curve rises above 1, or None (``held``: :func:`.behaviour.measure` on the pairs
    the curve is scored on)."""
    p = peak(cur)
    if not p["faithfulness"] > 1 + ABOVE:
        return None
    d, se = abs(held["behaviour"]), held["behaviour_se"]
    z = d / se if se > 0 else np.inf
    if z < MIN_SE:
        why = (f"a small denominator: m(M) - m(0) = {held['behaviour']:+.3g} ± {se:.2g} on the "
               f"{held['pairs']} pairs scored ({z:.1f} se), so f is noisy")
    else:
        why = ("an overshoot: those edges give the metric more than the full model, edges "
               "working against it left out")
    return f"curve above 1: peak {p['faithfulness']:.3g} at {p['edges']} edges, {why}"


def reaches_logits(graph, kept) -> bool:
    """Whether the edges ``kept`` hold a path from ``input`` to ``logits``."""
    kept = np.flatnonzero(np.asarray(kept, dtype=bool))
    ends = [graph.edge(int(i)) for i in kept]
    ends = [(s, r.partition("<")[0]) for s, r in ends]
    seen, grew = {"input"}, True
    while grew:
        grew = False
        for s, r in ends:
            if s in seen and r not in seen:
                seen.add(r)
                grew = True
    return "logits" in seen


def confirmed_note(graph, confirmed, circuit: dict, context: str, tested: int) -> str | None:
    """Why the confirmed edges' circuit (``confirmed``, scored ``circuit``) keeps faithfulness
    near 0, or None; ``context``, ``tested``: where the verdicts were taken
    (:data:`.confirm.RULES`) and how many edges were tested there."""
    n, f = int(np.sum(confirmed)), circuit["faithfulness"]
    if n == 0 or not abs(f) < NEAR_ZERO:
        return None
    where = (f"the pruning's first circuit whose every edge passes ({tested} edges)"
             if context == "stopped" else "the reported circuit")
    how = ("kept alone they hold no path from input to logits" if not
           reaches_logits(graph, confirmed) else
           "kept alone, the edges feeding them carry the counterfactual")
    return (f"confirmed edges' circuit keeps f = {f:.3f}: each of its {n} edges was needed "
            f"inside {where}; {how}")


__all__ = ["ABOVE", "NEAR_ZERO", "confirmed_note", "curve_note", "peak", "reaches_logits"]
