"""OPT adapter: ``self_attn.q_proj`` / ``self_attn.k_proj`` of the decoder layers.

Layout undone (Zhang et al. 2022; ``OPTAttention``): q_proj, k_proj nn.Linear ``(d, d)`` with
biases, viewed as ``(…, n_heads, d_h)``. OPT scales the query by 1/√d_h inside ``forward``;
that factor is not in W_Q. d is ``hidden_size`` (not ``word_embed_proj_dim``)."""

from __future__ import annotations

from ._adapter import Adapter
from ._config import Dims, mha_dims
from ._layout import linear_layout

_L = "layers.{i}."


class OPTAdapter(Adapter):
    model_types = ("opt",)
    layouts = (linear_layout(_L, ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                  "self_attn.out_proj"), ("fc1", "fc2"),
                             ("model.decoder.", "decoder.", "")),)

    def dims(self, cfg: dict) -> Dims:
        return mha_dims(cfg, "opt")
