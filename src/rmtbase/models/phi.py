"""Phi (Phi-1, Phi-1.5, Phi-2) adapter: separate projections with biases, partial rotary.

Layout undone (Gunasekar et al. 2023; Li et al. 2023; ``PhiAttention``): ``q_proj``, ``k_proj``
with biases, viewed as ``(…, heads, d_h)``. Partial RoPE is recorded in ``rotary_fraction``,
not applied. The optional ``qk_layernorm`` has a bias, so ``fold_qk_norm=True`` is refused."""

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
