"""StableLM (StableLM-3B-4E1T, StableLM-2) adapter: LLaMA names, partial rotary, per-head norm.

Layout undone (Bellagente et al. 2024, "Stable LM 2 1.6B"; ``transformers``
``StableLmAttention``): q_proj ``(d, d)`` and k_proj ``(n_kv_heads·d_h, d)`` (biases when
``use_qkv_bias``), viewed as ``(…, heads, d_h)`` with d_h = d / n_heads; GQA as in LLaMA.
Output ``o_proj``, gated MLP. RoPE rotates the first ``partial_rotary_factor · d_h``
dimensions (0.25 by default); not applied. With ``qk_layernorm`` (StableLM-2-12B) each head has
its own bias-free LayerNorm over its d_h features (``q_layernorm.norms.{h}.weight``, gain
``(d_h,)`` per head): the raw W_Q, W_K are the projections before the norm, and
``fold_qk_norm=True`` folds each head's centring and gain into its rows
(:mod:`rmtbase.models._qknorm`).
"""

from __future__ import annotations

from ._adapter import Adapter
from ._config import Dims, cfg_bool, gqa_dims
from ._qknorm import QKNorm
from .llama import LLAMA_LAYOUT

_A = "layers.{i}.self_attn."
_NORM = QKNorm(_A + "q_layernorm.norms.{h}.weight", _A + "k_layernorm.norms.{h}.weight",
               kind="layer", scope="head", per_head_modules=True)


class StableLmAdapter(Adapter):
    model_types = ("stablelm",)
    layouts = (LLAMA_LAYOUT,)

    def dims(self, cfg: dict) -> Dims:
        return gqa_dims(cfg, rotary_default=0.25, head_dim=False)

    def qk_norm(self, cfg: dict) -> QKNorm | None:
        return _NORM if cfg_bool(cfg, "qk_layernorm", False) else None
