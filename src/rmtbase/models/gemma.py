"""Gemma, Gemma-2 and Gemma-3 adapters: LLaMA names, head_dim from the config, MQA/GQA.

Layout undone (Gemma Team 2024 (Gemma, Gemma 2), 2025 (Gemma 3); ``transformers``
``GemmaAttention``, ``Gemma2Attention``, ``Gemma3Attention``): q_proj ``(n_heads·d_h, d)``,
k_proj ``(n_kv_heads·d_h, d)`` viewed as ``(…, heads, d_h)``; ``head_dim`` comes from the
config and is not d / n_heads in general (Gemma-7B: d = 3072, 16 heads of 256). Gemma-2B is
multi-query (one key head), later sizes use GQA. Output ``o_proj``, gated MLP.

What is not part of W_QK: the logit scale is ``query_pre_attn_scalar^-1/2`` (Gemma-2/3) rather
than d_h^-1/2; Gemma-2 caps logits with ``attn_logit_softcapping · tanh(s / cap)`` (a monotone
map of the bilinear form); sliding-window layers only mask. Gemma-3 adds ``q_norm`` /
``k_norm``: RMSNorms over each head's d_h features with gain ``1 + w`` (``Gemma3RMSNorm``,
weights stored as w, zero-initialised), shared by all heads; ``fold_qk_norm=True`` multiplies
every head's rows by 1 + w (see :mod:`rmtbase.models._qknorm`).

``gemma3_text`` is the text-only model (Gemma-3 1B); ``gemma3`` (4B and larger) is multimodal:
only its language model is read (tensors under ``language_model.model.`` on the hub,
``model.language_model.`` in a model loaded by transformers ≥ 5), with sizes from
``text_config``, whose absent keys take ``Gemma3TextConfig``'s defaults (``save_pretrained``
omits sub-config values equal to them). The SigLIP vision tower is not scored.
"""

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
