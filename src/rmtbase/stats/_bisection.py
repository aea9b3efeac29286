"""Eigenvalues of a real symmetric tridiagonal matrix by Sturm bisection, cheap to compile.

:func:`tridiagonal_eigvals` equals ``jax.scipy.linalg.eigh_tridiagonal(d, e,
eigvals_only=True)`` bit for bit: the same Gershgorin interval, Sturm recurrence (``dstebz``'s
pivmin guard; Kahan 1966, Demmel & Kahan 1990) and parallel bisection, with only IEEE
+ − × ÷, compare, select and max/min in the same order, so no instruction set rounds them
apart; one ``fori_loop`` step, not unrolled."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax


def tridiagonal_eigvals(d, e):
    """Eigenvalues (ascending) of the symmetric tridiagonal matrix with diagonal ``d`` ``(n,)`` and
    off-diagonal ``e`` ``(n − 1,)`` (same real dtype; vmap for a batch); absolute error ≈ n·eps·‖T‖.
    """
    alpha = jnp.asarray(d)
    beta = jnp.asarray(e)
    n = alpha.shape[0]
    if n <= 1:
        return alpha
    beta_abs = jnp.abs(beta)
    beta_sq = jnp.square(beta)
    # Gershgorin bounds of the spectrum and the norm bound, as JAX
    off = jnp.concatenate([beta_abs[:1], beta_abs[:-1] + beta_abs[1:], beta_abs[-1:]], axis=0)
    lam_max = jnp.amax(alpha + off)
    lam_min = jnp.amin(alpha - off)
    t_norm = jnp.maximum(jnp.abs(lam_min), jnp.abs(lam_max))
    finfo = np.finfo(alpha.dtype)
    one = np.ones([], dtype=alpha.dtype)
    safemin = np.maximum(one / finfo.max, (one + finfo.eps) * finfo.tiny)
    pivmin = safemin * jnp.maximum(1, jnp.amax(beta_sq))
    alpha0_perturbation = jnp.square(finfo.eps * beta_abs[0])
    abs_tol = finfo.eps * t_norm
    max_it = finfo.nmant + 1
    target_counts = jnp.arange(n, dtype=np.int32)
    fudge = 2.1
    norm_slack = jnp.array(n, alpha.dtype) * fudge * finfo.eps * t_norm
    lower = jnp.broadcast_to(lam_min - norm_slack - 2 * fudge * pivmin, (n,))
    upper = jnp.broadcast_to(lam_max + norm_slack + fudge * pivmin, (n,))
    mid = 0.5 * (upper + lower)
    pivmin = jnp.broadcast_to(pivmin, (n,))
    alpha0_perturbation = jnp.broadcast_to(alpha0_perturbation, (n,))

    def sturm_count(x):
        """Eigenvalues below each x: the signs of the Sturm sequence's pivots."""
        q = alpha[0] - x
        count = jnp.where(q < 0, np.int32(1), np.int32(0))
        q = jnp.where(alpha[0] == x, alpha0_perturbation, q)

        def step(i, qc):
            q, count = qc
            q = alpha[i] - beta_sq[i - 1] / q - x
            count = jnp.where(q <= pivmin, count + 1, count)
            q = jnp.where(q <= pivmin, jnp.minimum(q, -pivmin), q)
            return q, count

        return lax.fori_loop(1, n, step, (q, count))[1]

    def cond(args):
        i, lower, _, upper = args
        return jnp.logical_and(jnp.less(i, max_it), jnp.less(abs_tol, jnp.amax(upper - lower)))

    def body(args):
        i, lower, mid, upper = args
        counts = sturm_count(mid)
        lower = jnp.where(counts <= target_counts, mid, lower)
        upper = jnp.where(counts > target_counts, mid, upper)
        return i + 1, lower, 0.5 * (lower + upper), upper

    return lax.while_loop(cond, body, (0, lower, mid, upper))[2]
