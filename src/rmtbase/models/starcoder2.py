"""StarCoder2 adapter: LLaMA attention names with biases, plain (non-gated) MLP.

Layout undone (Lozhkov et al. 2024; ``Starcoder2Attention``): as LLaMA with biases when
``use_bias``, GQA; MLP ``mlp.c_fc`` / ``mlp.c_proj`` (``ffn_in`` / ``ffn_out``); no RoPE."""

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
