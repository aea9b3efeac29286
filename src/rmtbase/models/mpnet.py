"""MPNet adapter (e.g. all-mpnet-base-v2): ``attention.attn.q`` / ``k``.

Layout undone (Song et al. 2020; ``MPNetSelfAttention``): ``q``, ``k``, ``v``, ``o`` nn.Linear
``(d, d)`` with biases, q and k viewed as ``(…, n_heads, d_h)``. The relative position bias is
added to the logits, not part of W_QK."""

from __future__ import annotations

from ._adapter import Adapter
from ._config import Dims, mha_dims
from ._layout import linear_layout

_L = "encoder.layer.{i}."


class MPNetAdapter(Adapter):
    model_types = ("mpnet",)
    layouts = (linear_layout(_L, ("attention.attn.q", "attention.attn.k", "attention.attn.v",
                                  "attention.attn.o"), ("intermediate.dense", "output.dense"),
                             ("mpnet.", "")),)

    def dims(self, cfg: dict) -> Dims:
        return mha_dims(cfg, "mpnet")
