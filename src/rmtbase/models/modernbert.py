"""ModernBERT adapter: the fused ``attn.Wqkv`` and the fused GLU ``mlp.Wi``.

Layout undone (Warner et al. 2024, "Smarter, better, faster, longer"; ``transformers``
``ModernBertAttention``, ``ModernBertMLP``): ``Wqkv`` is an nn.Linear ``(3d, d)`` whose output
the forward pass views as ``(…, 3, n_heads, d_h)``: ``[q | k | v]`` blocks, each head-major
(order ``"blocks"``). ``Wo`` is the output projection. The MLP computes
``Wo(act(input) ⊙ gate)`` with ``input, gate = Wi(x).chunk(2)``: ModernBERT's *first* half is
the activated branch, so it is reported as ``ffn_gate`` (the LLaMA meaning: the branch that goes
through the activation) and the second half as ``ffn_up``; ``mlp.Wo`` is ``ffn_down``. RoPE on
all of d_h (not applied); local (sliding-window) layers only mask. Tensor names
``layers.{i}.attn.Wqkv.weight`` with or without the ``model.`` prefix.
"""

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
