"""Phi-3 adapter: the fused ``self_attn.qkv_proj`` and fused ``mlp.gate_up_proj``.

Layout undone (Abdin et al. 2024; ``Phi3Attention``, ``Phi3MLP``): ``qkv_proj``
``((n_heads + 2·n_kv_heads)·d_h, d)`` holds ``[q | k | v]`` blocks (``"blocks"``), GQA as in
LLaMA. ``gate_up_proj`` ``(2I, d)`` chunks into ``ffn_gate``, ``ffn_up``. RoPE is not applied."""

from __future__ import annotations

from ._adapter import Adapter
from ._config import Dims, gqa_dims
from ._layout import Chunk, Layout, Linear, fused_attention

_L = "layers.{i}."


class Phi3Adapter(Adapter):
    model_types = ("phi3",)
    layouts = (Layout({**fused_attention(_L + "self_attn.qkv_proj", _L + "self_attn.o_proj"),
                       "ffn_gate": Chunk(_L + "mlp.gate_up_proj", 0),
                       "ffn_up": Chunk(_L + "mlp.gate_up_proj", 1),
                       "ffn_down": Linear(_L + "mlp.down_proj")},
                      prefixes=("model.", "")),)

    def dims(self, cfg: dict) -> Dims:
        return gqa_dims(cfg)
