"""MPNet adapter (e.g. sentence-transformers all-mpnet-base-v2): ``attention.attn.q`` / ``k``.

Layout undone (Song et al. 2020; ``transformers`` ``MPNetSelfAttention``): ``q``, ``k``, ``v``
and ``o`` are nn.Linear ``(d, d)`` with biases; the forward pass views q and k as
``(…, n_heads, d_h)`` (row ``h·d_h + r`` is feature r of head h, d_h = d / n_heads). MLP
``intermediate.dense`` / ``output.dense`` as in BERT. MPNet adds a T5-style bucketed relative
position bias (``encoder.relative_attention_bias``, shared by the layers) to every logit: not
part of W_QK, which is the content–content bilinear form. Tensor names
``encoder.layer.{i}.attention.attn.q.weight`` with or without the ``mpnet.`` prefix.
"""

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
