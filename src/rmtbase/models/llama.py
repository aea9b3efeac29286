"""LLaMA-family adapter: separate ``self_attn.q_proj`` / ``k_proj`` with GQA, gated MLP.

q_proj ``(n_heads·d_h, d)``, k_proj ``(n_kv_heads·d_h, d)`` (Touvron et al. 2023), row
``h·d_h + r`` feature r of head h; under GQA (Ainslie et al. 2023) query head i meets key head
⌊i / (n_heads/n_kv_heads)⌋; ``d_h`` is ``head_dim`` when present. RoPE is not applied. Same
layout: Mistral, Qwen2 (q/k biases), Granite (``attention_multiplier`` not in W_QK), SmolLM3."""

from __future__ import annotations

from ._adapter import Adapter
from ._config import Dims, gqa_dims
from ._layout import Layout, attention_parts, gated_ffn

_A = "layers.{i}.self_attn."
_M = "layers.{i}.mlp."

#: Attention parts shared by every LLaMA-style decoder (q/k/v/o_proj under ``self_attn``).
LLAMA_ATTENTION = attention_parts(_A + "q_proj", _A + "k_proj", _A + "v_proj", _A + "o_proj")
#: The LLaMA gated MLP.
LLAMA_MLP = gated_ffn(_M + "gate_proj", _M + "up_proj", _M + "down_proj")
#: The LLaMA layout (q/k/v/o and gated MLP under ``model.layers.{i}``).
LLAMA_LAYOUT = Layout({**LLAMA_ATTENTION, **LLAMA_MLP}, prefixes=("model.", ""))


class LlamaAdapter(Adapter):
    model_types = ("llama", "mistral", "qwen2", "granite", "smollm3")
    layouts = (LLAMA_LAYOUT,)

    def dims(self, cfg: dict) -> Dims:
        return gqa_dims(cfg)
