"""GPT-2 adapter: the fused Conv1D ``attn.c_attn``.

Layout undone (Radford et al. 2019; ``GPT2Attention``): ``c_attn`` is a Conv1D, ``y = x W + b``
with ``W`` ``(d, 3d)``: columns ``[0:d]`` query, ``[d:2d]`` key, ``[2d:3d]`` value, column
``h·d_h + r`` feature r of head h; so W_Q of head h is ``W[:, h·d_h:(h+1)·d_h]ᵀ``. The logit
scale is not applied."""

from __future__ import annotations

from ._adapter import Adapter
from ._config import Dims, mha_dims
from ._layout import Layout, fused_attention, plain_ffn


class GPT2Adapter(Adapter):
    model_types = ("gpt2",)
    layouts = (Layout({**fused_attention("h.{i}.attn.c_attn", "h.{i}.attn.c_proj", conv1d=True),
                       **plain_ffn("h.{i}.mlp.c_fc", "h.{i}.mlp.c_proj", conv1d=True)},
                      prefixes=("transformer.", "")),)

    def dims(self, cfg: dict) -> Dims:
        return mha_dims(cfg, "gpt2", width=("n_embd", "hidden_size"),
                        heads=("n_head", "num_attention_heads"),
                        layers=("n_layer", "num_hidden_layers"))
