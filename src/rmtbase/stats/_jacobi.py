"""Eigenvalues of a batch of small symmetric matrices by the parallel cyclic Jacobi method.

For the null's d_h × d_h cores (d_h ≤ 128); the Pallas kernel shares :func:`jacobi_step`.

Two-sided Jacobi (Golub & Van Loan, 4th ed., §8.5) with Rutishauser's rotation
t = sgn θ / (|θ| + √(θ² + 1)), θ = (a_qq − a_pp)/(2 a_pq), in the XOR ordering: padded with zeros
to m = 2^⌈log₂ n⌉, step k pairs i with i ⊕ k; a step's pairs are disjoint and the m − 1 steps
of a sweep meet every pair once. Padding adds exact zeros that never rotate; they are dropped.

Sweeps stop when ‖offdiag‖_F ≤ eps·‖G‖_F for every matrix (or ``max_sweeps``); each λ is then
within √n·eps·λ_max (Weyl) plus O(sweeps·n·eps·λ_max). Output descending ``(..., n)``."""

from __future__ import annotations

import jax
import jax.numpy as jnp

MAX_SWEEPS = 30  # float32 at n ≤ 128 converges in 6-10 sweeps (tests/test_jacobi.py)


def padded_size(n: int) -> int:
    """m = the smallest power of two ≥ max(n, 2): the XOR ordering needs a power of two."""
    return max(2, 1 << (int(n) - 1).bit_length())


def pad(g, m):
    """``g`` ``(..., n, n)`` inside zeros ``(..., m, m)`` (top left)."""
    n = g.shape[-1]
    if n == m:
        return g
    widths = [(0, 0)] * (g.ndim - 2) + [(0, m - n), (0, m - n)]
    return jnp.pad(g, widths)


def xor_gather(x, axis, k):
    """``x`` permuted along ``axis`` by i ↦ i ⊕ k (k an int or a traced scalar): a gather."""
    m = x.shape[axis]
    return jnp.take(x, jnp.arange(m, dtype=jnp.int32) ^ k, axis=axis)


def jacobi_step(g, k, partner):
    """One parallel Jacobi step on ``g`` ``(..., m, m)``: every pair (i, i ⊕ k) rotated at once.

    ``partner(x, axis)`` permutes by i ↦ i ⊕ k. For p < q with J_pp = J_qq = c, J_pq = s,
    J_qp = −s: column i of G J is c·G[:, i] + σ_i s·G[:, i⊕k], σ_p = −1, σ_q = +1 (rows likewise);
    then G_pq = 0, G_pp −= t a_pq, G_qq += t a_pq."""
    m = g.shape[-1]
    dt = g.dtype
    i = jax.lax.broadcasted_iota(jnp.int32, (m, m), 0)
    j = jax.lax.broadcasted_iota(jnp.int32, (m, m), 1)
    eye = i == j
    pair = j == (i ^ k)
    row = jax.lax.broadcasted_iota(jnp.int32, (m,), 0)
    first = row < (row ^ k)  # i is the p (smaller index) of its pair
    d = jnp.sum(jnp.where(eye, g, 0), axis=-1)
    dp = partner(d, d.ndim - 1)
    apq = 0.5 * (jnp.sum(jnp.where(pair, g, 0), axis=-1)
                 + jnp.sum(jnp.where(pair, g, 0), axis=-2))
    app = jnp.where(first, d, dp)
    aqq = jnp.where(first, dp, d)
    t = _tangent(app, aqq, apq)
    c = jax.lax.rsqrt(t * t + 1)
    s = t * c
    ss = jnp.where(first, -s, s)
    h = c[..., None, :] * g + ss[..., None, :] * partner(g, g.ndim - 1)
    g = c[..., :, None] * h + ss[..., :, None] * partner(h, h.ndim - 2)
    dnew = d + jnp.where(first, -t, t) * apq
    g = jnp.where(pair, jnp.zeros((), dt), g)
    return jnp.where(eye, dnew[..., :, None], g)


def _tangent(app, aqq, apq):
    """Rutishauser's t = tan φ of the rotation that zeroes a_pq (the smaller root); 0 where
    a_pq = 0; t = 1/(2θ) where θ² + 1 would overflow (|θ| > 1e18)."""
    nz = apq != 0
    theta = (aqq - app) / (2 * jnp.where(nz, apq, 1))
    big = jnp.abs(theta) > 1e18
    th = jnp.where(big, 1, theta)
    t = jnp.where(th >= 0, 1, -1).astype(app.dtype) / (jnp.abs(th) + jnp.sqrt(th * th + 1))
    t = jnp.where(big, 0.5 / jnp.where(big, theta, 1), t)
    return jnp.where(nz, t, 0)


def off_ratio(g):
    """‖offdiag(g)‖_F² / ‖g‖_F² per matrix (0 for the zero matrix)."""
    m = g.shape[-1]
    eye = jax.lax.broadcasted_iota(jnp.int32, (m, m), 0) == \
        jax.lax.broadcasted_iota(jnp.int32, (m, m), 1)
    sq = g * g
    off = jnp.sum(jnp.where(eye, 0, sq), axis=(-2, -1))
    tot = jnp.sum(sq, axis=(-2, -1))
    return off / jnp.where(tot > 0, tot, 1)


def diagonal_descending(g, n):
    """The first ``n`` diagonal entries of the converged ``g`` ``(..., m, m)``, descending (the rest
    is padding, never rotated)."""
    m = g.shape[-1]
    eye = jax.lax.broadcasted_iota(jnp.int32, (m, m), 0) == \
        jax.lax.broadcasted_iota(jnp.int32, (m, m), 1)
    d = jnp.sum(jnp.where(eye, g, 0), axis=-1)[..., :n]
    return -jnp.sort(-d, axis=-1)


def jacobi_eigvalsh(g, max_sweeps: int = MAX_SWEEPS, return_sweeps: bool = False):
    """Eigenvalues of the symmetric ``g`` ``(..., n, n)``, descending, by parallel cyclic Jacobi;
    loops until the whole batch converged. ``return_sweeps``: also the number of sweeps run."""
    g = jnp.asarray(g)
    n = g.shape[-1]
    m = padded_size(n)
    tol2 = float(jnp.finfo(g.dtype).eps) ** 2
    work = pad(g.reshape((-1, n, n)), m)

    def sweep(carry):
        a, it = carry
        a = jax.lax.fori_loop(1, m, lambda k, x: jacobi_step(
            x, k, lambda y, axis: xor_gather(y, axis, k)), a)
        return a, it + 1

    def more(carry):
        a, it = carry
        return (it < max_sweeps) & (jnp.max(off_ratio(a)) > tol2)

    work, sweeps = jax.lax.while_loop(more, sweep, (work, jnp.int32(0)))
    lam = diagonal_descending(work, n).reshape(g.shape[:-1])
    return (lam, sweeps) if return_sweeps else lam


def flops_per_sweep(n: int) -> int:
    """Floating-point operations of one sweep on one matrix: ≈ 6 m³ (m − 1 steps, two m × m passes).
    """
    m = padded_size(n)
    return (m - 1) * (6 * m * m + 20 * m)


__all__ = ["jacobi_eigvalsh", "jacobi_step", "padded_size", "MAX_SWEEPS", "flops_per_sweep"]
