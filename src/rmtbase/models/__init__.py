"""Hugging Face models → per-head raw query/key factors (W_Q, W_K) and whole layer matrices.

:func:`load_heads` (:class:`LayerHeads`), :func:`load_components` (whole (out, in) matrices),
:func:`model_info` (from the config alone), :data:`SUPPORTED` (architectures with an adapter),
:func:`default_model_path` (the embedded MiniLM). ``.gguf`` files are read directly; one adapter
module per architecture. Importing this package does not import torch or transformers."""

from .components import COMPONENTS, load_components
from .loading import SUPPORTED, default_model_path, load_heads, model_info
from .types import LayerComponents, LayerHeads, ModelInfo

__all__ = ["COMPONENTS", "SUPPORTED", "LayerComponents", "LayerHeads", "ModelInfo",
           "default_model_path", "load_components", "load_heads", "model_info"]
