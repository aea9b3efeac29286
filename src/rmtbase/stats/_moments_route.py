"""Spectral statistics of the null's core without an eigendecomposition (plain XLA: GEMMs).

For G = C Cᵀ of the d_h × d_h core C:

- traces: Σλ = ‖C‖_F², Σλ² = ‖G‖_F² (exact), hence pr, npr and stable rank;
- λ_max by repeated squaring P ← P²/tr P² from P = G/tr G (power method, K GEMMs): its
  column v of largest diagonal gives the Rayleigh quotient λ_max = ‖Cᵀv‖²/‖v‖²; a near-tie at
  relative gap δ leaves at most λ₁/(e·2^(K+1)). λ_min likewise on λ_max I − G (absolute
  error ≈ eps·λ_max), so the route serves cells with κ ≤ 10³. No spectral
entropy. Golub & Van Loan, *Matrix Computations*, 4th ed., §8.2, §9.1."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .._matmul import mm

#: squarings of the power iteration (P ∝ G^(2^K)): module docstring for the error bound
SQUARINGS = 22
#: the statistics this route gives (names of :mod:`rmtbase.stats.statistic`)
MOMENT_STATS = ("lambda_max", "lambda_min", "sum_lambda", "sum_lambda2", "pr", "npr",
                "condition_number", "stable_rank")


def _top(g, c, squarings: int):
    """Rayleigh quotient ‖Cᵀv‖²/‖v‖² at the dominant eigenvector v of ``g`` ``(..., n, n)`` = C Cᵀ,
    found by ``squarings`` normalised squarings."""
    p = g / jnp.trace(g, axis1=-2, axis2=-1)[..., None, None]

    def square(_, p):
        q = mm(p, p)
        return q / jnp.sum(q * q, axis=(-2, -1), keepdims=True) ** 0.5

    p = jax.lax.fori_loop(0, squarings, square, p)
    j = jnp.argmax(jnp.diagonal(p, axis1=-2, axis2=-1), axis=-1)
    v = jnp.take_along_axis(p, j[..., None, None], axis=-1)[..., 0]  # (..., n)
    ctv = jnp.einsum("...ij,...i->...j", c, v, precision=jax.lax.Precision.HIGHEST)
    return jnp.sum(ctv * ctv, axis=-1) / jnp.sum(v * v, axis=-1)


def moment_stats(core, squarings: int = SQUARINGS) -> dict:
    """:data:`MOMENT_STATS` of λ = eig(C Cᵀ) for ``core`` ``(..., n, n)``, without a decomposition;
    within :data:`rmtbase.baseline.eig_route.EIGH_MAX_REL_ERROR` of the ``"eigh"`` route."""
    c = jnp.asarray(core)
    n = c.shape[-1]
    g = mm(c, jnp.swapaxes(c, -1, -2))
    s1 = jnp.sum(c * c, axis=(-2, -1))  # tr G = Σλ
    gs = g / s1[..., None, None]  # scaled: Σλ² = s1² ‖G/s1‖_F², no overflow
    r2 = jnp.sum(gs * gs, axis=(-2, -1))
    lmax = _top(g, c, squarings)
    shifted = lmax[..., None, None] * jnp.eye(n, dtype=g.dtype) - g
    lmin = _top(shifted, c, squarings)
    lmin = jnp.maximum(jnp.minimum(lmin, lmax), 0.0)
    pr = 1.0 / r2
    return {"lambda_max": lmax, "lambda_min": lmin, "sum_lambda": s1,
            "sum_lambda2": r2 * s1 * s1, "pr": pr, "npr": pr / n,
            "condition_number": lmax / lmin, "stable_rank": s1 / lmax}
