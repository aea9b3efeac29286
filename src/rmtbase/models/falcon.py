"""Falcon adapter: the fused ``self_attention.query_key_value`` in its three row orders.

Layout undone (Almazrouei et al. 2023; Penedo et al. 2023; ``FalconAttention._split_heads``):

- ``new_decoder_architecture`` (Falcon-40B/180B): ``(kv group, {q_1 … q_g, k, v}, d_h)``,
  g = n_heads / num_kv_heads, query head ``kv·g + j`` meets key ``kv`` (``"grouped"``);
- else ``multi_query`` (Falcon-7B, the default): ``[q of n_heads | one k | one v]``
  (``"blocks"``);
- else (Falcon-RW): ``(head, {q, k, v}, d_h)`` (``"per_head"``).

d_h = hidden_size / num_attention_heads. RoPE is not applied; ALiBi is not part of W_QK."""

from __future__ import annotations

import dataclasses

from ..errors import ModelError
from ._adapter import Adapter
from ._config import Dims, cfg_bool, cfg_int, mha_dims
from ._layout import Layout, fused_attention, plain_ffn

_L = "h.{i}."


def qkv_order(cfg: dict) -> str:
    if cfg_bool(cfg, "new_decoder_architecture", False):
        return "grouped"
    return "blocks" if cfg_bool(cfg, "multi_query", True) else "per_head"


class FalconAdapter(Adapter):
    model_types = ("falcon",)

    def layouts_for(self, cfg: dict) -> tuple[Layout, ...]:
        return (Layout({**fused_attention(_L + "self_attention.query_key_value",
                                          _L + "self_attention.dense", qkv_order(cfg)),
                        **plain_ffn(_L + "mlp.dense_h_to_4h", _L + "mlp.dense_4h_to_h")},
                       prefixes=("transformer.", "")),)

    def dims(self, cfg: dict) -> Dims:
        dims = mha_dims(cfg, "falcon", width=("hidden_size", "n_embed"),
                        heads=("num_attention_heads", "n_head"),
                        layers=("num_hidden_layers", "n_layer"))
        order = qkv_order(cfg)
        if order == "grouped":
            n_kv = cfg_int(cfg, "num_kv_heads", "n_head_kv", default=dims.n_heads)
        else:
            n_kv = 1 if order == "blocks" else dims.n_heads
        if dims.n_heads % n_kv:
            raise ModelError(f"falcon config: num_attention_heads={dims.n_heads} is not a "
                             f"multiple of num_kv_heads={n_kv}")
        rotary = 0.0 if cfg_bool(cfg, "alibi", False) else 1.0
        return dataclasses.replace(dims, n_kv_heads=n_kv, rotary_fraction=rotary)
