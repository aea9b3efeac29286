"""Path patching as edge states of the task graph's forward (:class:`.forward.TaskModel`): an
edge ``s → r`` is kept (``r`` reads ``o_s``, this run's), counterfactual (``c_s``) or **frozen**
(``o_s^clean``, the clean run's, whatever changed upstream of ``s``). A frozen edge is a removed
edge whose counterfactual is ``o_s^clean`` in the forward's ``x_r = x_r^run − Σ_{s→r removed}
(o_s − c_s)``; a layer whose heads are frozen on every edge is not recomputed at all (``run``'s
``frozen``, :class:`.stages.Frozen`: its heads send their clean outputs).

Via-MLP (:class:`GraphPaths`), head ``S = (m, s)`` into layer ``l > m``: ``S``'s edges into the
MLPs from layer ``m`` on counterfactual, every head of a later layer frozen, the rest kept; the
residual entering ``l`` minus the clean one is the MLP-mediated change that
:class:`.mlp_path.MLPPaths` computes with hooks on the transformers forward."""

from __future__ import annotations

import numpy as np

from .graph import Node


def via_mlp_edges(graph, source):
    """``(kept, frozen layers)`` of the via-MLP set of head ``source = (m, s)`` (module
    docstring): ``kept`` all but its edges into the MLPs from layer ``m`` on, the layers after
    ``m`` frozen."""
    m, s = int(source[0]), int(source[1])
    src = graph.senders.index(Node(m, s, "head").name)
    blocks = [np.ones((len(st.receivers), st.n_senders), dtype=bool) for st in graph.stages]
    for st, b in zip(graph.stages, blocks, strict=True):
        if st.kind == "mlp" and m <= st.layer and src < st.n_senders:
            b[:, src] = False
    return np.concatenate([b.reshape(-1) for b in blocks]), list(range(m + 1, graph.n_layers))


class GraphPaths:
    """Via-MLP changes (module docstring) on ``tm`` for the embeddings ``emb`` ``(n, T, d)``:
    the sources of one layer as one batch of edge sets (:class:`.edge_sets.EdgeSets`) in one
    recorded forward without gradients, resumed from the clean run's record at layer ``m``, the
    later layers frozen; a layer's residual is the record's state where its stage starts."""

    def __init__(self, tm, emb):
        self.tm, self.emb = tm, emb
        g = tm.graph
        clean = tm.run(emb)
        self.outs, H = clean["outs"], g.n_heads
        first = [g.senders.index(Node(li, 0, "head").name) for li in range(g.n_layers)]
        self._frozen = {li: (self.outs[i:i + H], clean["attn_sums"][li])
                        for li, i in enumerate(first)}
        # recorded with every sender's clean output as its counterfactual: resumable
        self._ck = tm.run(emb, cf=self.outs, kept=g.full(), record=True)["checkpoint"]
        self._clean = {si: st["resid"] for si, st in enumerate(self._ck["stages"])}

    def _stage(self, layer: int) -> int:
        return next(i for i, st in enumerate(self.tm.graph.stages)
                    if st.kind == "attn" and st.layer == layer)

    def _layer(self, m: int, heads, layers, deltas) -> dict:
        """``{(m, s): {l: change}}`` for the sources ``heads`` of layer ``m``, one forward."""
        from .edge_sets import EdgeSets
        from .stages import Frozen

        g, n = self.tm.graph, self.emb.shape[0]
        read = [l for l in layers if l > m]
        if not read:
            return {(m, s): {} for s in heads}
        sets = [via_mlp_edges(g, (m, s)) for s in heads]
        cf = list(self.outs)
        for s in heads:
            i = g.senders.index(Node(m, s, "head").name)
            d = deltas.get((m, s))
            cf[i] = self.outs[i] * 0 if d is None else self.outs[i] - d
        kept = EdgeSets(np.stack([k for k, _ in sets]), g.n_edges)
        first = self._stage(m)  # layers before m are the clean run's
        frozen = Frozen({li: self._frozen[li] for li in sets[0][1]}, self._stage(max(read)))
        ck = self.tm.run(self.emb, cf=cf, kept=kept, record=True, resume=(self._ck, first),
                         frozen=frozen)["checkpoint"]
        out = {(m, s): {} for s in heads}
        for l in read:
            si = self._stage(l)
            x = ck["stages"][si - first]["resid"]  # no edge into layer l's heads is removed
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
