"""How a head's query and key factors relate: alignment, symmetry and input focus.

W_Q, W_K ``(..., d_h, d)``, leading axes batch axes; what W_QK's spectrum cannot see. All three
are scale-free (σ power 0), effect a shift.

- :func:`alignment` = ⟨W_Q, W_K⟩_F / (‖W_Q‖_F ‖W_K‖_F) = tr(W_QK)/(‖W_Q‖_F ‖W_K‖_F) ∈ [−1, 1]:
  how much query and key read the same directions (normalised tr W_QK, Elhage et al. 2021).
  Null: (1 + a)/2 ~ Beta((n−1)/2, (n−1)/2), n = d·d_h (mean 0, variance 1/n).
- :func:`symmetry` = tr(W_QK²)/‖W_QK‖_F² ∈ [−1, 1]: +1 symmetric, −1 antisymmetric. With
  C = W_Q W_Kᵀ: tr(W_QK²) = tr(C²), ‖W_QK‖_F² = tr(G_Q G_K); null ≈ 1/d.
- :func:`input_focus` = Var(e)/mean(e)² of the column energies e_j = Σ_i W[i, j]² (ddof 0);
  null e_j/σ² ~ χ²_{d_h}, population value 2/d_h."""

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
    (:func:`_gram_inner`), equal to float32 rounding."""
    wq, wk = _upcast(wq, wk)
    c = mm(wq, jnp.swapaxes(wk, -1, -2))                       # C = W_Q W_Kᵀ
    tr_c2 = jnp.sum(c * jnp.swapaxes(c, -1, -2), axis=(-2, -1))  # tr(C C) = Σ_ij c_ij c_ji
    return tr_c2 / _gram_inner(wq, wk, blocks)


#: Rows of a Gram's blocks (:func:`_gram_inner`).
_BLOCK_ROWS = 64


def _gram_inner(wq, wk, blocks: bool = False):
    """‖W_QK‖_F² = tr(G_Q G_K) = Σ_ij (G_Q)_ij (G_K)_ij, G = W Wᵀ, of ``(..., d_h, d)`` factors.
    With ``blocks`` and d_h a multiple of :data:`_BLOCK_ROWS` (64), at least 256, only the upper
    blocks G_ij (i ≤ j) are formed: Σ_i ⟨Gq_ii, Gk_ii⟩ + 2 Σ_{i<j} ⟨Gq_ij, Gk_ij⟩."""
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
