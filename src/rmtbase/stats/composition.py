"""Head–head composition scores from the factors, and their exact null moments.

Conventions (``docs/conventions.md``, ``docs/ov.md``; column convention): W_QK^h = W_Q,hᵀ W_K,h and
W_OV^h = W_O,h W_V,h, both ``(d, d)`` of rank ≤ d_h; W_O,h is stored as ``wo_t`` = W_O,hᵀ
``(d_h, d)`` (:func:`rmtbase.models.ov.ov_factors`). For an earlier head h1 and a later h2
(Elhage et al. 2021):

    K-composition  ‖W_QK^{h2} W_OV^{h1}‖_F   / (‖W_QK^{h2}‖_F ‖W_OV^{h1}‖_F)
    Q-composition  ‖W_OV^{h1ᵀ} W_QK^{h2}‖_F / (‖W_QK^{h2}‖_F ‖W_OV^{h1}‖_F)
    V-composition  ‖W_OV^{h2} W_OV^{h1}‖_F   / (‖W_OV^{h2}‖_F ‖W_OV^{h1}‖_F)

(TransformerLens' ``all_composition_scores`` in its row convention.) Computed from the factors,
never a d × d product: with G_V,h1 = S Sᵀ (S = Rᵀ of the thin QR of W_V,h1ᵀ) and the column side
C_h1 = W_O,h1 S ``(d, d_h)``, ‖W_QK^{h2} W_OV^{h1}‖_F² = tr(G_Q M Mᵀ) with M = W_K C (likewise
G_K with W_Q C for Q, G_O,h2 with W_V,h2 C for V), so a layer pair is one GEMM
[W_Q; W_K; W_V] @ [C_h1 …] followed by d_h × d_h work per head pair. Norms: ‖W_QK‖_F² =
tr(G_Q G_K), ‖W_OV‖_F² = tr(G_O G_V). Under GQA query head i meets key/value head
⌊i / (H / H_kv)⌋. The QK overlap within a layer is the Frobenius cosine of two W_QK, with
⟨W_QK^a, W_QK^b⟩_F = Σ (W_Q,a W_Q,bᵀ) ∘ (W_K,a W_K,bᵀ).

Norm gains: none by default (raw weights); ``gain`` (one ``(d,)`` vector per layer) multiplies
each reading factor's input, W_{Q,K,V},h ← W_{Q,K,V},h diag(g). Scores are invariant to the scale
of each factor.

Null: independent Gaussian factors at each head's shapes; its exact moments (E s² = 1/d, E s⁴
by the orthogonal Weingarten function, the QK overlap's E c² = 1/d²) are derived in
:mod:`rmtbase.analytic.composition_moments`.
"""

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
    """Squared composition numerators of every (h2, h1) of one kind in one layer pair.

    ``rows`` ``(R, d_h2, d)``: the later layer's factors of this kind's read side (W_Q for q,
    W_K for k, W_V for v; distinct heads only, R = H2 for q, H_kv for k/v); ``g_row``
    ``(H2, d_h2, d_h2)``: the Gram the kind pairs them with per query head (G_K for q expanded,
    G_Q for k, G_O for v); ``group`` = H2 / R; ``cols2d`` ``(d, H1 d_h1)`` =
    :func:`col_matrix` of :func:`col_side`. Returns ``(H2, H1)``: tr(G_row[h2] M Mᵀ),
    M = rows[h2 // group] @ C_h1.
    """
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
    """Frobenius cosine ⟨W_QK^a, W_QK^b⟩ / (‖W_QK^a‖‖W_QK^b‖) ``(H, H)`` of one layer's heads
    from Σ (W_Q,a W_Q,bᵀ) ∘ (W_K,a W_K,bᵀ); ``wq``, ``wk`` ``(H, d_h, d)`` (keys expanded).
    numpy float32 Grams (OpenBLAS' symmetric rank-k product: ~4× XLA's CPU GEMM here),
    summed in float64."""
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
    E tr G² = d d_h (d + d_h + 1).
    """
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
    """(E s², Var s²) of a squared composition score under the Gaussian-factor null: the mean
    exact (1/d), the variance exact for d_h1, d_h2 ≤ 2 and through the ratio-of-moments E[r]
    above (relative error ≈ 14/d² in Var s², measured; :mod:`rmtbase.analytic.composition_moments`)."""
    m, v, _ = score_moments(int(d), int(d_h1), int(d_h2))
    return m, v


__all__ = ["KINDS", "col_matrix", "col_side", "grams", "haar_fourth", "layer_norms", "mean_ipr",
           "null_moments", "pair_squares",
           "product_trace_moments", "qk_overlap"]
