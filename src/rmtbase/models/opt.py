"""OPT adapter: ``self_attn.q_proj`` / ``self_attn.k_proj`` of the decoder layers.

Layout undone (Zhang et al. 2022; ``transformers`` ``OPTAttention``): q_proj and k_proj are
nn.Linear ``(d, d)`` with biases (``enable_bias``); the forward pass views their outputs as
``(…, n_heads, d_h)``, so row ``h·d_h + r`` is feature r of head h. OPT multiplies the query
by 1/√d_h inside ``forward`` (after q_proj); rmtbase takes the raw q_proj weight, so that
factor is **not** in W_Q (as for every other architecture). d is ``hidden_size`` (the width
inside the decoder, not ``word_embed_proj_dim``). Output ``self_attn.out_proj``, MLP ``fc1`` /
``fc2``. Learned positions, no RoPE. Tensor names ``layers.{i}.self_attn.q_proj.weight``
under ``model.decoder.`` or ``decoder.``.
"""

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
