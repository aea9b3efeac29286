"""Head–head composition scores from the factors, and their exact null moments.

Conventions: W_QK^h = W_Q,hᵀ W_K,h, W_OV^h = W_O,h W_V,h, both ``(d, d)``; W_O,h stored as
``wo_t`` = W_O,hᵀ ``(d_h, d)``. For an earlier head h1 and a later h2 (Elhage et al. 2021;
TransformerLens' ``all_composition_scores``):

    K-composition  ‖W_QK^{h2} W_OV^{h1}‖_F   / (‖W_QK^{h2}‖_F ‖W_OV^{h1}‖_F)
    Q-composition  ‖W_OV^{h1ᵀ} W_QK^{h2}‖_F / (‖W_QK^{h2}‖_F ‖W_OV^{h1}‖_F)
    V-composition  ‖W_OV^{h2} W_OV^{h1}‖_F   / (‖W_OV^{h2}‖_F ‖W_OV^{h1}‖_F)

Never a d × d product: with C_h1 = W_O,h1 S (S = Rᵀ of the thin QR of W_V,h1ᵀ),
‖W_QK^{h2} W_OV^{h1}‖_F² = tr(G_Q M Mᵀ), M = W_K C (G_K, W_Q for Q; G_O, W_V for V); norms
‖W_QK‖_F² = tr(G_Q G_K), ‖W_OV‖_F² = tr(G_O G_V). GQA: query head i meets kv head
⌊i / (H / H_kv)⌋. QK overlap: ⟨W_QK^a, W_QK^b⟩_F = Σ (W_Q,a W_Q,bᵀ) ∘ (W_K,a W_K,bᵀ), as a cosine.
``gain`` (``(d,)`` per layer) scales each reading factor's input; scores are scale-invariant."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .._matmul import mm
from ..analytic.composition_moments import haar_fourth, ipr_mean, score_moments

KINDS = ("q", "k", "v")


def col_side(wo_t, wv):
    """C_h = W_O,h S_V,h ``(..., d, d_h)`` with S_V Sᵀ_V = W_V W_Vᵀ (S = Rᵀ of QR(W_Vᵀ)).
    ``wo_t`` = W_O,hᵀ and ``wv`` ``(..., d_h, d)``, ``wv`` already expanded to query heads."""
    r = jnp.linalg.qr(jnp.swapaxes(wv, -1, -2), mode="r")  # (..., d_h, d_h)
    return jnp.swapaxes(wo_t, -1, -2) @ jnp.swapaxes(r, -1, -2)


def grams(w):
    """W Wᵀ ``(..., d_h, d_h)`` of factors ``(..., d_h, d)``."""
    return w @ jnp.swapaxes(w, -1, -2)


def col_matrix(cols):
    """The column sides of one layer side by side, ``(d, H d_h)`` (head-major columns), formed
    once per layer so every layer pair's GEMM takes a contiguous operand."""
    h, d, dh = cols.shape
    return jnp.swapaxes(cols, 0, 1).reshape(d, h * dh)


def pair_squares(rows, g_row, group: int, cols2d, dh1: int):
    """Squared composition numerators of every (h2, h1) of one kind in one layer pair; ``(H2, H1)``.

    ``rows`` ``(R, d_h2, d)``: the later layer's read-side factors (W_Q, W_K or W_V; R = H2 or
    H_kv); ``g_row`` ``(H2, d_h2, d_h2)``: the Gram paired with them (G_K, G_Q or G_O); ``group``
    = H2 / R; ``cols2d`` ``(d, H1 d_h1)`` from :func:`col_matrix`. Entry tr(G_row[h2] M Mᵀ),
    M = rows[h2 // group] @ C_h1."""
    r, dh2, d = rows.shape
    h1 = cols2d.shape[1] // dh1
    big = mm(rows.reshape(r * dh2, d), cols2d)
    m = big.reshape(r, dh2, h1, dh1).transpose(0, 2, 1, 3)  # (R, H1, dh2, dh1)
    p = mm(m, jnp.swapaxes(m, -1, -2))  # (R, H1, dh2, dh2)
    g = g_row.reshape(r, group, dh2, dh2)
    return jnp.einsum("rgij,rhij->rgh", g, p).reshape(r * group, h1)


def layer_norms(wq, wk, wo_t, wv):
    """(‖W_QK‖_F², ‖W_OV‖_F²) per head ``(H,)``, factors expanded to query heads."""
    qk = jnp.sum(grams(wq) * grams(wk), axis=(-1, -2))
    ov = jnp.sum(grams(wo_t) * grams(wv), axis=(-1, -2))
    return qk, ov


def qk_overlap(wq, wk):
    """Frobenius cosine of W_QK^a, W_QK^b ``(H, H)`` for one layer's ``wq``, ``wk`` ``(H, d_h, d)``
    (keys expanded), from Σ (W_Q,a W_Q,bᵀ) ∘ (W_K,a W_K,bᵀ); float32 Grams summed in float64."""
    wq, wk = np.asarray(wq, np.float32), np.asarray(wk, np.float32)
    h, dh, d = wq.shape
    a, b = wq.reshape(h * dh, d), wk.reshape(h * dh, d)
    gq = (a @ a.T).reshape(h, dh, h, dh)
    gk = (b @ b.T).reshape(h, dh, h, dh)
    inner = np.einsum("aibj,aibj->ab", gq, gk, dtype=np.float64)
    n = np.sqrt(np.diagonal(inner))
    return inner / (n[:, None] * n[None, :])


# ---- the null's exact moments (float64 numpy) ----

def product_trace_moments(d: int, d_h: int) -> tuple[float, float, float]:
    """Exact (E Σλ, E (Σλ)², E Σλ²) of W = Aᵀ B, A, B ``(d_h, d)`` i.i.d. N(0, 1).

    Σλ = tr(G_A G_B), G Wishart W_{d_h}(I, d). Given G_A, Σλ = Σ_j b_jᵀ G_A b_j over d
    columns: E(Σλ)² = E[d² (tr G_A)² + 2 d tr G_A²]; E[G A G] = d(d+1) A + d tr(A) I gives
    E Σλ² = E[d(d+1) tr G_A² + d (tr G_A)²]; with E(tr G)² = d d_h (d d_h + 2) and
    E tr G² = d d_h (d + d_h + 1)."""
    d, n = float(d), float(d_h)
    e_tr2 = d * n * (d * n + 2.0)
    e_trsq = d * n * (d + n + 1.0)
    m1 = d * d * n
    m2 = d * d * e_tr2 + 2.0 * d * e_trsq
    s2 = d * (d + 1.0) * e_trsq + d * e_tr2
    return m1, m2, s2


def mean_ipr(d: int, d_h: int) -> float:
    """E[Σλ²/(Σλ)²] of one head's product (:func:`rmtbase.analytic.composition_moments.ipr_mean`:
    exact for d_h ≤ 2, the ratio of exact moments E Σλ² / E (Σλ)² for d_h ≥ 3)."""
    return ipr_mean(int(d), int(d_h))


def null_moments(d: int, d_h1: int, d_h2: int) -> tuple[float, float]:
    """(E s², Var s²) of a squared composition score under the Gaussian-factor null: E s² = 1/d,
    Var s² exact for d_h ≤ 2, else to ≈ 14/d² (:mod:`rmtbase.analytic.composition_moments`)."""
    m, v, _ = score_moments(int(d), int(d_h1), int(d_h2))
    return m, v


__all__ = ["KINDS", "col_matrix", "col_side", "grams", "haar_fourth", "layer_norms", "mean_ipr",
           "null_moments", "pair_squares",
           "product_trace_moments", "qk_overlap"]
