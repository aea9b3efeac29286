"""Squared singular values of a batch of small square matrices by one-sided (Hestenes) Jacobi.

A candidate accelerator route beside the two-sided Jacobi of
:mod:`rmtbase.stats._jacobi` (same ordering, same rotation formula, same padding): instead of
rotating the Gram G = C Cᵀ from both sides, rotate the *rows* of C itself until they are
mutually orthogonal (Hestenes 1958; Demmel & Veselić 1992; LAPACK ``sgesvj``). The rotation
that orthogonalises rows p, q is the two-sided rotation of G at (p, q) with a_pp = ‖r_p‖²,
a_qq = ‖r_q‖², a_pq = r_p·r_q (:func:`rmtbase.stats._jacobi._tangent`), applied to the rows
only: one partner permutation a step instead of two, and no Gram is ever formed. At the end
λ_i = ‖r_i‖² are the squared singular values of C, i.e. the eigenvalues of C Cᵀ.

Accuracy: like an SVD of C, not like an eigensolver of C Cᵀ: the relative error of each λ is
of order n·eps·κ(C) = n·eps·√κ(G) (Demmel & Veselić), against n·eps·κ(G) for the symmetric
routes; so this route is not limited to small κ (tests/test_jacobi.py measures it on
ill-conditioned cores against a float64 SVD).

Stopping: a sweep in which every pair's cosine |r_p·r_q| / (‖r_p‖‖r_q‖) was ≤ √m·eps before
its rotation (LAPACK ``sgesvj``'s tolerance) is the last, or ``max_sweeps``.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from ._jacobi import MAX_SWEEPS, _tangent, pad, padded_size, xor_gather


def hestenes_step(c, k, partner):
    """One parallel step on ``c`` ``(..., m, m)``: rows i and i ⊕ k rotated to orthogonality,
    every pair at once. Returns (rotated c, the largest squared cosine seen before rotating,
    per matrix). ``partner(x, axis)``: i ↦ i ⊕ k along ``axis`` (as in
    :func:`rmtbase.stats._jacobi.jacobi_step`). The dot product of a pair is the same sum of
    the same products for both of its rows, so both rows get the same rotation."""
    m = c.shape[-2]
    row = jax.lax.broadcasted_iota(jnp.int32, (m,), 0)
    first = row < (row ^ k)
    p = partner(c, c.ndim - 2)
    d = jnp.sum(c * c, axis=-1)
    gam = jnp.sum(c * p, axis=-1)
    dp = partner(d, d.ndim - 1)
    t = _tangent(jnp.where(first, d, dp), jnp.where(first, dp, d), gam)
    cs = jax.lax.rsqrt(t * t + 1)
    ss = jnp.where(first, -t * cs, t * cs)
    out = cs[..., :, None] * c + ss[..., :, None] * p
    norm2 = d * dp
    cos2 = jnp.where(norm2 > 0, gam * gam / jnp.where(norm2 > 0, norm2, 1), 0)
    return out, jnp.max(cos2, axis=-1)


def tolerance2(m, dtype):
    """(√m·eps)², the squared cosine under which a pair counts as orthogonal."""
    return m * float(jnp.finfo(dtype).eps) ** 2


def row_norms_descending(c, n):
    """λ_i = ‖r_i‖² of the first ``n`` rows (the others are the zero padding), descending."""
    lam = jnp.sum(c * c, axis=-1)[..., :n]
    return -jnp.sort(-lam, axis=-1)


def hestenes_eigvals(c, max_sweeps: int = MAX_SWEEPS, return_sweeps: bool = False):
    """λ = s(C)², descending, of ``c`` ``(..., n, n)`` (the eigenvalues of C Cᵀ), by parallel
    one-sided Jacobi (module docstring). The batch is one array: the loop stops when every
    matrix has converged. ``return_sweeps``: also the number of sweeps run."""
    c = jnp.asarray(c)
    n = c.shape[-1]
    m = padded_size(n)
    tol2 = tolerance2(m, c.dtype)
    work = pad(c.reshape((-1, n, n)), m)

    def sweep(carry):
        a, it, _ = carry

        def step(k, state):
            x, worst = state
            x, cos2 = hestenes_step(x, k, lambda y, axis: xor_gather(y, axis, k))
            return x, jnp.maximum(worst, cos2)

        a, worst = jax.lax.fori_loop(1, m, step, (a, jnp.zeros(a.shape[:-2], a.dtype)))
        return a, it + 1, worst

    def more(carry):
        _, it, worst = carry
        return (it < max_sweeps) & (jnp.max(worst) > tol2)

    start = jnp.full(work.shape[:-2], math.inf, work.dtype)
    work, sweeps, _ = jax.lax.while_loop(more, sweep, (work, jnp.int32(0), start))
    lam = row_norms_descending(work, n).reshape(c.shape[:-1])
    return (lam, sweeps) if return_sweeps else lam
