"""BERT / RoBERTa / MiniLM adapter: ``attention.self.query`` / ``attention.self.key``.

Layout undone (Devlin et al. 2019; Liu et al. 2019; Wang et al. 2020; ``BertSelfAttention``):
query and key are nn.Linear ``(d, d)`` with biases, outputs viewed as ``(…, n_heads, d_h)``, so
row ``h·d_h + r`` is feature r of head h. Learned absolute positions; names with or without
the ``bert.`` / ``roberta.`` prefix."""

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
