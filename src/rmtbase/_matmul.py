"""Float32 matrix products at full precision on every backend.

JAX's default precision for a float32 matmul is the backend's fastest: on NVIDIA GPUs since
Ampere that is TF32 (10-bit significands), which moved W_QK's element statistics by up to
2.5 % in a histogram bin and σ_fit's 3×3 normal equations by 10⁻³ on an H100, against the CPU
estimator that made the shipped tables. Every product in rmtbase's JAX code goes through
:func:`mm`, which asks for ``Precision.HIGHEST`` on accelerators (measured on an H100: GPU and
CPU then agree to float32 rounding, ≤ 5·10⁻⁶ relative outside near-zero statistics). On CPU
the default already is the full float32 product, and asking for HIGHEST there only made XLA
slower (a 4096×128 product 42 → 51 ms), so there it is left at the default: same numbers.
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


__all__ = ["mm"]
