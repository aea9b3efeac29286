"""Mixtral adapter: Mistral attention, a sparse mixture of gated experts.

Layout undone (Jiang et al. 2024; ``MixtralAttention``, ``MixtralSparseMoeBlock``): attention as
LLaMA (GQA, RoPE not applied). Experts ``w2(act(w1 x) ⊙ w3 x)`` are reported as
``ffn_gate.e{j}`` … (:mod:`rmtbase.models._moe`)."""

from __future__ import annotations

from ._adapter import Adapter
from ._config import Dims, cfg_int, gqa_dims
from ._layout import Layout
from ._moe import moe_parts
from .llama import LLAMA_ATTENTION

_W = {"gate": "w1", "up": "w3", "down": "w2"}


class MixtralAdapter(Adapter):
    model_types = ("mixtral",)
    layouts = (Layout({**LLAMA_ATTENTION,
                       **moe_parts("layers.{i}.block_sparse_moe.experts.{e}", _W,
                                   "layers.{i}.mlp.experts",
                                   ("layers.{i}.block_sparse_moe.gate", "layers.{i}.mlp.gate"))},
                      prefixes=("model.", "")),)

    def dims(self, cfg: dict) -> Dims:
        return gqa_dims(cfg)

    def n_experts(self, cfg: dict) -> int:
        return cfg_int(cfg, "num_local_experts")
