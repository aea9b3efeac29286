"""Float32 matrix products at full precision on every backend.

:func:`mm` asks for ``Precision.HIGHEST`` on accelerators (JAX's default on recent NVIDIA GPUs
is TF32, which moves the statistics against the CPU-made tables); on CPU the default already is
the full float32 product. :func:`mm_tn` materialises the transpose first on CPU, where XLA's dot
is slower with a transposed left operand."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def _precision():
    """HIGHEST off CPU, else None (XLA's CPU default is already the full product)."""
    return None if jax.default_backend() == "cpu" else jax.lax.Precision.HIGHEST


def mm(a, b):
    """``a @ b`` as a full float32 (or float64) product on every backend (module docstring);
    the choice is made when the caller is traced."""
    return jnp.matmul(a, b, precision=_precision())


def mm_tn(a, b):
    """``aᵀ @ b`` for ``a`` ``(k, m)``, ``b`` ``(k, n)``, as :func:`mm` computes it; on CPU ``aᵀ``
    is materialised behind an optimisation barrier (equal within float32 rounding)."""
    at = jnp.swapaxes(a, -1, -2)
    if jax.default_backend() == "cpu":
        at = jax.lax.optimization_barrier(at)
    return mm(at, b)


__all__ = ["mm", "mm_tn"]
