"""Which route a null table's λ takes, per cell, and the draws version that names it.

A quantised table's λ comes from the QR route (:func:`rmtbase.stats.spectral.eigvals_from_factors`)
or the Gram route (:func:`rmtbase.stats.spectral.null_eigvals_by_grams`); they agree to float32
rounding, not bit for bit, so cache names carry :func:`draws_version`. :func:`gram_route`:
lowrank float32 CPU draws, block-format storage, spectral statistics, d_h ≥ :data:`GRAM_MIN_DH`,
c = d_h/d ≤ :data:`GRAM_MAX_C`; else QR, version 1."""

from __future__ import annotations

from fractions import Fraction

#: Least d_h at which a quantised table's λ takes the Gram route (module docstring).
GRAM_MIN_DH = 128
#: Largest c = d_h/d at which it does (a fraction: compared exactly).
GRAM_MAX_C = Fraction(2, 5)
#: The draws version of a table whose λ takes the Gram route (QR route: 1).
GRAM_VERSION = 2


def gram_route(d: int, d_h: int, stats: str, ensemble: str, storage, dtype,
               backend: str | None = None) -> bool:
    """Whether the draws of this cell compute λ by the Gram route (module docstring). ``storage``: a
    :class:`rmtbase.stats.storage.Storage`; ``backend``: JAX's platform name (default: JAX's
    default backend, asked only for a cell that otherwise qualifies)."""
    import numpy as np

    if not (stats in ("all", "spectral") and ensemble == "lowrank" and storage.block > 1
            and np.dtype(dtype) == np.float32 and d_h >= GRAM_MIN_DH
            and d_h <= GRAM_MAX_C * d):
        return False
    if backend is None:
        import jax

        backend = jax.default_backend()
    return backend == "cpu"


def draws_version(d: int, d_h: int, stats: str, ensemble: str, storage, dtype,
                  backend: str | None = None) -> int:
    """The draws version of a table of this cell: :data:`GRAM_VERSION` where λ takes the Gram
    route (:func:`gram_route`, same arguments), else 1 (the draws of every earlier rmtbase)."""
    return GRAM_VERSION if gram_route(d, d_h, stats, ensemble, storage, dtype, backend) else 1
