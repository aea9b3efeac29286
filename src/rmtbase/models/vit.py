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
from ._layout import linear_layout

_OLD = "encoder.layer.{i}."
_NEW = "layers.{i}."


class ViTAdapter(Adapter):
    model_types = ("vit",)
    layouts = (
        linear_layout(_OLD, ("attention.attention.query", "attention.attention.key",
                             "attention.attention.value", "attention.output.dense"),
                      ("intermediate.dense", "output.dense"), ("vit.", "")),
        linear_layout(_NEW, ("attention.q_proj", "attention.k_proj", "attention.v_proj",
                             "attention.o_proj"), ("mlp.fc1", "mlp.fc2"), ("vit.", "")),
    )

    def dims(self, cfg: dict) -> Dims:
        return mha_dims(cfg, "vit")
