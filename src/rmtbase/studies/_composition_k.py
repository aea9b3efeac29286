"""K-composition of every cross-layer head pair, from the factors (study ``circuits``' own
helper until :mod:`rmtbase.scoring.composition` exists; same definition).

Elhage et al. 2021 (*A Mathematical Framework for Transformer Circuits*): head h2 of a later
layer reads head h1's output through its keys when ``W_QK^{h2} W_OV^{h1}`` is large compared
with the two maps,

    K(h1 → h2) = ‖W_QK^{h2} W_OV^{h1}‖_F / (‖W_QK^{h2}‖_F ‖W_OV^{h1}‖_F),

with W_QK = W_Qᵀ W_K and W_OV = W_O,h W_V,h (d × d, column convention: ``docs/conventions.md``,
:mod:`rmtbase.models.ov`). Raw checkpoint weights: no LayerNorm gains folded, no biases, no
1/√d_h. Computed from the d_h × d_h Gram matrices, never a d × d product:
``‖Q₂ᵀ K₂ O₁ V₁‖² = tr(Mᵀ G_Q M G_V)`` with ``M = K₂ O₁``, ``G_Q = Q₂ Q₂ᵀ``, ``G_V = V₁ V₁ᵀ``;
``‖W_QK‖² = tr(G_Q G_K)``, ``‖W_OV‖² = tr(G_O G_V)`` with ``G_O = O₁ᵀ O₁``. float64.
"""

from __future__ import annotations

import numpy as np


def _layers(folder):
    from ..models import load_heads
    from ..models.ov import load_ov_heads

    qk = [(np.asarray(h.wq, np.float64), np.asarray(h.wk, np.float64)) for h in load_heads(folder)]
    ov = [(np.asarray(h.wq, np.float64).transpose(0, 2, 1), np.asarray(h.wk, np.float64))
          for h in load_ov_heads(folder)]  # (W_O,h (H, d, d_h), W_V,h (H, d_h, d))
    return qk, ov


def k_composition(folder) -> np.ndarray:
    """``(layer_from, head_from, layer_to, head_to)`` K-composition of every pair with
    ``layer_from < layer_to`` (module docstring); NaN elsewhere."""
    qk, ov = _layers(folder)
    n_l, n_h = len(qk), qk[0][0].shape[0]
    out = np.full((n_l, n_h, n_l, n_h), np.nan)
    for l2 in range(n_l):
        q2, k2 = qk[l2]
        gq = q2 @ q2.transpose(0, 2, 1)                          # (H2, dh, dh)
        nqk = np.einsum("aij,aji->a", gq, k2 @ k2.transpose(0, 2, 1))
        for l1 in range(l2):
            o1, v1 = ov[l1]
            gv = v1 @ v1.transpose(0, 2, 1)                      # (H1, dh, dh)
            nov = np.einsum("bij,bji->b", o1.transpose(0, 2, 1) @ o1, gv)
            m = np.einsum("aid,bdj->abij", k2, o1)               # (H2, H1, dh, dh)
            num = np.einsum("abji,ajk,abkl,bli->ab", m, gq, m, gv)
            out[l1, :, l2, :] = np.sqrt(np.maximum(num, 0.0) / np.outer(nqk, nov)).T
    return out


def k_composition_explicit(folder) -> np.ndarray:
    """The same from explicit d × d products (a check, for small models only)."""
    qk, ov = _layers(folder)
    n_l, n_h = len(qk), qk[0][0].shape[0]
    out = np.full((n_l, n_h, n_l, n_h), np.nan)
    for l2 in range(n_l):
        for l1 in range(l2):
            for a in range(n_h):
                wqk = qk[l2][0][a].T @ qk[l2][1][a]
                for b in range(n_h):
                    wov = ov[l1][0][b] @ ov[l1][1][b]
                    out[l1, b, l2, a] = (np.linalg.norm(wqk @ wov)
                                         / (np.linalg.norm(wqk) * np.linalg.norm(wov)))
    return out


__all__ = ["k_composition", "k_composition_explicit"]
