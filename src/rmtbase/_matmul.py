"""Float32 matrix products at full precision on every backend.

JAX's default precision for a float32 matmul is the backend's fastest: on NVIDIA GPUs since
Ampere that is TF32 (10-bit significands), which moved W_QK's element statistics by up to
2.5 % in a histogram bin and σ_fit's 3×3 normal equations by 10⁻³ on an H100, against the CPU
estimator that made the shipped tables. Every product in rmtbase's JAX code goes through
:func:`mm`, which asks for ``Precision.HIGHEST`` on accelerators (measured on an H100: GPU and
CPU then agree to float32 rounding, ≤ 5·10⁻⁶ relative outside near-zero statistics). On CPU
the default already is the full float32 product, and asking for HIGHEST there only made XLA
slower (a 4096×128 product 42 → 51 ms), so there it is left at the default: same numbers.

:func:`mm_tn` forms W_QK = W_Qᵀ W_K from factors stored ``(d_h, d)``: XLA's CPU dot with a
transposed left operand ran 2–3× slower than with a contiguous one (4096 × 128: 174 against
68 ms of CPU for the product alone), so on CPU the transpose is materialised first (d·d_h
entries, ~1 % of the product's traffic).
"""

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
    """``aᵀ @ b`` for ``a`` ``(k, m)``, ``b`` ``(k, n)``, as :func:`mm` computes it. On CPU
    ``aᵀ`` is first made an array of its own (an optimisation barrier keeps XLA from folding
    the transpose back into the dot), so that the dot takes its contiguous path (XLA's CPU dot
    is 2–3× slower with a transposed left operand). The product is the same sum in another
    blocking: equal bit for bit at most shapes, else within float32 rounding."""
    at = jnp.swapaxes(a, -1, -2)
    if jax.default_backend() == "cpu":
        at = jax.lax.optimization_barrier(at)
    return mm(at, b)


__all__ = ["mm", "mm_tn"]
