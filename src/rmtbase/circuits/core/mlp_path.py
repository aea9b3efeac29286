"""Paths through MLPs: a source head's effect on a later receiver through the MLPs between
them, every attention output in between held at its clean value.

Source S in layer ``m``, receiver R in layer ``l > m``: S's share ``o_S`` of layer ``m``'s
attention contribution (:meth:`.heads.HeadModel.source_contribution`; ``z_S W_O[S]`` for pre-norm
blocks) is replaced by its counterfactual (:mod:`.counterfactual`; below ``o_S`` stands for the
change ``o_S − o_cf``, which is subtracted), the model runs on with every layer's attention contribution held
clean (a forward hook on :meth:`.heads.HeadModel.contribution_module`) and its MLPs recomputed,
and the residual entering ``l`` is read. Its change ``Δ_l`` is the direct part ``−o_S`` plus the
MLP outputs' change; the **via-MLP** input of R is the clean residual ``+ Δ_l + o_S`` (only the
MLP-mediated change), fed to one of R's inputs (:meth:`.receiver.Patcher.effects_from_residuals`).
Both runs share one hooked forward, so their rounding cancels in ``Δ_l``.

Screen (:meth:`MLPPaths.gradients`): a zero ``δ_m`` added to each layer's clean attention
contribution; one backward pass of R's metric gives ``G_m = ∂f/∂δ_m`` for every ``m < l``,
and ``⟨G_m − ∂f/∂x_l, o_S⟩`` estimates S's via-MLP effect. Cost: :func:`forward_flops`."""

from __future__ import annotations

import numpy as np

from .hooks import Stop, forward, hooked
from .via_mlp import ViaMLP

#: Sequences a hooked forward pass runs at once (times the sources stacked in it).
BATCH_TOKENS = 8192


def forward_flops(net, tokens: int) -> float:
    """About ``2 × (parameters outside the embeddings) × tokens``: one forward pass."""
    n = 0
    for name, p in net.named_parameters():
        if "embed" in name or "wte" in name or "wpe" in name or "lm_head" in name:
            continue
        n += p.numel()
    return 2.0 * float(n) * float(tokens)


def _module(hm, layer):
    f = getattr(hm, "contribution_module", None)
    return f(layer) if f is not None else hm.attention(layer)


class MLPPaths(ViaMLP):
    """:class:`.via_mlp.ViaMLP` by hooked forward passes of ``hm.net`` (module docstring)."""

    def __init__(self, hm, seqs, cap):
        super().__init__(hm, seqs, cap)
        self.contrib = None   # clean attention contributions per layer (N, T, d)
        self._base_at: dict = {}  # the hooked clean run's residuals, per layer read

    # the hooked forward ----------------------------------------------------------------
    def _run(self, ids, deltas, read, stop, grad=False):
        """{l: residual entering l} for l in ``read``, layer j's attention contribution replaced
        by ``clean[j] + deltas[j]`` (``deltas``: j -> tensor or None; ``self.contrib`` None:
        recorded instead)."""
        import torch

        hm, rec, out = self.hm, self.contrib is None, {}
        got = [None] * hm.n_layers

        def contrib_hook(j):
            def hook(_mod, _args, output):
                first = output[0] if isinstance(output, tuple) else output
                if rec:
                    got[j] = first.detach()
                    return None
                new = self._clean_rows[j]
                d = deltas(j)
                if d is not None:
                    new = new + d
                new = new.to(first.dtype)
                return (new, *output[1:]) if isinstance(output, tuple) else new
            return hook

        def read_hook(j):
            def hook(_mod, args, kwargs):
                x = args[0] if args else kwargs["hidden_states"]
                if j in read:
                    out[j] = x
                if j >= stop:
                    raise Stop
            return hook

        hooks = [(_module(hm, j), contrib_hook(j), "post") for j in range(min(stop, hm.n_layers))]
        hooks += [(hm.layers[j], read_hook(j), "pre_kwargs") for j in sorted(set(read) | {stop})
                  if j < hm.n_layers]
        with hooked(hooks), (torch.enable_grad() if grad else torch.inference_mode()):
            forward(hm.net, ids)
        return (got if rec else out)

    def _ensure_clean(self, stop):
        import torch

        if self.contrib is not None:
            return
        parts = []
        step = max(1, BATCH_TOKENS // self.seqs.length)
        for lo in range(0, self.seqs.n, step):
            parts.append(self._run(self.seqs.ids[lo:lo + step], None, (), self.hm.n_layers))
        self.contrib = [torch.cat([p[j] for p in parts]).float() if parts[0][j] is not None
                        else None for j in range(self.hm.n_layers)]

    # exact ------------------------------------------------------------------------------
    def _changes(self, sources, layers, how=None) -> dict:
        """:meth:`changes` computed (the hooked runs, sources stacked)."""
        import torch

        stop = max(layers)
        self._ensure_clean(stop)
        n, t = self.seqs.n, self.seqs.length
        per = max(1, BATCH_TOKENS // (n * t))  # sources stacked per forward
        base = self._clean_at(layers, stop)
        out = {}
        for lo in range(0, len(sources), per):
            chunk = sources[lo:lo + per]
            with torch.no_grad():
                shares = [self._share(m, s, how) for m, s in chunk]
            m_of = [m for m, _ in chunk]

            def deltas(j, m_of=m_of, shares=shares):
                if j not in m_of:
                    return None
                return torch.cat([-sh if m == j else torch.zeros_like(sh)
                                  for m, sh in zip(m_of, shares, strict=True)])

            got = self._stacked(len(chunk), deltas, layers, stop)
            with torch.no_grad():
                for i, (m, s) in enumerate(chunk):
                    back = self._direct(m, shares[i])
                    out[(m, s)] = {l: got[l][i * n:(i + 1) * n] - base[l] + back
                                   for l in layers if l > m}
        return out

    def _stacked(self, copies, deltas, layers, stop):
        """The hooked run of ``copies`` stacked copies of the sequences."""
        import torch

        ids = np.concatenate([self.seqs.ids] * copies)
        self._clean_rows = [None if c is None else torch.cat([c] * copies) for c in self.contrib]
        got = self._run(ids, deltas if deltas is not None else (lambda j: None),
                        set(layers), stop)
        return {l: got[l].float() for l in layers}

    def _clean_at(self, layers, stop):
        """The hooked run without a change (its residuals at ``layers``), kept per request."""
        key = (tuple(sorted(layers)), stop)
        if key not in self._base_at:
            self._base_at = {key: self._stacked(1, None, layers, stop)}
        return self._base_at[key]

    def kept(self, layer: int, keep, how=None, *, direct: bool = True):
        import torch

        keep = {(int(m), int(s)) for m, s in keep}
        self._ensure_clean(layer)
        with torch.no_grad():
            shares = {}
            for m in range(layer):
                gone = [s for s in range(self.hm.n_heads) if (m, s) not in keep]
                if gone:
                    shares[m] = sum(self._share(m, s, how) for s in gone)
            base = self._clean_at([layer], layer)[layer]
            got = self._stacked(1, lambda j: -shares[j] if j in shares else None,
                                [layer], layer)[layer]
            if direct:
                return got - base
            return got - base + sum(self._direct(m, v) for m, v in shares.items())

    # first order ------------------------------------------------------------------------
    def gradients(self, layer: int, fs):
        import torch

        self._ensure_clean(layer)
        self._clean_rows = [None if c is None else c.clone() for c in self.contrib]
        deltas = [torch.zeros_like(self.contrib[m], requires_grad=True) for m in range(layer)]
        got = self._run(self.seqs.ids, lambda j: deltas[j] if j < layer else None, {layer},
                        layer, grad=True)
        return input_gradients(got[layer], deltas, fs)


def input_gradients(x, deltas, fs):
    """(``[∂f/∂x]``, ``[[∂f/∂δ for δ in deltas]]``) of each scalar function in ``fs`` of ``x``,
    a residual computed from the leaves ``deltas`` (:meth:`MLPPaths.gradients`)."""
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


def has_mlps(hm) -> bool:
    """Whether the blocks have an MLP: a nonzero matrix outside attention (OPT: fc1, fc2)."""
    blk, attn = hm.layers[0], {id(p) for p in hm.attention(0).parameters()}
    return any(p.ndim >= 2 and id(p) not in attn and bool(p.detach().abs().max() > 0)
               for p in blk.parameters())


__all__ = ["BATCH_TOKENS", "MLPPaths", "forward_flops", "has_mlps", "input_gradients"]
