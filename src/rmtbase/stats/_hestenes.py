"""Squared singular values of a batch of small square matrices by one-sided (Hestenes) Jacobi.

Beside :mod:`rmtbase.stats._jacobi` (same ordering, rotation and padding), the rows of C are
rotated until mutually orthogonal (Hestenes 1958; Demmel & Veselić 1992; LAPACK ``sgesvj``):
the rotation of G = C Cᵀ at (p, q) with a_pp = ‖r_p‖², a_qq = ‖r_q‖², a_pq = r_p·r_q, applied
to rows only, no Gram formed. Then λ_i = ‖r_i‖².

Accuracy as an SVD of C: relative n·eps·κ(C) = n·eps·√κ(G). Stops after a sweep in which
every pair's cosine was ≤ √m·eps (``sgesvj``'s tolerance), or ``max_sweeps``."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from ._jacobi import MAX_SWEEPS, _tangent, pad, padded_size, xor_gather


def hestenes_step(c, k, partner):
    """One parallel step on ``c`` ``(..., m, m)``: rows i and i ⊕ k rotated to orthogonality, all
    pairs at once; returns (rotated c, largest squared cosine before rotating, per matrix).
    ``partner`` as in :func:`rmtbase.stats._jacobi.jacobi_step`."""
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
    """λ = s(C)², descending, of ``c`` ``(..., n, n)`` by parallel one-sided Jacobi; loops until the
    whole batch converged. ``return_sweeps``: also the number of sweeps run."""
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
