"""StarCoder2 adapter: LLaMA attention names with biases, plain (non-gated) MLP.

Layout undone (Lozhkov et al. 2024, "StarCoder 2 and The Stack v2"; ``transformers``
``Starcoder2Attention``, ``Starcoder2MLP``): q_proj ``(n_heads·d_h, d)`` and k_proj
``(n_kv_heads·d_h, d)``, with biases when ``use_bias`` (the default), viewed as
``(…, heads, d_h)``; GQA. Output ``o_proj``; MLP ``mlp.c_fc`` / ``mlp.c_proj`` (nn.Linear,
reported as ``ffn_in`` / ``ffn_out``). RoPE not applied; sliding-window attention only masks.
"""

from __future__ import annotations

from ._adapter import Adapter
from ._config import Dims, gqa_dims
from ._layout import Layout, plain_ffn
from .llama import LLAMA_ATTENTION


class Starcoder2Adapter(Adapter):
    model_types = ("starcoder2",)
    layouts = (Layout({**LLAMA_ATTENTION, **plain_ffn("layers.{i}.mlp.c_fc",
                                                      "layers.{i}.mlp.c_proj")},
                      prefixes=("model.", "")),)

    def dims(self, cfg: dict) -> Dims:
        return gqa_dims(cfg)
