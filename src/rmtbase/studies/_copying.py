"""Copying heads (study ``circuits``): the sign of a head's full OV circuit's eigenvalues.

A head that copies the attended token raises its logit, so its full OV circuit ``M = W_U W_OV
W_Eᵀ`` (V × V) has mostly positive eigenvalues (Elhage et al. 2021). Copying score:
``Σ Re λ / Σ |λ|``, 1 for a pure copier, −1 for a suppressor; raw weights, BOS left out. Null:
W_O, W_V replaced by independent Gaussian factors, W_E and W_U kept; p one-sided upper, add-one."""

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
    """``{"score": (layer, head), "p": (layer, head)}`` for a study's GPT-2 checkpoint folder."""
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
