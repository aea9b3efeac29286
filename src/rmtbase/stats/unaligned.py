"""A head's symmetry with its alignment removed (for :mod:`rmtbase.decision.kinds`).

An alignment W_K = c·W_Q + R raises the symmetry (:func:`rmtbase.stats.alignment.symmetry`)
by itself. Removing W_K's least-squares part along W_Q (c = ⟨W_Q, W_K⟩_F / ‖W_Q‖_F²) and
measuring what remains says whether the head is symmetric beyond its alignment; read against
the symmetry null it is conservative. Factors ``(..., d_h, d)``."""

from __future__ import annotations

import jax.numpy as jnp

from .alignment import symmetry


def symmetry_unaligned(wq, wk):
    """symmetry(W_Q, W_K − c W_Q) with c = ⟨W_Q, W_K⟩_F / ‖W_Q‖_F² (module docstring) of
    ``(..., d_h, d)`` factors; NaN where W_Q = 0 or nothing is left."""
    wq = jnp.asarray(wq)
    wq = wq.astype(jnp.promote_types(wq.dtype, jnp.float32))
    wk = jnp.asarray(wk).astype(wq.dtype)
    c = jnp.sum(wq * wk, axis=(-2, -1)) / jnp.sum(wq * wq, axis=(-2, -1))
    return symmetry(wq, wk - c[..., None, None] * wq)


__all__ = ["symmetry_unaligned"]
