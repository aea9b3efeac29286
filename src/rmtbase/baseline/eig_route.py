"""The eigen route of the fast spectral null: a symmetric route of C Cᵀ where it is accurate.

:func:`eig_method` chooses, per cell (d, d_h), dtype and backend, between the SVD and the
symmetric routes (``"eigh"`` on CPU, ``"eigvalsh"`` or a measured Pallas route on an
accelerator); :func:`eigh_accurate` is its accuracy rule (d_h·eps·κ ≤
:data:`EIGH_MAX_REL_ERROR`), also applied per draw by the permutation null. Used by
:mod:`rmtbase.baseline.null` (which draws with it) and :mod:`rmtbase.scoring.permutation`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

EIGH_MAX_REL_ERROR = 1e-4  # bound on n·eps·κ for the symmetric eigen route (see eig_method)


def eigh_accurate(d_h, kappa, dtype=jnp.float32):
    """Whether the symmetric eigen route is accurate enough at condition number ``kappa``
    (a number or an array; NaN and inf are not): d_h·eps·κ ≤ :data:`EIGH_MAX_REL_ERROR`, eps
    of ``dtype``. The rule of :func:`eig_method` and of the permutation null's per-draw check."""
    import numpy as np

    eps = float(jnp.finfo(jnp.dtype(dtype)).eps)
    kappa = np.asarray(kappa, dtype=np.float64)
    return np.isfinite(kappa) & (d_h * eps * kappa <= EIGH_MAX_REL_ERROR)


def eig_method(d, d_h, dtype=jnp.float32, backend=None) -> str:
    """Eigen route of the fast spectral null: a symmetric route of C Cᵀ where it is accurate,
    else ``"svd"``.

    The symmetric routes' relative error on λ_min is of order n·eps·κ with κ = λ_max/λ_min
    (backward stability of any symmetric eigensolver), so they are taken only when
    d_h·eps·κ ≤ :data:`EIGH_MAX_REL_ERROR`, with κ = x₊/x₋ from the exact MP_c⊠MP_c edges
    (c = d_h/d). float32 takes them for c ≲ 0.1 at d_h = 128 and c ≲ 0.18 at d_h = 64 (all
    seed-model shapes), float64 up to c ≈ 0.99. The error stays far below the null's own
    spread of λ_min (of order d_h^{-2/3}). The symmetric route is the fastest measured one
    (``benchmarks/gpu.py``; docs/performance.md): ``"eigh"`` (tridiagonalisation + bisection)
    on CPU, ``"eigvalsh"`` (cuSOLVER's batched solver) on an accelerator, or a Pallas Jacobi
    route below the switch of :func:`rmtbase.stats._gpu_routes.accelerator_route` (off).
    """
    backend = jax.default_backend() if backend is None else backend
    from ..analytic.product import edges

    lo, hi = edges(d_h / d)
    if lo <= 0 or not eigh_accurate(d_h, hi / lo, dtype):
        return "svd"
    if backend == "cpu":
        return "eigh"
    from ..stats._gpu_routes import accelerator_route

    return accelerator_route(d_h)
