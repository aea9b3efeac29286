"""Cohere (Command-R, Aya) adapter: LLaMA names; optional per-head LayerNorm QK-norm.

Layout undone (Cohere 2024; ``CohereAttention``): q_proj ``(n_heads·d_h, d)``, k_proj
``(n_kv_heads·d_h, d)`` viewed as ``(…, heads, d_h)``; GQA; ``o_proj``, gated MLP; RoPE not
applied. With ``use_qk_norm``, ``q_norm`` / ``k_norm`` are bias-free LayerNorms per head
(gains ``(n_heads, d_h)``), folded by ``fold_qk_norm=True``."""

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
