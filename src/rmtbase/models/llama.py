"""LLaMA-family adapter: separate ``self_attn.q_proj`` / ``k_proj`` with GQA, gated MLP.

Layout undone (Touvron et al. 2023; ``transformers`` ``LlamaAttention``): q_proj is an
nn.Linear ``(n_heads·d_h, d)``, k_proj ``(n_kv_heads·d_h, d)``; the forward pass views their
outputs as ``(…, heads, d_h)``, so row ``h·d_h + r`` is feature r of head h. Under
grouped-query attention (Ainslie et al. 2023) ``n_kv_heads < n_heads`` and query head i meets
key head ⌊i / (n_heads/n_kv_heads)⌋ (the ``repeat_kv`` / repeat_interleave of the forward
pass); the expansion is done by the loader. Output ``self_attn.o_proj``; MLP
``down(act(gate x) ⊙ up x)`` with ``mlp.gate_proj`` / ``up_proj`` / ``down_proj``.

The same layout, with nothing else that touches W_Q or W_K, is used by:

- Mistral (Jiang et al. 2023), Qwen2 (Yang et al. 2024; q/k biases);
- Granite (IBM 2024; ``GraniteAttention``): its ``attention_multiplier`` replaces 1/√d_h as
  the logit scale, which is not part of W_QK anyway;
- SmolLM3 (Hugging Face 2025; ``SmolLM3Attention``): some layers skip RoPE (``no_rope_layers``)
  — W_QK is the same bilinear form either way, since RoPE is never applied here.

``d_h`` is the config's ``head_dim`` when present (it may differ from d / n_heads, e.g.
Mistral-Nemo), else d / n_heads. RoPE (all of d_h unless ``partial_rotary_factor``) is not
applied. Tensor names ``layers.{i}.self_attn.q_proj.weight`` with or without the ``model.``
prefix.
"""

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
