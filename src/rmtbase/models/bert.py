"""BERT / RoBERTa / MiniLM adapter: ``attention.self.query`` / ``attention.self.key``.

Layout undone (Devlin et al. 2019; Liu et al. 2019; Wang et al. 2020 (MiniLM);
``transformers`` ``BertSelfAttention``): query and key are nn.Linear ``(d, d)`` (out, in);
the forward pass views their outputs as ``(…, n_heads, d_h)``, so row ``h·d_h + r`` is feature
r of head h, with d_h = d / n_heads. Both have biases. Output ``attention.output.dense``, MLP
``intermediate.dense`` / ``output.dense``. Positions are learned absolute embeddings (no
RoPE). Tensor names ``encoder.layer.{i}.attention.self.query.weight`` with or without the
``bert.`` / ``roberta.`` prefix (sentence-transformers checkpoints such as all-MiniLM-L6-v2
have none).
"""

from __future__ import annotations

from ._adapter import Adapter
from ._config import Dims, mha_dims
from ._layout import linear_layout

_L = "encoder.layer.{i}."


class BertAdapter(Adapter):
    model_types = ("bert", "roberta")
    layouts = (linear_layout(_L, ("attention.self.query", "attention.self.key",
                                  "attention.self.value", "attention.output.dense"),
                             ("intermediate.dense", "output.dense"), ("bert.", "roberta.", "")),)

    def dims(self, cfg: dict) -> Dims:
        return mha_dims(cfg, str(cfg.get("model_type")))
