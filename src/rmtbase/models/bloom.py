"""BLOOM adapter: the fused, per-head interleaved ``self_attention.query_key_value``; ALiBi.

``query_key_value`` (BigScience Workshop 2022) is an nn.Linear ``(3d, d)`` with bias whose rows
are ``(head, {q, k, v}, d_h)`` (``"per_head"`` of :func:`~rmtbase.models._layout.split_qkv`); no
GQA. ALiBi (Press et al. 2022) biases the logits, not q/k, so W_QK is the whole QK circuit."""

from __future__ import annotations

from ._adapter import Adapter
from ._config import Dims, mha_dims
from ._layout import Layout, fused_attention, plain_ffn

_L = "h.{i}."


class BloomAdapter(Adapter):
    model_types = ("bloom",)
    layouts = (Layout({**fused_attention(_L + "self_attention.query_key_value",
                                         _L + "self_attention.dense", "per_head"),
                       **plain_ffn(_L + "mlp.dense_h_to_4h", _L + "mlp.dense_4h_to_h")},
                      prefixes=("transformer.", "")),)

    def dims(self, cfg: dict) -> Dims:
        return mha_dims(cfg, "bloom", width=("hidden_size", "n_embed"),
                        heads=("n_head", "num_attention_heads"),
                        layers=("n_layer", "num_hidden_layers"))
