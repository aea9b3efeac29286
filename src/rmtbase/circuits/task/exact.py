"""Exact edge patching: the metric's change when one edge alone carries the counterfactual
(every other edge clean), per prompt, then its mean and se over prompts: ``m(M ∖ {e}) −
m(M)`` (:mod:`.forward`; Wang et al. 2022's path patching, edge by edge as in ACDC, Conmy et
al. 2023). One graph forward per edge and batch."""

from __future__ import annotations

from .runner import Runner, mean_se


def patch_edges(runner: Runner, edges):
    """``(effect, se)`` ``(len(edges),)`` float64 for edge numbers ``edges``."""
    edges = [int(e) for e in edges]
    g = runner.tm.graph
    sets = []
    for e in edges:
        kept = g.full()
        kept[e] = False
        sets.append(kept)
    vals = runner.metrics([g.full(), *sets], desc="exact patches")
    return mean_se(vals[1:] - vals[:1])


__all__ = ["patch_edges"]
