"""BLOOM adapter: the fused, per-head interleaved ``self_attention.query_key_value``; ALiBi.

Layout undone (BigScience Workshop 2022, "BLOOM: A 176B-Parameter Open-Access Multilingual
Language Model"; ``transformers`` ``BloomAttention._reshape``): ``query_key_value`` is an
nn.Linear ``(3d, d)`` with bias whose output the forward pass views as ``(…, n_head, 3, d_h)``
and reads q, k, v at index 0, 1, 2 of the middle axis, so its rows are ordered
``(head, {q, k, v}, d_h)`` as in GPT-NeoX (order ``"per_head"`` of
:func:`~rmtbase.models._layout.split_qkv`): ``W.reshape(n_head, 3, d_h, d)[:, 0]`` is W_Q and
``[:, 1]`` is W_K. A plain three-way chunk of the rows is wrong. d_h = d / n_head always
(``BloomAttention`` reads no ``head_dim``); no GQA. Output ``self_attention.dense``, MLP
``mlp.dense_h_to_4h`` / ``dense_4h_to_h``.

Positions are ALiBi (Press et al. 2022): a per-head linear bias on the key distance added to
the logits, not a rotation of q/k, so W_QK is the whole QK circuit (``rotary_fraction`` 0).
Config keys: ``hidden_size`` (old checkpoints: ``n_embed``), ``n_head``, ``n_layer`` (the
transformers ``BloomConfig`` attribute names; ``num_attention_heads``/``num_hidden_layers``
accepted). Tensor names ``transformer.h.{i}.self_attention.query_key_value.weight``
(``BloomForCausalLM``) or without the ``transformer.`` prefix (``BloomModel``).
"""

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
