"""GPT-BigCode (SantaCoder, StarCoder 1) adapter: multi-query fused ``attn.c_attn``.

Layout undone (Allal et al. 2023; Li et al. 2023; ``GPTBigCodeAttention``): ``c_attn`` is an
``nn.Linear`` (out, in). With ``multi_query`` (the default) it is ``(d + 2·d_h, d)``, rows
``[q of n_heads | one k | one v]`` (``"blocks"``); without it ``(head, {q, k, v}, d_h)``
(``"per_head"``)."""

from __future__ import annotations

import dataclasses

from ._adapter import Adapter
from ._config import Dims, cfg_bool, mha_dims
from ._layout import Layout, fused_attention, plain_ffn

_L = "h.{i}."


class GPTBigCodeAdapter(Adapter):
    model_types = ("gpt_bigcode",)

    def layouts_for(self, cfg: dict) -> tuple[Layout, ...]:
        order = "blocks" if cfg_bool(cfg, "multi_query", True) else "per_head"
        return (Layout({**fused_attention(_L + "attn.c_attn", _L + "attn.c_proj", order),
                        **plain_ffn(_L + "mlp.c_fc", _L + "mlp.c_proj")},
                       prefixes=("transformer.", "")),)

    def dims(self, cfg: dict) -> Dims:
        dims = mha_dims(cfg, "gpt_bigcode", width=("n_embd", "hidden_size"),
                        heads=("n_head", "num_attention_heads"),
                        layers=("n_layer", "num_hidden_layers"))
        n_kv = 1 if cfg_bool(cfg, "multi_query", True) else dims.n_heads
        return dataclasses.replace(dims, n_kv_heads=n_kv)
