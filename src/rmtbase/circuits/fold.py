"""A patched input of one receiver head without recomputing its layer norm over the whole
residual: the norm's statistics and the head's projection updated by the sources' low-rank
terms (what a patch changes, nothing else). Same numbers as
:meth:`.patching.Patcher.patched_input` (norm re-applied to the patched residual), to float32
rounding (tested to 1e-5), at a fraction of the cost.

Notation for receiver layer ``l``: residual ``x`` ``(N, T, d)``; the norm
``y = g ⊙ x̃ / s + b`` with ``x̃ = x − mean(x)`` and ``b`` its bias (LayerNorm, GPT-2) or
``x̃ = x``, ``b = 0`` (RMSNorm, LLaMA family), ``s² = mean(x̃²) + ε``; the head's projection
``u = y W + c`` (``W`` ``(d, d_h)``, bias ``c``). Source ``i`` writes ``o_i = z_i O_i``
(``O_i`` ``(d_h, d)``); centred ``Õ_i = O_i − rowmean(O_i)`` under LayerNorm (so
``õ_i = z_i Õ_i``), ``Õ_i = O_i`` under RMSNorm. With ``x' = x − Σ o_i``:

- ``(g ⊙ x̃') W = (g ⊙ x̃) W − Σ_i z_i (Õ_i diag(g) W)``: a ``(d_h × d_h)`` matrix per source;
- ``d (s'² − ε) = |x̃|² − 2 Σ_i z_i · (x̃ Õ_iᵀ) + Σ_ij z_i (Õ_i Õ_jᵀ) z_jᵀ``;
- ``u' = (g ⊙ x̃') W / s' + b W + c``, then QK-norm and RoPE as in :class:`.heads.HeadModel`.

The one product over ``d`` per source, ``x̃ Õ_iᵀ`` ``(N, T, d_h)``, is kept per source for
the receiver layer, so every receiver of that layer, and all three paths, share it.
"""

from __future__ import annotations

from ..errors import InputError


class Fold:
    """The fold of the module docstring for receiver ``layer`` of ``hm`` on residual
    ``resid`` ``(N, T, d)`` and captured per-head outputs ``z`` (list per layer of
    ``(N, T, H, d_h)``)."""

    def __init__(self, hm, layer: int, resid, z):
        import torch

        norm = hm.norm(layer)
        if hasattr(norm, "variance_epsilon"):
            self.ln, self.eps, self.bias = False, float(norm.variance_epsilon), None
        elif isinstance(norm, torch.nn.LayerNorm):
            self.ln, self.eps, self.bias = True, float(norm.eps), norm.bias
        else:
            raise InputError(f"unsupported layer norm {type(norm).__name__}")
        self.hm, self.layer, self.z, self.g = hm, int(layer), z, norm.weight.float()
        x = resid.float()
        self.xc = x - x.mean(-1, keepdim=True) if self.ln else x
        self.xx = self.xc.double().pow(2).sum(-1)
        self._p: dict = {}
        self._num: dict = {}
        self._o: dict = {}

    def _centred(self, m: int, s: int):
        if (m, s) not in self._o:
            o = self.hm.source_weight(m, s).float()
            self._o[(m, s)] = o - o.mean(-1, keepdim=True) if self.ln else o
        return self._o[(m, s)]

    def _dot(self, m: int, s: int):
        """``x̃ Õᵀ`` ``(N, T, d_h)`` of source (m, s), kept."""
        if (m, s) not in self._p:
            self._p[(m, s)] = self.xc @ self._centred(m, s).T
        return self._p[(m, s)]

    def _clean_numerator(self, which: int, index: int):
        key = (which, index)
        if key not in self._num:
            w, _ = self.hm.head_weight(self.layer, which, index)
            self._num[key] = (self.xc * self.g) @ w.float()
        return self._num[key]

    def patched(self, head: int, sources, which: int):
        """The receiver head's q (``which=0``), k (1) or v (2) with the sources' direct
        outputs removed from its input (module docstring), ``(N, T, d_h)``."""
        hm = self.hm
        index = hm.index(which, head)
        w, c = hm.head_weight(self.layer, which, index)
        gw = self.g[:, None] * w.float()
        num = self._clean_numerator(which, index).clone()
        zs = [(self.z[m][:, :, s, :].float(), self._centred(m, s)) for m, s in sources]
        dot = self.xx.clone()
        for (m, s), (zi, oi) in zip(sources, zs, strict=True):
            num -= zi @ (oi @ gw)
            dot -= 2.0 * (zi * self._dot(m, s)).sum(-1).double()
            for zj, oj in zs:
                dot += ((zi @ (oi @ oj.T)) * zj).sum(-1).double()
        s2 = dot / hm.d + self.eps
        u = num / s2.sqrt().float()[..., None]
        if self.bias is not None:
            u = u + self.bias.float() @ w.float()
        if c is not None:
            u = u + c
        return hm.finish(self.layer, which, u)


__all__ = ["Fold"]
