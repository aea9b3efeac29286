"""Path patching as edge states of the task graph's forward (:class:`.forward.TaskModel`): an
edge ``s → r`` is kept (``r`` reads ``o_s``, this run's), counterfactual (``c_s``) or **frozen**
(``o_s^clean``, the clean run's, whatever changed upstream of ``s``): the forward's
``x_r = x_r^run − Σ_{s→r removed} (o_s − c_s)`` with ``c_s = o_s^clean`` on frozen edges.

Via-MLP (:class:`GraphPaths`), head ``S = (m, s)`` into layer ``l > m``: ``S``'s edges into the
MLPs of layers ``m … l − 1`` counterfactual, every head of layers ``m + 1 … l − 1`` frozen, the
rest kept; the residual entering ``l`` minus the clean one is the MLP-mediated change that
:class:`.mlp_path.MLPPaths` computes with hooks on the transformers forward."""

from __future__ import annotations

import numpy as np

from .graph import Node


def via_mlp_edges(graph, source, layer: int):
    """``(kept, frozen senders)`` of the via-MLP path of head ``source = (m, s)`` into
    ``layer`` (module docstring)."""
    m, s = int(source[0]), int(source[1])
    sender = {name: i for i, name in enumerate(graph.senders)}
    src = sender[Node(m, s, "head").name]
    frozen = [sender[Node(j, h, "head").name] for j in range(m + 1, layer)
              for h in range(graph.n_heads)]
    blocks = [np.ones((len(st.receivers), st.n_senders), dtype=bool) for st in graph.stages]
    for st, b in zip(graph.stages, blocks, strict=True):
        if st.kind == "mlp" and m <= st.layer < layer and src < st.n_senders:
            b[:, src] = False
        for f in frozen:
            if f < st.n_senders:
                b[:, f] = False
    return np.concatenate([b.reshape(-1) for b in blocks]), frozen


class GraphPaths:
    """Via-MLP changes (module docstring) on ``tm`` for the embeddings ``emb`` ``(n, T, d)``,
    through :meth:`.forward.TaskModel.run` (its receiver inputs read as the run's ``leaves``)."""

    def __init__(self, tm, emb):
        self.tm, self.emb = tm, emb
        clean = tm.run(emb, grad=True)
        self.outs = [o.detach() for o in clean["outs"]]
        self._clean = [x.detach() for x in clean["leaves"]]

    def _stage(self, layer: int) -> int:
        return next(i for i, st in enumerate(self.tm.graph.stages)
                    if st.kind == "attn" and st.layer == layer)

    def change(self, source, layer: int, delta=None):
        """``(n, T, d)``: the MLP-mediated change of the residual entering ``layer`` when head
        ``source``'s output ``o_S`` is replaced by ``o_S − delta`` (None: ``o_S``, so zero)."""
        g = self.tm.graph
        kept, _ = via_mlp_edges(g, source, layer)
        src = g.senders.index(Node(int(source[0]), int(source[1]), "head").name)
        cf = list(self.outs)  # every removed edge frozen at its sender's clean output
        cf[src] = self.outs[src] * 0 if delta is None else self.outs[src] - delta
        si = self._stage(layer)
        got = self.tm.run(self.emb, cf=cf, kept=kept, grad=True)["leaves"][si]
        return (got[0] - self._clean[si][0]).detach()

    def changes(self, sources, layers, deltas=None) -> dict:
        """``{(m, s): {l: change}}`` for ``l > m`` in ``layers`` (``MLPPaths.changes``);
        ``deltas``: ``{(m, s): o_S − c_S}`` (None: every source zero)."""
        deltas = deltas or {}
        return {(int(m), int(s)): {l: self.change((m, s), l, deltas.get((int(m), int(s))))
                                   for l in layers if l > m} for m, s in sources}


__all__ = ["GraphPaths", "via_mlp_edges"]
