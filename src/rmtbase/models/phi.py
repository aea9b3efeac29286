"""Phi (Phi-1, Phi-1.5, Phi-2) adapter: separate projections with biases, partial rotary.

Layout undone (Gunasekar et al. 2023; Li et al. 2023; ``transformers`` ``PhiAttention``):
``self_attn.q_proj`` ``(n_heads·d_h, d)`` and ``k_proj`` ``(n_kv_heads·d_h, d)``, both with
biases, viewed as ``(…, heads, d_h)``; output ``self_attn.dense``; MLP ``mlp.fc1`` /
``mlp.fc2`` (attention and MLP in parallel off one LayerNorm). RoPE rotates only the first
``partial_rotary_factor · d_h`` dimensions of each head (0.4 for Phi-2, 0.5 by default): the
rest are position-free. Recorded in ``rotary_fraction``; RoPE is not applied, so W_QK is the
relative-position-0 form of all d_h dimensions.

The optional ``qk_layernorm`` (off in every released Phi checkpoint) is an ``nn.LayerNorm`` over
each head's d_h features with a gain *and a bias*: W_QK is then the bilinear form of the
projections before the norm, and ``fold_qk_norm=True`` is refused (a bias is not a
per-dimension scale; :mod:`rmtbase.models._qknorm`).
"""

from __future__ import annotations

from ._adapter import Adapter
from ._config import Dims, cfg_bool, gqa_dims
from ._layout import linear_layout
from ._qknorm import QKNorm

_A = "layers.{i}.self_attn."
_NORM = QKNorm(_A + "q_layernorm.weight", _A + "k_layernorm.weight", kind="layer",
               scope="head", bias=True)


class PhiAdapter(Adapter):
    model_types = ("phi",)
    layouts = (linear_layout("layers.{i}.", ("self_attn.q_proj", "self_attn.k_proj",
                                             "self_attn.v_proj", "self_attn.dense"),
                             ("mlp.fc1", "mlp.fc2"), ("model.", "")),)

    def dims(self, cfg: dict) -> Dims:
        return gqa_dims(cfg, rotary_default=0.5)

    def qk_norm(self, cfg: dict) -> QKNorm | None:
        return _NORM if cfg_bool(cfg, "qk_layernorm", False) else None
