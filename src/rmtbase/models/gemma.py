"""Gemma, Gemma-2 and Gemma-3 adapters: LLaMA names, head_dim from the config, MQA/GQA.

Layout undone (Gemma Team 2024, 2025): q_proj ``(n_heads·d_h, d)``, k_proj ``(n_kv_heads·d_h,
d)``. Not in W_QK: the ``query_pre_attn_scalar^-1/2`` scale, Gemma-2's logit soft-capping and
sliding windows. Gemma-3's ``q_norm`` / ``k_norm`` are per-head RMSNorms with gain ``1 + w``
(:mod:`rmtbase.models._qknorm`); of the multimodal ``gemma3`` only the language model is read."""

from __future__ import annotations

from ..errors import ModelError
from ._adapter import Adapter
from ._config import Dims, gqa_dims
from ._layout import Layout
from ._qknorm import QKNorm
from .llama import LLAMA_LAYOUT

_A = "layers.{i}.self_attn."
_NORM = QKNorm(_A + "q_norm.weight", _A + "k_norm.weight", kind="rms", scope="head", offset=1.0)
#: ``Gemma3TextConfig`` defaults of the sizes read here (transformers 5).
_GEMMA3_TEXT_DEFAULTS = {"model_type": "gemma3_text", "hidden_size": 2304,
                         "num_hidden_layers": 26, "num_attention_heads": 8,
                         "num_key_value_heads": 4, "head_dim": 256}


class GemmaAdapter(Adapter):
    model_types = ("gemma", "gemma2")
    layouts = (LLAMA_LAYOUT,)

    def dims(self, cfg: dict) -> Dims:
        return gqa_dims(cfg)


class Gemma3TextAdapter(GemmaAdapter):
    model_types = ("gemma3_text",)

    def qk_norm(self, cfg: dict) -> QKNorm:
        return _NORM


def text_config(cfg: dict) -> dict:
    """The language model's config of a multimodal Gemma-3 config, defaults filled in."""
    text = cfg.get("text_config")
    if text is None:
        text = {}
    if not isinstance(text, dict):
        raise ModelError(f"config value text_config={text!r} of a gemma3 model is not an object")
    return {**_GEMMA3_TEXT_DEFAULTS, **text}


class Gemma3Adapter(Gemma3TextAdapter):
    model_types = ("gemma3",)
    layouts = (Layout(LLAMA_LAYOUT.parts,
                      prefixes=("language_model.model.", "model.language_model.",
                                "language_model.")),)

    def dims(self, cfg: dict) -> Dims:
        return gqa_dims(text_config(cfg))
