"""Which exactly patched edges of a task are confirmed: the head search's rule
(:func:`rmtbase.circuits.find.passes`, :func:`~rmtbase.circuits.find.keeps`). An edge's
``δ = m(M) − m(M ∖ e)`` is confirmed when ``|δ| ≥ 3 se`` and ``≥ 10 %`` of ``|m(M) − m(∅)|`` on
at least :data:`~rmtbase.circuits.find.MIN_SEQUENCES` pairs, and the other counterfactual
(:data:`OTHER`), measured only where the first part passes, keeps half of ``δ`` with its sign;
where it does not, ``depends`` says ``zero`` (an edge only zero ablation shows is not an edge:
Heimersheim & Nanda 2024, arXiv:2404.15255) or ``counterfactual``."""

from __future__ import annotations

import numpy as np

from .. import find
from ..counterfactual import TASK_OTHER
from .exact import patch_edges
from .runner import Runner

#: The counterfactual that checks each one.
OTHER = TASK_OTHER


def confirm(runner: Runner, edges, effect, se, behaviour: float) -> dict:
    """``{edge: {"confirmed", "other", "exact_other", "depends"}}`` for exactly patched
    ``edges`` with ``effect``, ``se`` under ``runner``'s counterfactual (module docstring);
    ``behaviour``: ``m(M) − m(∅)``. ``exact_other`` is NaN where the other counterfactual
    was not measured, ``depends`` None where nothing failed."""
    edges = [int(e) for e in edges]
    effect, se = np.asarray(effect, dtype=np.float64), np.asarray(se, dtype=np.float64)
    enough = runner.task.n >= find.MIN_SEQUENCES
    first = [enough and find.passes(a, b, behaviour, True) for a, b in zip(effect, se,
                                                                         strict=True)]
    other = OTHER[runner.counterfactual]
    check = np.full(len(edges), np.nan)
    idx = np.flatnonzero(first)
    if idx.size:
        r2 = Runner(runner.tm, runner.task, metric=runner.metric, counterfactual=other,
                    batch=runner.batch, progress=runner.progress)
        check[idx] = patch_edges(r2, [edges[i] for i in idx])[0]
    floor = find.floor_of(behaviour, True)
    out = {}
    for i, e in enumerate(edges):
        ok = bool(first[i]) and find.keeps(effect[i], check[i], floor)
        depends = None
        if first[i] and not ok:
            depends = "zero" if runner.counterfactual == "zero" else "counterfactual"
        out[e] = {"confirmed": ok, "other": other, "exact_other": float(check[i]),
                  "depends": depends}
    return out


__all__ = ["OTHER", "confirm"]
