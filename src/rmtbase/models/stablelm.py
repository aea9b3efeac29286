"""StableLM (StableLM-3B-4E1T, StableLM-2) adapter: LLaMA names, partial rotary, per-head norm.

Layout undone (Bellagente et al. 2024; ``StableLmAttention``): as LLaMA (biases with
``use_qkv_bias``, d_h = d / n_heads, GQA); RoPE on the first ``partial_rotary_factor · d_h``
dims, not applied. With ``qk_layernorm`` each head has its own bias-free LayerNorm, folded by
``fold_qk_norm=True``."""

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
