"""Plain records passed from :mod:`rmtbase.models` to scoring: per-layer heads and model facts.

Conventions (``docs/conventions.md``): a head's W_Q, W_K are ``(d_h, d)``, its logit (biases
aside) ``x_iᵀ W_Qᵀ W_K x_j`` times the model's scale. Raw checkpoint tensors: no LayerNorm
folding, centring or 1/√d_h; RoPE not applied (W_QK is the relative-position-0 form)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LayerHeads:
    """The query/key factors of every head in one attention layer.

    ``layer``: 0-based index. ``wq``, ``wk``: ``(n_heads, d_h, d)``; under GQA ``wk[i]`` is the
    key factor query head i meets. ``bq``, ``bk``: biases ``(n_heads, d_h)`` (``bk`` expanded
    like ``wk``) or None. ``storage``: the coarsest storage of the tensors read (float32 arrays
    hold the stored values). ``quantisation``: the block quantisation dequantised from
    (``"q4_k"`` …, joined by ``"+"``), or None."""

    layer: int
    wq: np.ndarray
    wk: np.ndarray
    bq: np.ndarray | None = None
    bk: np.ndarray | None = None
    storage: str = "float32"
    quantisation: str | None = None

    @property
    def n_heads(self) -> int:
        return int(self.wq.shape[0])


@dataclass(frozen=True)
class ModelInfo:
    """What a model's config says about its attention, read without touching the weights.

    ``name``: hub id / folder / ``config._name_or_path``; ``revision``: hub revision (None:
    default or non-hub). ``architecture``: the ``model_type`` (:data:`rmtbase.models.SUPPORTED`)
    or ``"transformer_lens"``. ``d``, ``d_h``, ``n_layers``, ``n_heads``, ``n_kv_heads``: residual
    width, head dimension, layers, query heads and key/value heads per layer. ``model_class``:
    ``config.architectures[0]`` or the loaded object's class. ``rotary_fraction``: the fraction of
    d_h RoPE rotates (0 without RoPE). ``source``: ``"hub"``, ``"folder"``, ``"object"``,
    ``"gguf"``, ``"url"`` or ``"transformer_lens"``. ``qk_norm``: ``"none"``, ``"rms_head"``,
    ``"rms_all_heads"`` or ``"layer_head"`` (:mod:`._qknorm`)."""

    name: str
    revision: str | None
    architecture: str
    d: int
    d_h: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    model_class: str = ""
    rotary_fraction: float = 0.0
    source: str = "folder"
    qk_norm: str = "none"

    @property
    def group_size(self) -> int:
        """Query heads per key head (1 without grouped-query attention)."""
        return self.n_heads // self.n_kv_heads


@dataclass(frozen=True)
class LayerComponents:
    """Whole weight matrices of one layer (:func:`rmtbase.models.load_components`).

    ``layer``: 0-based index. ``matrices``: {name: float32 array} in the ``nn.Linear`` (out, in)
    layout, stored values; ``"k"``, ``"v"`` not GQA-expanded (:mod:`rmtbase.models.components`).
    ``storage``: {name: storage precision}, as :attr:`LayerHeads.storage`."""

    layer: int
    matrices: dict
    storage: dict
