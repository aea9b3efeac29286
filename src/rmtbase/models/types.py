"""Plain records passed from :mod:`rmtbase.models` to scoring: per-layer heads and model facts.

Conventions (``docs/conventions.md``): W_Q and W_K of one head have shape ``(d_h, d)``, so the
attention logit of head h between residual-stream vectors x_i, x_j (biases set aside) is
``x_iᵀ W_Qᵀ W_K x_j`` times the model's own scale (usually 1/√d_h). Weights are the raw
checkpoint tensors: no LayerNorm folding, no centring, no 1/√d_h factor, RoPE not applied
(W_QK is the relative-position-0 bilinear form).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LayerHeads:
    """The query/key factors of every head in one attention layer.

    Attributes
    ----------
    layer : int
        0-based layer index.
    wq, wk : np.ndarray
        float32 arrays of shape ``(n_heads, d_h, d)``. With grouped-query attention the key
        factors are already expanded to query heads: query head i uses key head
        ⌊i / (n_heads / n_kv_heads)⌋ (``repeat_interleave``), so ``wk[i]`` is the key factor
        that query head i actually meets.
    bq, bk : np.ndarray or None
        float32 biases of shape ``(n_heads, d_h)`` (``bk`` expanded like ``wk``), or ``None``
        when the architecture has no query/key bias.
    storage : str
        How the checkpoint stores this layer's query/key tensors: ``"float32"``, ``"float16"``
        or ``"bfloat16"`` (the coarsest of the tensors read for the layer; float64 counts as
        float32). ``wq``/``wk`` hold exactly the stored values, converted to float32 — except
        with ``load_heads(..., fold_qk_norm=True)`` on a QK-norm architecture, where they (and
        the biases) are the folded factors G·P·W (:mod:`rmtbase.models._qknorm`): each row
        is then a stored row times a gain, and ``storage`` still names how W is stored.
    quantisation : str or None
        The block quantisation the tensors were stored in and dequantised from, as the file
        says (GGUF: ``"q4_1"``, ``"q4_k"`` …; several types joined by ``"+"``); ``storage`` is
        then ``"float32"``. None for float checkpoints (a dequantised Hugging Face folder says
        nothing; scoring detects the lattice, :func:`rmtbase.stats.precision.
        detect_quantisation`).
    """

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

    Attributes
    ----------
    name : str
        Hub id, folder path, or ``config._name_or_path`` of a loaded object.
    revision : str or None
        Hub revision (branch, tag, commit) as requested; ``None`` for the default branch and
        for local folders and loaded objects.
    architecture : str
        The Hugging Face ``model_type`` (one of :data:`rmtbase.models.SUPPORTED`);
        ``"transformer_lens"`` for a TransformerLens model (:mod:`rmtbase.models.
        transformer_lens`), whose ``model_class`` then names its class, the Hugging Face class
        it wraps and whether its weights were processed.
    d : int
        Residual width (input dimension of W_Q, W_K).
    d_h : int
        Head dimension (rows of one head's W_Q); for LLaMA-family models from ``head_dim``,
        which may differ from d / n_heads.
    n_layers, n_heads, n_kv_heads : int
        Layer count, query heads per layer, key/value heads per layer (``n_kv_heads < n_heads``
        under grouped-query attention, else equal).
    model_class : str
        ``config.architectures[0]`` (or the loaded object's class name), informational.
    rotary_fraction : float
        Fraction of each head's d_h dimensions that RoPE rotates (0 for learned/absolute
        positions). RoPE is *not* part of the extracted W_QK.
    source : str
        ``"hub"``, ``"folder"``, ``"object"``, ``"gguf"`` (a GGUF file, :mod:`rmtbase.models.gguf`),
        ``"url"`` (a model folder at a URL, :mod:`rmtbase.models.remote`) or
        ``"transformer_lens"`` (a TransformerLens model object).
    qk_norm : str
        The normalisation between the q/k projections and the logit (:mod:`rmtbase.models.
        _qknorm`): ``"none"``; ``"rms_head"`` (RMSNorm over each head's d_h: Qwen3,
        Gemma-3); ``"rms_all_heads"`` (RMSNorm over all heads' projection at once: OLMo-2/3);
        ``"layer_head"`` (LayerNorm per head: Cohere ``use_qk_norm``, StableLM / Phi
        ``qk_layernorm``). When not ``"none"``, the raw W_QK is the bilinear form of the
        projections *before* the norm, not of the logit.
    """

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

    Attributes
    ----------
    layer : int
        0-based layer index.
    matrices : dict[str, np.ndarray]
        float32 matrices in the ``nn.Linear`` (out, in) layout (``y = W x``): ``"q"``
        ``(n_heads·d_h, d)``, ``"k"``, ``"v"`` ``(n_kv_heads·d_h, d)`` (not GQA-expanded),
        ``"o"`` ``(d, n_heads·d_h)``; the FFN as ``"ffn_gate"``, ``"ffn_up"``, ``"ffn_down"``
        (gated MLPs; ``ffn_gate`` is the activated branch) or ``"ffn_in"``, ``"ffn_out"``;
        MoE layers as ``"ffn_gate.e{j}"`` … per expert j and ``"router"`` ``(n_experts, d)``.
        Conv1D layouts are transposed and fused projections split; values are the stored ones.
    storage : dict[str, str]
        Storage precision of each matrix's checkpoint tensor (``"float32"``, ``"float16"``,
        ``"bfloat16"``), as :attr:`LayerHeads.storage`.
    """

    layer: int
    matrices: dict
    storage: dict
