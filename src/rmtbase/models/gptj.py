"""GPT-J adapter: ``attn.q_proj`` / ``attn.k_proj`` without biases.

Layout undone (Wang & Komatsuzaki 2021; ``GPTJAttention``): bias-free nn.Linear ``(d, d)``
split as ``(…, n_heads, d_h)``. RoPE on the first ``rotary_dim`` dims (all if unset) is
recorded in ``rotary_fraction``, not applied."""

from __future__ import annotations

import dataclasses

from ._adapter import Adapter
from ._config import Dims, cfg_int, mha_dims
from ._layout import linear_layout

_L = "h.{i}."


class GPTJAdapter(Adapter):
    model_types = ("gptj",)
    layouts = (linear_layout(_L, ("attn.q_proj", "attn.k_proj", "attn.v_proj", "attn.out_proj"),
                             ("mlp.fc_in", "mlp.fc_out"), ("transformer.", "")),)

    def dims(self, cfg: dict) -> Dims:
        dims = mha_dims(cfg, "gptj", width=("n_embd", "hidden_size"),
                        heads=("n_head", "num_attention_heads"),
                        layers=("n_layer", "num_hidden_layers"))
        if cfg.get("rotary_dim") is None:
            return dataclasses.replace(dims, rotary_fraction=1.0)
        fraction = min(cfg_int(cfg, "rotary_dim") / dims.d_h, 1.0)
        return dataclasses.replace(dims, rotary_fraction=fraction)
