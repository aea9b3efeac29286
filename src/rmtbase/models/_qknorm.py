"""QK-norm: a normalisation between the query/key projections and the logit.

References: Dehghani et al. 2023; Wortsman et al. 2023 (per-architecture forms in the adapters).

With q = W_Q x + b_q (k likewise) the logit is, up to the model's scale,
``s_ij = (G_q N(q_i))·(G_k N(k_j))``, G = diag(gain), N(y) = P y / ρ(y), P = I (RMSNorm) or
I − 11ᵀ/m (LayerNorm), ρ(y) = √(mean((P y)²) + ε) over the norm's axis (m = d_h or n·d_h).

- **Raw (default)**: W_QK = W_Qᵀ W_K of the projections before the norm.
- **Folded** (``fold_qk_norm=True``): W_Q ← G_q P W_Q, b_q ← G_q P b_q (K likewise); then
  ``s_ij = (W_Q x_i + b_q)ᵀ(W_K x_j + b_k) / (ρ_q(i) ρ_k(j))`` exactly, up to the input-
  dependent factors 1/ρ. Refused for a LayerNorm with a bias."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ModelError
from ._config import Dims
from ._layout import LayerReader


@dataclass(frozen=True)
class QKNorm:
    """A q/k norm: gain tensors ``q``, ``k`` (``{i}``; ``{h}`` for one module per head), ``kind``
    ``"rms"``/``"layer"``, ``scope`` ``"head"``/``"all_heads"``, ``offset`` added to the weight
    (Gemma: 1), ``bias`` (not foldable)."""

    q: str
    k: str
    kind: str = "rms"
    scope: str = "head"
    offset: float = 0.0
    bias: bool = False
    per_head_modules: bool = False

    @property
    def label(self) -> str:
        """``"rms_head"``, ``"rms_all_heads"``, ``"layer_head"`` (:attr:`ModelInfo.qk_norm`)."""
        return f"{self.kind}_{self.scope}"

    def _gain(self, r: LayerReader, name: str, n: int, d_h: int) -> np.ndarray:
        if self.per_head_modules:
            w = np.stack([r.get(name, h=h) for h in range(n)])
            shown = r.name(name, h=0)
        else:
            w = r.get(name)
            shown = r.name(name)
        g = self.offset + w.astype(np.float64)
        if g.size == d_h and self.scope == "head":
            return np.broadcast_to(g.reshape(1, d_h), (n, d_h))
        if g.size == n * d_h:
            return g.reshape(n, d_h)
        raise ModelError(f"norm tensor {shown!r} has shape {tuple(w.shape)}, expected "
                         f"({d_h},) or ({n * d_h},) for {n} heads of size {d_h}")

    def gains(self, r: LayerReader, dims: Dims) -> tuple[np.ndarray, np.ndarray]:
        """Per-head gains ``(n_heads, d_h)`` for q and ``(n_kv_heads, d_h)`` for k."""
        return (self._gain(r, self.q, dims.n_heads, dims.d_h),
                self._gain(r, self.k, dims.n_kv_heads, dims.d_h))

    def check_foldable(self, arch: str) -> None:
        """ModelError if the norm is not a per-dimension scale (a LayerNorm with a bias)."""
        if self.bias:
            raise ModelError(f"fold_qk_norm: the q/k LayerNorm of this {arch} model has a bias, "
                             "so it is not a per-dimension scale; score the raw weights")

    def fold(self, w: np.ndarray, b: np.ndarray | None, gain: np.ndarray, arch: str):
        """``(G P W, G P b)`` for per-head factors ``w`` ``(n, d_h, d)``, bias ``(n, d_h)``."""
        self.check_foldable(arch)
        w = w.astype(np.float64)
        if self.kind == "layer":  # the centring P = I − 11ᵀ/d_h acts on each head's d_h rows
            w = w - w.mean(axis=1, keepdims=True)
            b = None if b is None else b - b.mean(axis=1, keepdims=True)
        w = w * gain[:, :, None]
        b = None if b is None else b * gain
        return w.astype(np.float32), None if b is None else b.astype(np.float32)
