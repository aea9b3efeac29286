"""The eigen route of the fast spectral null: a symmetric route of C Cᵀ where it is accurate.

:func:`eig_method` chooses per cell (d, d_h), dtype and backend between the SVD and the
symmetric routes; :func:`eigh_accurate` is its accuracy rule (d_h·eps·κ ≤
:data:`EIGH_MAX_REL_ERROR`), also applied per draw by :mod:`rmtbase.scoring.nulls.permutation`."""

from __future__ import annotations

import jax
import jax.numpy as jnp

EIGH_MAX_REL_ERROR = 1e-4  # bound on n·eps·κ for the symmetric eigen route (see eig_method)


def eigh_accurate(d_h, kappa, dtype=jnp.float32):
    """Whether the symmetric route is accurate at condition number ``kappa`` (NaN and inf are not):
    d_h·eps·κ ≤ :data:`EIGH_MAX_REL_ERROR`, eps of ``dtype``."""
    import numpy as np

    eps = float(jnp.finfo(jnp.dtype(dtype)).eps)
    kappa = np.asarray(kappa, dtype=np.float64)
    return np.isfinite(kappa) & (d_h * eps * kappa <= EIGH_MAX_REL_ERROR)


def eig_method(d, d_h, dtype=jnp.float32, backend=None) -> str:
    """Eigen route of the fast spectral null: symmetric (C Cᵀ) where accurate, else ``"svd"``.

    A symmetric eigensolver's relative error on λ_min is O(n·eps·κ), κ = λ_max/λ_min, so the
    symmetric route needs d_h·eps·κ ≤ :data:`EIGH_MAX_REL_ERROR`, κ = x₊/x₋ from the exact
    MP_c⊠MP_c edges (c = d_h/d). Routes: ``"eigh"`` (CPU), ``"eigvalsh"`` (accelerator) or Pallas
    Jacobi (:func:`rmtbase.stats._gpu_routes.accelerator_route`)."""
    backend = jax.default_backend() if backend is None else backend
    from ..analytic.product import edges

    lo, hi = edges(d_h / d)
    if lo <= 0 or not eigh_accurate(d_h, hi / lo, dtype):
        return "svd"
    if backend == "cpu":
        return "eigh"
    from ..stats._gpu_routes import accelerator_route

    return accelerator_route(d_h)
