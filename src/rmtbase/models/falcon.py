"""Falcon adapter: the fused ``self_attention.query_key_value`` in its three row orders
(``FalconAttention._split_heads``; Almazrouei et al. 2023): ``new_decoder_architecture``
(``"grouped"``: query head ``kv·g + j`` meets key ``kv``), else ``multi_query`` (``"blocks"``:
one k, one v), else Falcon-RW (``"per_head"``). d_h = hidden_size / num_attention_heads; RoPE
is not applied and ALiBi is not part of W_QK."""

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
