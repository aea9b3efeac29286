"""Exact edge patching: what the metric loses when one edge alone carries the counterfactual
(every other edge clean), per prompt, then its mean and se over prompts: ``m(M) − m(M ∖
{e})``, positive where the edge carries the metric (:mod:`.forward`; Wang et al. 2022's path
patching, edge by edge as in ACDC, Conmy et al. 2023). One graph forward per edge and batch.

At one position ``t`` an edge ``s → r`` carries the counterfactual only in ``r``'s input at
``t``: ``x_r[t] − (o_s[t] − c_s[t])``, every other position clean (the token-position edges of
auto-circuit's tracr tasks; Miller, Chughtai & Saunders 2024, arXiv:2407.08734). ``within`` a
circuit ``C``: ``m(C) − m(C ∖ {e})``, the edges outside ``C`` counterfactual (ACDC's test)."""

from __future__ import annotations

import numpy as np

from ...errors import InputError
from .runner import Runner
from .se import mean_se

#: Bytes of edge sets :func:`patch_edges` holds at once.
SET_BYTES = 64 << 20


def patch_edges(runner: Runner, edges, *, positions=None, within=None):
    """``(effect, se)`` ``(len(edges),)`` float64 for edge numbers ``edges``; with
    ``positions`` (token positions, ``0 … T − 1``) ``(len(edges), len(positions))``, each edge
    patched at one position at a time; with ``within`` (``(n_edges,)`` bools, holding every
    edge of ``edges``) each removed from that circuit (module docstring)."""
    edges = [int(e) for e in edges]
    g = runner.tm.graph
    ref = g.full() if within is None else np.asarray(within, dtype=bool)
    if within is not None and (ref.shape != (g.n_edges,) or positions is not None
                               or not ref[edges].all()):
        raise InputError("within is an (n_edges,) edge set holding every edge patched, "
                         "without positions")
    if positions is None:  # each edge set removes one edge, or one edge at one position
        shape, cells, out = (g.n_edges,), [(e,) for e in edges], (len(edges),)
        desc = "exact patches" if within is None else "exact patches in context"
    else:
        n_pos = runner.task.length
        positions = [int(t) for t in positions]
        if any(not 0 <= t < n_pos for t in positions):
            raise InputError(f"positions lie in 0 … {n_pos - 1}, got {positions}")
        shape, cells = (g.n_edges, n_pos), [(e, t) for e in edges for t in positions]
        out, desc = (len(edges), len(positions)), "exact patches by position"
    per = max(1, SET_BYTES // int(np.prod(shape)))  # sets made a chunk at a time
    diffs = []
    for lo in range(0, len(cells), per):
        sets = []
        for cell in cells[lo:lo + per]:
            kept = np.ones(shape, dtype=bool) if within is None else ref.copy()
            kept[cell] = False
            sets.append(kept)
        vals = runner.metrics([ref, *sets], desc=desc, base=None if within is None else ref)
        diffs.append(vals[:1] - vals[1:])
    eff, se = mean_se(np.concatenate(diffs) if diffs else np.empty((0, runner.task.n)))
    return eff.reshape(out), se.reshape(out)


__all__ = ["SET_BYTES", "patch_edges"]
