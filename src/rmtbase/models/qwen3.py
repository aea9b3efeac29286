"""Qwen3 and Qwen3-MoE adapters: LLaMA names, per-head QK-norm, MoE experts.

As LLaMA with GQA; ``head_dim`` from the config. ``q_norm`` / ``k_norm`` are per-head RMSNorms
with one gain ``(d_h,)`` shared by all heads; ``fold_qk_norm=True`` multiplies every head's rows
by it. Qwen3-MoE's layers in ``mlp_only_layers`` (or off ``decoder_sparse_step``) are dense."""

from __future__ import annotations

from ._adapter import Adapter
from ._config import Dims, cfg_int, gqa_dims
from ._layout import Layout
from ._moe import moe_parts
from ._qknorm import QKNorm
from .llama import LLAMA_ATTENTION, LLAMA_LAYOUT

_A = "layers.{i}.self_attn."
_NORM = QKNorm(_A + "q_norm.weight", _A + "k_norm.weight", kind="rms", scope="head")
_MOE = Layout({**LLAMA_ATTENTION,
               **moe_parts("layers.{i}.mlp.experts.{e}",
                           {"gate": "gate_proj", "up": "up_proj", "down": "down_proj"},
                           "layers.{i}.mlp.experts", ("layers.{i}.mlp.gate",),
                           dense="layers.{i}.mlp")},
              prefixes=("model.", ""))


class Qwen3Adapter(Adapter):
    model_types = ("qwen3",)
    layouts = (LLAMA_LAYOUT,)

    def dims(self, cfg: dict) -> Dims:
        return gqa_dims(cfg)

    def qk_norm(self, cfg: dict) -> QKNorm:
        return _NORM


class Qwen3MoeAdapter(Qwen3Adapter):
    model_types = ("qwen3_moe",)
    layouts = (_MOE,)

    def n_experts(self, cfg: dict) -> int:
        return cfg_int(cfg, "num_experts", "num_local_experts")
