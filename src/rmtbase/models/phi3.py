"""Phi-3 adapter: the fused ``self_attn.qkv_proj`` and fused ``mlp.gate_up_proj``.

Layout undone (Abdin et al. 2024, "Phi-3 technical report"; ``transformers``
``Phi3Attention``, ``Phi3MLP``): ``qkv_proj`` is an nn.Linear ``((n_heads + 2·n_kv_heads)·d_h,
d)`` whose output the forward pass slices into ``[q | k | v]`` blocks (``query_pos =
n_heads·d_h``), each viewed as ``(…, heads, d_h)`` (order ``"blocks"`` of
:func:`~rmtbase.models._layout.split_qkv`); GQA as in LLaMA (Phi-3-medium, Phi-4-mini).
``gate_up_proj`` ``(2I, d)`` is chunked into ``gate, up`` (gate first, the activated branch):
reported as ``ffn_gate`` and ``ffn_up``; ``down_proj`` is ``ffn_down``. RoPE (a
``partial_rotary_factor`` of d_h, e.g. 0.75 for Phi-4-mini) is not applied. Tensor names
``model.layers.{i}.self_attn.qkv_proj.weight``.
"""

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
