"""ModernBERT adapter: the fused ``attn.Wqkv`` and the fused GLU ``mlp.Wi``.

Layout undone (Warner et al. 2024; ``ModernBertAttention``, ``ModernBertMLP``): ``Wqkv``
``(3d, d)`` holds ``[q | k | v]`` blocks, each head-major (``"blocks"``); ``Wo`` the output.
``Wi``'s activated first half is ``ffn_gate``, its second ``ffn_up``, ``mlp.Wo`` ``ffn_down``.
RoPE is not applied."""

from __future__ import annotations

from ._adapter import Adapter
from ._config import Dims, mha_dims
from ._layout import Chunk, Layout, Linear, fused_attention

_L = "layers.{i}."


class ModernBertAdapter(Adapter):
    model_types = ("modernbert",)
    layouts = (Layout({**fused_attention(_L + "attn.Wqkv", _L + "attn.Wo"),
                       "ffn_gate": Chunk(_L + "mlp.Wi", 0), "ffn_up": Chunk(_L + "mlp.Wi", 1),
                       "ffn_down": Linear(_L + "mlp.Wo")},
                      prefixes=("model.", "")),)

    def dims(self, cfg: dict) -> Dims:
        return mha_dims(cfg, "modernbert", rotary_fraction=1.0)
