"""Copying heads (study ``circuits``): the sign of a head's full OV circuit's eigenvalues.

Elhage et al. 2021 (*A Mathematical Framework for Transformer Circuits*, "copying" of the OV
circuit): a head that copies the token it attends to raises that token's logit, so its full OV
circuit ``M = W_U W_OV W_Eᵀ`` (V × V: input token → output logits; ``W_E``, ``W_U`` the
``(V, d)`` token embedding and unembedding rows, ``W_OV = W_O,h W_V,h`` d × d, column
convention) has mostly positive eigenvalues. The **copying score** is
``Σ Re λ / Σ |λ|`` over M's eigenvalues: 1 for a pure copier (M positive definite-like),
−1 for a head that suppresses the attended token, ≈ trace / Σ|λ| for a head mapping each token
to another (a permutation's eigenvalues are roots of unity: score ≈ its fixed points' share).
Raw weights: no LayerNorm gain folded (folding ``ln_f``'s gain into W_U changed the trained
models' scores by ≤ 0.02), the BOS token (id 0) left out.

**Null**: W_O, W_V replaced by independent Gaussian factors at the head's shapes (the score is
scale-free), the model's own W_E and W_U kept; ``draws`` scores, p one-sided upper, add-one.
"""

from __future__ import annotations

import numpy as np


def copying_score(m: np.ndarray) -> float:
    """``Σ Re λ / Σ |λ|`` of the square matrix ``m`` (module docstring)."""
    lam = np.linalg.eigvals(np.asarray(m, np.float64))
    return float(lam.real.sum() / np.abs(lam).sum())


def _embeddings(folder):
    from safetensors.numpy import load_file

    w = load_file(f"{folder}/model.safetensors")
    we = w["transformer.wte.weight"][1:].astype(np.float64)
    wu = w.get("lm_head.weight", w["transformer.wte.weight"])[1:].astype(np.float64)
    return we, wu


def copying(folder, *, draws: int = 1000, seed: int = 0) -> dict:
    """``{"score": (layer, head), "p": (layer, head)}`` for a GPT-2 checkpoint folder saved
    by the study (module docstring)."""
    from ..models.ov import load_ov_heads

    we, wu = _embeddings(folder)
    layers = list(load_ov_heads(folder))
    score = np.array([[copying_score(wu @ (o.T @ v) @ we.T)
                       for o, v in zip(np.asarray(h.wq, np.float64), np.asarray(h.wk, np.float64),
                                       strict=True)] for h in layers])
    dh, d = np.shape(layers[0].wq)[1:]
    rng = np.random.default_rng([seed, 47])
    null = np.sort([copying_score(wu @ (rng.standard_normal((d, dh)) @ rng.standard_normal((dh, d)))
                                  @ we.T) for _ in range(int(draws))])
    ge = null.size - np.searchsorted(null, score, side="left")
    return {"score": score, "p": (1.0 + ge) / (1.0 + null.size), "null": null}


__all__ = ["copying", "copying_score"]
