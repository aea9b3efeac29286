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


def via_mlp_edges(graph, source):
    """``(kept, frozen senders)`` of the via-MLP edge set of head ``source = (m, s)``: its
    edges into every MLP from layer ``m`` on counterfactual, every head of a later layer frozen
    on all its edges; read at any layer ``l > m`` it is the module docstring's set."""
    m, s = int(source[0]), int(source[1])
    sender = {name: i for i, name in enumerate(graph.senders)}
    src = sender[Node(m, s, "head").name]
    frozen = [sender[Node(j, h, "head").name] for j in range(m + 1, graph.n_layers)
              for h in range(graph.n_heads)]
    blocks = [np.ones((len(st.receivers), st.n_senders), dtype=bool) for st in graph.stages]
    for st, b in zip(graph.stages, blocks, strict=True):
        if st.kind == "mlp" and m <= st.layer and src < st.n_senders:
            b[:, src] = False
        b[:, [f for f in frozen if f < st.n_senders]] = False
    return np.concatenate([b.reshape(-1) for b in blocks]), frozen


class GraphPaths:
    """Via-MLP changes (module docstring) on ``tm`` for the embeddings ``emb`` ``(n, T, d)``:
    the sources of one layer as one batch of edge sets (:class:`.edge_sets.EdgeSets`) in one
    recorded forward without gradients; a layer's residual read from the record's stage state,
    less the frozen senders' ``o_s − o_s^clean``. The forward still computes the frozen heads."""

    def __init__(self, tm, emb):
        self.tm, self.emb = tm, emb
        g = tm.graph
        self.outs = tm.run(emb)["outs"]
        # recorded with every sender's clean output as its counterfactual: resumable
        self._ck = tm.run(emb, cf=self.outs, kept=g.full(), record=True)["checkpoint"]
        self._clean = {si: st["resid"] for si, st in enumerate(self._ck["stages"])}

    def _stage(self, layer: int) -> int:
        return next(i for i, st in enumerate(self.tm.graph.stages)
                    if st.kind == "attn" and st.layer == layer)

    def _layer(self, m: int, heads, layers, deltas) -> dict:
        """``{(m, s): {l: change}}`` for the sources ``heads`` of layer ``m``, one forward."""
        from .edge_sets import EdgeSets

        g, n = self.tm.graph, self.emb.shape[0]
        sets = [via_mlp_edges(g, (m, s)) for s in heads]
        frozen = sets[0][1]
        cf = list(self.outs)  # every removed edge frozen at its sender's clean output
        for s in heads:
            i = g.senders.index(Node(m, s, "head").name)
            d = deltas.get((m, s))
            cf[i] = self.outs[i] * 0 if d is None else self.outs[i] - d
        kept = EdgeSets(np.stack([k for k, _ in sets]), g.n_edges)
        first = self._stage(m)  # layers before m are the clean run's
        ck = self.tm.run(self.emb, cf=cf, kept=kept, record=True,
                         resume=(self._ck, first))["checkpoint"]
        out = {(m, s): {} for s in heads}
        for l in (l for l in layers if l > m):
            si = self._stage(l)
            st = ck["stages"][si - first]
            x = st["resid"] - ck["buffer"][[f for f in frozen if f < st["n_out"]]].sum(0)
            for k, s in enumerate(heads):
                out[(m, s)][l] = x[k * n:(k + 1) * n] - self._clean[si]
        return out

    def changes(self, sources, layers, deltas=None) -> dict:
        """``{(m, s): {l: change}}`` for ``l > m`` in ``layers`` (``MLPPaths.changes``);
        ``deltas``: ``{(m, s): o_S − c_S}`` (None: every source zero)."""
        import torch

        deltas = deltas or {}
        by_layer: dict = {}
        for m, s in sources:
            by_layer.setdefault(int(m), []).append(int(s))
        out = {}
        with torch.no_grad():
            for m, heads in by_layer.items():
                out.update(self._layer(m, heads, layers, deltas))
        return {(int(m), int(s)): out[(int(m), int(s))] for m, s in sources}


__all__ = ["GraphPaths", "via_mlp_edges"]
