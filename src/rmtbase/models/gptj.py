"""GPT-J adapter: ``attn.q_proj`` / ``attn.k_proj`` without biases.

Layout undone (Wang & Komatsuzaki 2021; ``transformers`` ``GPTJAttention``): q_proj and k_proj
are bias-free nn.Linear ``(d, d)``; the forward pass splits their outputs as
``(…, n_heads, d_h)``, so row ``h·d_h + r`` is feature r of head h. RoPE (interleaved pairs)
rotates the first ``rotary_dim`` dimensions of each head (all of them if ``rotary_dim`` is
unset); recorded in ``rotary_fraction``, not applied. Tensor names
``h.{i}.attn.q_proj.weight`` with or without the ``transformer.`` prefix.
"""

from __future__ import annotations

import dataclasses

from ._adapter import Adapter, Dims, cfg_get, mha_dims


class GPTJAdapter(Adapter):
    model_types = ("gptj",)
    probe = "h.{i}.attn.q_proj.weight"
    prefixes = ("transformer.", "")

    def dims(self, cfg: dict) -> Dims:
        dims = mha_dims(cfg, "gptj", width=("n_embd", "hidden_size"),
                        heads=("n_head", "num_attention_heads"),
                        layers=("n_layer", "num_hidden_layers"))
        rotary_dim = cfg_get(cfg, "rotary_dim", required=False)
        fraction = 1.0 if rotary_dim is None else min(float(rotary_dim) / dims.d_h, 1.0)
        return dataclasses.replace(dims, rotary_fraction=fraction)

    def read_layer(self, src, prefix: str, i: int, dims: Dims):
        base = f"{prefix}h.{i}.attn."
        return self.read_linear_pair(src, base + "q_proj", base + "k_proj", dims)
