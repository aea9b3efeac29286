"""Path patching on the task graph's forward (:class:`.forward.TaskModel`): an edge ``s → r``
is kept (``r`` reads ``o_s``), counterfactual (``c_s``) or **frozen** (``o_s^clean``, whatever
changed upstream of ``s``). A layer frozen on every edge is not recomputed (``run``'s ``frozen``,
:class:`.stages.Frozen`: its heads send the given outputs).

Via-MLP (:meth:`GraphPaths.changes`), head ``S = (m, s)`` into layer ``l > m``: the edge set
:func:`via_mlp_edges` (``S``'s edges into the MLPs from layer ``m`` on counterfactual, the later
layers frozen); the residual entering ``l`` minus the clean one. The residual is a sum of the
senders' outputs, so every layer ``< l`` is frozen, ``S`` sending ``c_S`` on every edge, and
``Δ_S = o_S − c_S`` is added back for its kept direct edges: only MLPs run, from layer ``m`` on,
on ``K`` copies of the prompts (one per source). :meth:`GraphPaths.kept`: the heads named send
their counterfactuals, the rest frozen clean. Cost: :func:`forward_flops`."""

from __future__ import annotations

import numpy as np

from .graph import Node
from .via_mlp import ViaMLP

#: Sequences a forward pass runs at once (times the sources stacked in it).
BATCH_TOKENS = 8192


def forward_flops(net, tokens: int) -> float:
    """About ``2 × (parameters outside the embeddings) × tokens``: one forward pass."""
    n = 0
    for name, p in net.named_parameters():
        if "embed" in name or "wte" in name or "wpe" in name or "lm_head" in name:
            continue
        n += p.numel()
    return 2.0 * float(n) * float(tokens)


def has_mlps(hm) -> bool:
    """Whether the blocks have an MLP: a nonzero matrix outside attention (OPT: fc1, fc2)."""
    blk, attn = hm.layers[0], {id(p) for p in hm.attention(0).parameters()}
    return any(p.ndim >= 2 and id(p) not in attn and bool(p.detach().abs().max() > 0)
               for p in blk.parameters())


def input_gradients(x, deltas, fs):
    """(``[∂f/∂x]``, ``[[∂f/∂δ for δ in deltas]]``) of each scalar function in ``fs`` of ``x``,
    a residual computed from the leaves ``deltas`` (:meth:`ForwardPaths.gradients`)."""
    import torch

    g_ls, g_ms = [], []
    with torch.enable_grad():
        for i, f in enumerate(fs):
            grads = torch.autograd.grad(f(x.float()), [x, *deltas], allow_unused=True,
                                        retain_graph=i < len(fs) - 1)
            g_l = grads[0].float()
            g_ls.append(g_l)
            g_ms.append([torch.zeros_like(g_l) if g is None else g.float() for g in grads[1:]])
    return g_ls, g_ms


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
    """Via-MLP changes (module docstring) on ``tm`` for the embeddings ``emb`` ``(n, T, d)``;
    ``deltas`` ``{(m, s): Δ_S}`` in the residual's space. Holds each layer's clean attention
    sum, not the heads' outputs (``L · n · T · d`` floats, not ``L · H · n · T · d``)."""

    def __init__(self, tm, emb):
        import torch

        from .stages import Pass

        self.tm, self.emb = tm, emb
        run = Pass(tm, emb, None, None, None, False)
        with torch.no_grad():  # no logits needed
            run.through(run.start(None), len(tm.graph.stages) - 1, keep=False)
        self.sums = run.attn_sums
        self._base = (-1, None)  # (last layer read, the clean frozen run's states)

    def _stage(self, layer: int) -> int:
        return next(i for i, st in enumerate(self.tm.graph.stages)
                    if st.kind == "attn" and st.layer == layer)

    def _run(self, sums: dict, last: int) -> list:
        """States of a run, layers ``< last`` frozen adding ``sums[j]`` (default: clean)."""
        from .stages import Frozen

        frozen = Frozen({j: (None, sums.get(j, self.sums[j])) for j in range(last)},
                        self._stage(last))
        return self.tm.run(self.emb, frozen=frozen, record=True)["checkpoint"]["stages"]

    def _clean(self, layer: int):
        """The residual entering ``layer`` in the clean frozen run (the changes' reference)."""
        if self._base[0] < layer:
            self._base = (layer, self._run({}, layer))
        return self._base[1][self._stage(layer)]["resid"]

    def gradients(self, layer: int, fs):
        """:meth:`.via_mlp.ViaMLP.gradients` on this forward: ``δ_m`` added to layer ``m``'s
        clean attention sum, every layer before ``layer`` frozen, the MLPs recomputed."""
        import torch

        from .stages import Frozen, Pass

        deltas = [torch.zeros_like(self.sums[m], requires_grad=True) for m in range(layer)]
        frozen = {m: (None, self.sums[m] + deltas[m]) for m in range(layer)}
        with torch.enable_grad():
            run = Pass(self.tm, self.emb, None, None, None, False, Frozen(frozen))
            run.through(run.start(None), self._stage(layer), keep=False)
            return input_gradients(run.resid, deltas, fs)

    def changes(self, sources, layers, deltas: dict) -> dict:
        """``{(m, s): {l: change}}`` for ``l > m`` in ``layers``; ``K·n·T`` ≤ BATCH_TOKENS."""
        import torch

        n, t = self.emb.shape[:2]
        per = max(1, BATCH_TOKENS // (n * t))
        out = {}
        with torch.no_grad():
            for m, s in sources:
                out[(int(m), int(s))] = {}
            by_layer: dict = {}
            for m, s in out:
                by_layer.setdefault(m, []).append(s)
            for m, heads in by_layer.items():
                read = [int(l) for l in layers if l > m]
                if not read:
                    continue
                for lo in range(0, len(heads), per):
                    chunk = heads[lo:lo + per]
                    ds = torch.stack([deltas[(m, s)] for s in chunk])
                    states = self._run({m: self.sums[m] - ds}, max(read))
                    for l in read:
                        x, base = states[self._stage(l)]["resid"], self._clean(l)
                        for k, s in enumerate(chunk):
                            out[(m, s)][l] = x[k] - base + ds[k]
        return out

    def kept(self, layer: int, deltas: dict, *, direct: bool = True):
        """The residual's change entering ``layer``, the heads in ``deltas`` sending ``o_S −
        Δ_S``, the rest frozen clean; ``direct=False``: the MLP-mediated part alone."""
        import torch

        with torch.no_grad():
            sums, total = {}, None
            for (m, _), d in deltas.items():
                sums[m] = sums.get(m, self.sums[m]) - d
                total = d if total is None else total + d
            got = self._run(sums, layer)[self._stage(layer)]["resid"] - self._clean(layer)
            return got if direct or total is None else got + total


class ForwardPaths(ViaMLP):
    """The head search's via-MLP paths (:class:`.via_mlp.ViaMLP`) on the graph forward
    (:class:`GraphPaths` on ``tm``): exact changes and the screen's gradients."""

    def __init__(self, hm, seqs, cap, tm):
        super().__init__(hm, seqs, cap)
        self.graph = GraphPaths(tm, tm.embed(seqs.ids))

    def _delta(self, m: int, s: int, how):
        import torch

        with torch.no_grad():
            return self._direct(m, self._share(m, s, how))

    def _changes(self, sources, layers, how=None) -> dict:
        deltas = {(int(m), int(s)): self._delta(m, s, how) for m, s in sources}
        return self.graph.changes(sources, layers, deltas)

    def gradients(self, layer: int, fs):
        return self.graph.gradients(layer, fs)

    def kept(self, layer: int, keep, how=None, *, direct: bool = True):
        keep = {(int(m), int(s)) for m, s in keep}
        deltas = {(m, s): self._delta(m, s, how) for m in range(layer)
                  for s in range(self.hm.n_heads) if (m, s) not in keep}
        return self.graph.kept(layer, deltas, direct=direct)


__all__ = ["BATCH_TOKENS", "ForwardPaths", "GraphPaths", "forward_flops", "has_mlps",
           "input_gradients", "via_mlp_edges"]
