"""Cohere (Command-R, Aya) adapter: LLaMA names; optional per-head LayerNorm QK-norm.

Layout undone (Cohere 2024; ``transformers`` ``CohereAttention``): q_proj
``(n_heads·d_h, d)``, k_proj ``(n_kv_heads·d_h, d)`` viewed as ``(…, heads, d_h)``; GQA.
Output ``o_proj``, gated MLP (in parallel with attention). RoPE (interleaved pairs) is not
applied. With ``use_qk_norm`` (Command-R+) ``q_norm`` / ``k_norm`` are bias-free LayerNorms
over each head's d_h features with a separate gain per head (``CohereLayerNorm``, weight
``(n_heads, d_h)``): the raw W_Q, W_K are the projections before the norm, and
``fold_qk_norm=True`` folds each head's centring and gain into its rows
(:mod:`rmtbase.models._qknorm`). The logit scale (1/√d_h) and ``logit_scale`` of the LM head
are not part of W_QK.
"""

from __future__ import annotations

from ._adapter import Adapter
from ._config import Dims, cfg_bool, gqa_dims
from ._qknorm import QKNorm
from .llama import LLAMA_LAYOUT

_A = "layers.{i}.self_attn."
_NORM = QKNorm(_A + "q_norm.weight", _A + "k_norm.weight", kind="layer", scope="head")


class CohereAdapter(Adapter):
    model_types = ("cohere",)
    layouts = (LLAMA_LAYOUT,)

    def dims(self, cfg: dict) -> Dims:
        return gqa_dims(cfg)

    def qk_norm(self, cfg: dict) -> QKNorm | None:
        return _NORM if cfg_bool(cfg, "use_qk_norm", False) else None
