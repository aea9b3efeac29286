"""The head search's via-MLP paths (maths: :mod:`.paths`): the sources' counterfactual shares,
their changes (kept) and first-order screen; :class:`.paths.ForwardPaths` gives ``_changes``,
``kept`` and ``gradients`` on the graph forward (the tests: a hooked one)."""

from __future__ import annotations

import numpy as np


class ViaMLP:
    """Via-MLP paths of ``hm`` on ``seqs``; ``cap``: their capture (:class:`.capture.Captured`)."""

    def __init__(self, hm, seqs, cap):
        self.hm, self.seqs, self.cap = hm, seqs, cap

    def changes(self, sources, layers, how=None) -> dict:
        """{(m, s): {l: Δ_l + o_S}}: per source, the via-MLP change ``(N, T, d)`` entering each
        layer ``l > m`` in ``layers``, the source's output replaced as ``how`` says
        (:meth:`.receiver.Patcher.hows`; None: removed); kept for the layer's receivers."""

        if not sources or not layers:
            return {}
        memo = self.__dict__.setdefault("_memo", {})
        tag = None if how is None else (how[0].kind, how[1])
        todo = [src for src in sources if any((tag, src, l) not in memo for l in layers
                                              if l > src[0])]
        if todo:
            for src, got in self._changes(todo, layers, how).items():
                for l, v in got.items():
                    memo[(tag, src, l)] = v
        return {src: {l: memo[(tag, src, l)] for l in layers if l > src[0]} for src in sources}

    def _changes(self, sources, layers, how=None) -> dict:  # the engine's runs
        raise NotImplementedError

    def kept(self, layer: int, keep, how=None, *, direct: bool = True):
        """The change ``(N, T, d)`` entering ``layer``, every earlier head but ``keep``'s (m, s)
        replaced as ``how`` says, the MLPs recomputed, every other attention output clean:
        direct and MLP-mediated (``direct=False``: only the latter)."""
        raise NotImplementedError

    def gradients(self, layer: int, fs):
        """(``[∂f/∂x_l]``, ``[[∂f/∂δ_m for m < l]]``) of each ``f`` in ``fs`` of the residual ``x_l``
        entering ``l = layer``, ``δ_m`` added to layer ``m``'s clean attention output."""
        raise NotImplementedError

    def _share(self, m, s, how=None):
        """Head (m, s)'s share of layer m's contribution module's output, or the change of that
        share under ``how``'s counterfactual (:meth:`changes`)."""
        import torch

        scale = None if self.cap.scale is None else self.cap.scale[m]
        z = self.cap.z[m][:, :, s, :].float()
        if how is None:
            return self.hm.source_contribution(m, s, z, scale=scale).float()
        u = how[0].delta(z if scale is None else z * scale.float(), how[1])
        one = None if scale is None else torch.ones_like(scale)
        return self.hm.source_contribution(m, s, u, scale=one).float()

    def _direct(self, m, share):
        """The residual-space direct part of a share (the block's factor on it)."""
        return share * float(self.hm.contribution_factor(m))

    def joint(self, layer: int, how=None):
        """The via-MLP change at ``layer`` with every earlier head's share replaced at once."""
        return self.kept(layer, (), how, direct=False)

    def attribution(self, layer: int, fs, combine, how=None) -> np.ndarray:
        """``(layer, H)``: ``combine`` of ``⟨G_m − ∂f/∂x_l, o_S⟩`` per sequence for every earlier
        head S (``fs``, ``combine``: :func:`.screen.metrics`), ``o_S`` the change of ``how``'s
        counterfactual (a first-order ``how``: resample with its pairings' mean)."""
        import torch

        g_ls, g_ms = self.gradients(layer, fs)
        out = np.zeros((layer, self.hm.n_heads))
        with torch.inference_mode():
            for m in range(layer):
                ds = [g_ms[i][m] - g_ls[i] for i in range(len(fs))]
                for s in range(self.hm.n_heads):
                    o = self._share(m, s, how)
                    d = torch.stack([(g * o).sum((-1, -2)) for g in ds]).double().numpy()
                    out[m, s] = combine(d)
        return out


__all__ = ["ViaMLP"]
