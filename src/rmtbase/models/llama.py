"""LLaMA / Mistral / Qwen2 adapter: separate ``self_attn.q_proj`` / ``k_proj`` with GQA.

Layout undone (Touvron et al. 2023; Jiang et al. 2023 (Mistral); Yang et al. 2024 (Qwen2);
``transformers`` ``LlamaAttention``): q_proj is an nn.Linear ``(n_heads·d_h, d)``, k_proj
``(n_kv_heads·d_h, d)``; the forward pass views their outputs as ``(…, heads, d_h)``, so row
``h·d_h + r`` is feature r of head h. Under grouped-query attention (Ainslie et al. 2023)
``n_kv_heads < n_heads`` and query head i meets key head ⌊i / (n_heads/n_kv_heads)⌋ (the
``repeat_kv`` / repeat_interleave of the forward pass); the expansion is done by the loader.

``d_h`` is the config's ``head_dim`` when present (it may differ from d / n_heads, e.g.
Mistral-Nemo), else d / n_heads. Qwen2 has q/k biases, LLaMA and Mistral none. RoPE
(all of d_h unless ``partial_rotary_factor``) is not applied. Tensor names
``layers.{i}.self_attn.q_proj.weight`` with or without the ``model.`` prefix.
"""

from __future__ import annotations

from ..errors import ModelError
from ._adapter import Adapter, Dims, cfg_get, cfg_int
from .gpt_neox import rotary_fraction


class LlamaAdapter(Adapter):
    model_types = ("llama", "mistral", "qwen2")
    probe = "layers.{i}.self_attn.q_proj.weight"
    prefixes = ("model.", "")

    def dims(self, cfg: dict) -> Dims:
        d = cfg_int(cfg, "hidden_size")
        n_heads = cfg_int(cfg, "num_attention_heads")
        n_kv = cfg_int(cfg, "num_key_value_heads", default=n_heads)
        if n_heads % n_kv:
            raise ModelError(f"{cfg.get('model_type')} config: num_attention_heads={n_heads} is "
                             f"not a multiple of num_key_value_heads={n_kv}")
        if cfg_get(cfg, "head_dim", required=False) is not None:
            d_h = cfg_int(cfg, "head_dim")
        elif d % n_heads:
            raise ModelError(f"{cfg.get('model_type')} config: hidden_size={d} is not divisible "
                             f"by num_attention_heads={n_heads} and head_dim is not given")
        else:
            d_h = d // n_heads
        return Dims(d=d, d_h=d_h, n_layers=cfg_int(cfg, "num_hidden_layers"), n_heads=n_heads,
                    n_kv_heads=n_kv, rotary_fraction=rotary_fraction(cfg, 1.0))

    def read_layer(self, src, prefix: str, i: int, dims: Dims):
        base = f"{prefix}layers.{i}.self_attn."
        return self.read_linear_pair(src, base + "q_proj", base + "k_proj", dims)
