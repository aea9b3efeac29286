"""DistilBERT adapter: ``transformer.layer.{i}.attention.q_lin`` / ``k_lin``.

Layout undone (Sanh et al. 2019; ``DistilBertSelfAttention``): ``q_lin``, ``k_lin``, ``v_lin``,
``out_lin`` are nn.Linear ``(dim, dim)`` with biases, q and k viewed as ``(…, n_heads, d_h)``."""

from __future__ import annotations

from ._adapter import Adapter
from ._config import Dims, mha_dims
from ._layout import linear_layout

_L = "transformer.layer.{i}."


class DistilBertAdapter(Adapter):
    model_types = ("distilbert",)
    layouts = (linear_layout(_L, ("attention.q_lin", "attention.k_lin", "attention.v_lin",
                                  "attention.out_lin"), ("ffn.lin1", "ffn.lin2"),
                             ("distilbert.", "")),)

    def dims(self, cfg: dict) -> Dims:
        return mha_dims(cfg, "distilbert", width=("dim", "hidden_size"),
                        heads=("n_heads", "num_attention_heads"),
                        layers=("n_layers", "num_hidden_layers"))
