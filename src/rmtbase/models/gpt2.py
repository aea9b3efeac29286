"""GPT-2 adapter: the fused Conv1D ``attn.c_attn``.

Layout undone (Radford et al. 2019; ``transformers`` ``GPT2Attention``): ``c_attn`` is a
Conv1D, i.e. an *input-major* linear map ``y = x W + b`` with ``W`` of shape ``(d, 3d)``.
Columns ``[0:d]`` give the query, ``[d:2d]`` the key, ``[2d:3d]`` the value; inside each block,
column ``h·d_h + r`` is feature r of head h. So head h's W_Q (rmtbase shape ``(d_h, d)``) is
``W[:, h·d_h:(h+1)·d_h]ᵀ``. ``c_proj`` and the MLP's ``c_fc``/``c_proj`` are Conv1D too
(transposed to the (out, in) layout by :func:`rmtbase.models.load_components`). Tensor names
``h.{i}.attn.c_attn.weight`` with or without the ``transformer.`` prefix. The model's logit
scale (1/√d_h, optionally also 1/(layer+1) with ``scale_attn_by_inverse_layer_idx``) is not
applied.
"""

from __future__ import annotations

from ._adapter import Adapter
from ._config import Dims, mha_dims
from ._layout import Layout, fused_attention, plain_ffn


class GPT2Adapter(Adapter):
    model_types = ("gpt2",)
    layouts = (Layout({**fused_attention("h.{i}.attn.c_attn", "h.{i}.attn.c_proj", conv1d=True),
                       **plain_ffn("h.{i}.mlp.c_fc", "h.{i}.mlp.c_proj", conv1d=True)},
                      prefixes=("transformer.", "")),)

    def dims(self, cfg: dict) -> Dims:
        return mha_dims(cfg, "gpt2", width=("n_embd", "hidden_size"),
                        heads=("n_head", "num_attention_heads"),
                        layers=("n_layer", "num_hidden_layers"))
