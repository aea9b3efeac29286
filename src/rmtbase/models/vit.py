"""ViT adapter: ``attention.attention.query`` / ``key`` (hub) or ``attention.q_proj`` (loaded).

Layout undone (Dosovitskiy et al. 2021; ``ViTAttention``): query, key, value nn.Linear
``(d, d)`` (biases with ``qkv_bias``), q and k viewed as ``(…, n_heads, d_h)``; hub and
transformers ≥ 5 naming schemes. Learned positions."""

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
