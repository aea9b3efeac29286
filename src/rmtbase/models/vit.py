"""ViT adapter: ``attention.attention.query`` / ``key`` (hub) or ``attention.q_proj`` (loaded).

Layout undone (Dosovitskiy et al. 2021; ``transformers`` ``ViTAttention``): query, key, value
are nn.Linear ``(d, d)`` (biases when ``qkv_bias``); the forward pass views q and k as
``(…, n_heads, d_h)`` (row ``h·d_h + r`` is feature r of head h). Two naming schemes hold the
same tensors: the hub's (``encoder.layer.{i}.attention.attention.query``, output
``attention.output.dense``, MLP ``intermediate.dense`` / ``output.dense``), which
``save_pretrained`` still writes, and that of a ViT loaded by transformers ≥ 5
(``layers.{i}.attention.q_proj`` … ``o_proj``, MLP ``mlp.fc1`` / ``fc2``). Learned absolute
position embeddings (no RoPE). Prefix ``vit.`` or none.
"""

from __future__ import annotations

from ._adapter import Adapter
from ._config import Dims, mha_dims
from ._layout import Layout, attention_parts, plain_ffn

_OLD = "encoder.layer.{i}."
_NEW = "layers.{i}."


class ViTAdapter(Adapter):
    model_types = ("vit",)
    layouts = (
        Layout({**attention_parts(_OLD + "attention.attention.query",
                                  _OLD + "attention.attention.key",
                                  _OLD + "attention.attention.value",
                                  _OLD + "attention.output.dense"),
                **plain_ffn(_OLD + "intermediate.dense", _OLD + "output.dense")},
               prefixes=("vit.", "")),
        Layout({**attention_parts(_NEW + "attention.q_proj", _NEW + "attention.k_proj",
                                  _NEW + "attention.v_proj", _NEW + "attention.o_proj"),
                **plain_ffn(_NEW + "mlp.fc1", _NEW + "mlp.fc2")},
               prefixes=("vit.", "")),
    )

    def dims(self, cfg: dict) -> Dims:
        return mha_dims(cfg, "vit")
