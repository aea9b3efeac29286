"""OLMo, OLMo-2 and OLMo-3 adapters: LLaMA names; OLMo-2/3 add a QK-norm over all heads.

Layout undone (Groeneveld et al. 2024 (OLMo); Team OLMo 2024 (OLMo 2); ``transformers``
``OlmoAttention``, ``Olmo2Attention``, ``Olmo3Attention``): q_proj ``(n_heads·d_h, d)`` and
k_proj ``(n_kv_heads·d_h, d)`` viewed as ``(…, heads, d_h)`` as in LLaMA (GQA allowed), output
``o_proj``, gated MLP ``gate_proj``/``up_proj``/``down_proj``.

- OLMo (``olmo``): ``clip_qkv`` (when set) clamps every q, k, v coordinate to ±clip_qkv after
  the projection; W_QK describes the logit wherever no coordinate is clipped. The layer norms
  are non-parametric (no weights).
- OLMo-2 (``olmo2``) and OLMo-3 (``olmo3``): ``q_norm`` / ``k_norm`` are RMSNorms over the
  *whole* projection (n_heads·d_h resp. n_kv_heads·d_h features, one RMS per token shared by
  all heads) with gain vectors of that length. The raw W_Q, W_K are the projections before the
  norm; ``fold_qk_norm=True`` multiplies row h·d_h + r of W_Q by its gain (see
  :mod:`rmtbase.models._qknorm` for exactly what is then covered). OLMo-3's sliding-window
  layers do not change W_QK.

RoPE is not applied. Tensor names ``model.layers.{i}.self_attn.q_proj.weight``.
"""

from __future__ import annotations

from ._adapter import Adapter
from ._config import Dims, gqa_dims
from ._qknorm import QKNorm
from .llama import LLAMA_LAYOUT

_A = "layers.{i}.self_attn."


class OlmoAdapter(Adapter):
    model_types = ("olmo",)
    layouts = (LLAMA_LAYOUT,)

    def dims(self, cfg: dict) -> Dims:
        return gqa_dims(cfg)


class Olmo2Adapter(Adapter):
    model_types = ("olmo2", "olmo3")
    layouts = (LLAMA_LAYOUT,)
    _norm = QKNorm(_A + "q_norm.weight", _A + "k_norm.weight", kind="rms", scope="all_heads")

    def dims(self, cfg: dict) -> Dims:
        return gqa_dims(cfg)

    def qk_norm(self, cfg: dict) -> QKNorm:
        return self._norm
