"""How a head's query and key factors relate: alignment, symmetry and input focus.

Three per-head statistics that the spectrum of W_QK cannot see (it is invariant under
W_Q → U W_Q, W_K → V W_K with U, V orthogonal d_h × d_h, which changes all three), each from
d_h × d_h or d_h × d work, never a d × d matrix. Shapes follow the project's convention
(``docs/conventions.md``): W_Q, W_K are ``(..., d_h, d)`` raw weights, W_QK = W_Qᵀ W_K is
``(d, d)``; leading axes are batch axes (heads, draws).

- :func:`alignment` = ⟨W_Q, W_K⟩_F / (‖W_Q‖_F ‖W_K‖_F) = tr(W_QK) / (‖W_Q‖_F ‖W_K‖_F) ∈ [−1, 1]:
  the cosine between the two factors, i.e. how much the head's query and key read the same
  residual directions — a head whose W_K = a·W_Q + … attends from a token to tokens like
  itself (the self/diagonal affinity tr W_QK of Elhage et al. 2021, normalised). Under the
  Gaussian null it is the cosine of two independent isotropic vectors in n = d·d_h dimensions:
  mean 0, variance 1/n (exactly: (1 + a)/2 ~ Beta((n−1)/2, (n−1)/2)).
- :func:`symmetry` = tr(W_QK²) / ‖W_QK‖_F² ∈ [−1, 1]: +1 for a symmetric W_QK (a ↔ b
  attention alike both ways), −1 for an antisymmetric one (directional: if a attends to b, b
  does not attend to a), ~0 for unrelated factors. With C = W_Q W_Kᵀ, G_Q = W_Q W_Qᵀ,
  G_K = W_K W_Kᵀ (all d_h × d_h): tr(W_QK²) = tr(C²) and ‖W_QK‖_F² = tr(G_Q G_K) = Σλ.
  Under the Gaussian null E tr(C²) = d_h d σ_Q²σ_K² and E Σλ = d_h d² σ_Q²σ_K², so the statistic
  is ~1/d (a ratio of expectations; the null tables give its exact finite-size law).
- :func:`input_focus` = Var(e)/mean(e)² of the column energies e_j = Σ_i W[i, j]² (j over the
  d residual dimensions; ddof 0): how unevenly the factor reads the residual stream. Under the
  Gaussian null e_j/σ² ~ χ²_{d_h}, so the population value is 2/d_h (the estimator over d
  columns has mean 2/d_h · (1 − 1/d) · (1 + O(1/d))).

All three are scale-free (σ power 0) and location-like: their effect is a shift.
"""

from __future__ import annotations

import jax.numpy as jnp

from .._matmul import mm

__all__ = ["alignment", "column_energies", "energy_cv2", "input_focus", "symmetry"]


def _upcast(*ws):
    """The factors as arrays of at least float32 (bfloat16/float16 storage is read exactly)."""
    out = [jnp.asarray(w) for w in ws]
    return [w.astype(jnp.promote_types(w.dtype, jnp.float32)) for w in out]


def _frobenius_sq(w):
    return jnp.sum(w * w, axis=(-2, -1))


def alignment(wq, wk):
    """⟨W_Q, W_K⟩_F / (‖W_Q‖_F ‖W_K‖_F) of ``(..., d_h, d)`` factors (module docstring); NaN
    where a factor is 0."""
    wq, wk = _upcast(wq, wk)
    inner = jnp.sum(wq * wk, axis=(-2, -1))
    return inner / jnp.sqrt(_frobenius_sq(wq) * _frobenius_sq(wk))


def symmetry(wq, wk, blocks: bool = False):
    """tr(W_QK²)/‖W_QK‖_F² of ``(..., d_h, d)`` factors from d_h × d_h products (module
    docstring); NaN where W_QK = 0. ``blocks``: ‖W_QK‖_F² from the two Grams' upper blocks
    (:func:`_gram_inner`), the same statistic to float32 rounding for less work at d_h ≥ 256;
    the profile null's compiled loop asks for it
    (:func:`rmtbase.scoring.factor_axes._stored_null`)."""
    wq, wk = _upcast(wq, wk)
    c = mm(wq, jnp.swapaxes(wk, -1, -2))                       # C = W_Q W_Kᵀ
    tr_c2 = jnp.sum(c * jnp.swapaxes(c, -1, -2), axis=(-2, -1))  # tr(C C) = Σ_ij c_ij c_ji
    return tr_c2 / _gram_inner(wq, wk, blocks)


#: Rows of a Gram's blocks (:func:`_gram_inner`).
_BLOCK_ROWS = 64


def _gram_inner(wq, wk, blocks: bool = False):
    """‖W_QK‖_F² = tr(G_Q G_K) = Σ_ij (G_Q)_ij (G_K)_ij, G = W Wᵀ, of ``(..., d_h, d)`` factors
    (float32 or wider). Without ``blocks`` (or below 4 blocks, d_h not a multiple of 64): the
    two whole Grams. With ``blocks``, d_h a multiple of :data:`_BLOCK_ROWS` (64) of at least
    256: the Grams are symmetric, so only their upper blocks G_ij = W_i W_jᵀ (i ≤ j, rows of 64)
    are computed and the lower ones never exist: Σ_i ⟨Gq_ii, Gk_ii⟩ + 2 Σ_{i<j} ⟨Gq_ij, Gk_ij⟩,
    b(b + 1)/2 of the b² block products a Gram (at d_h = 256 10 of 16, 37.5 % fewer
    multiply-adds) and no assembled matrix. The same value to float32 rounding (summed in
    another order: ``tests/test_profile_null_bits.py`` compares it with the whole products and
    with float64). Profile cache format 6 sums the blocks; format 5 assembled the whole Grams."""
    d_h, s = wq.shape[-2], _BLOCK_ROWS
    t = lambda x: jnp.swapaxes(x, -1, -2)  # noqa: E731
    if not blocks or d_h % s or d_h < 4 * s:
        return jnp.sum(mm(wq, t(wq)) * mm(wk, t(wk)), axis=(-2, -1))
    n = d_h // s
    rq = [wq[..., i * s:(i + 1) * s, :] for i in range(n)]
    rk = [wk[..., i * s:(i + 1) * s, :] for i in range(n)]

    def inner(i, j):
        return jnp.sum(mm(rq[i], t(rq[j])) * mm(rk[i], t(rk[j])), axis=(-2, -1))

    diagonal = sum(inner(i, i) for i in range(n))
    off = sum(inner(i, j) for i in range(n) for j in range(i + 1, n))
    return diagonal + 2 * off


def input_focus(w):
    """Squared coefficient of variation of the column energies of ``(..., d_h, d)`` ``w``
    (module docstring); NaN where ``w`` is 0."""
    return energy_cv2(column_energies(w))


def column_energies(w):
    """e_j = Σ_i W[i, j]² of ``(..., d_h, d)`` ``w``: ``(..., d)``, at least float32."""
    (w,) = _upcast(w)
    return jnp.sum(w * w, axis=-2)


def energy_cv2(e):
    """Var(e)/mean(e)² over the last axis (ddof 0): :func:`input_focus` of column energies
    ``e`` (the profile's Gaussian null draws them from their law, σ²χ²_{d_h} each)."""
    m = jnp.mean(e, axis=-1)
    return jnp.var(e, axis=-1) / (m * m)
