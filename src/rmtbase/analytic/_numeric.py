"""Private numerical helpers: :func:`working_dps` (``dps`` plus guard digits) and
:func:`tanh_sinh` (Takahasi & Mori 1974)."""

from __future__ import annotations

import contextlib
import functools
import math

import mpmath as mp
import numpy as np

from ..errors import InputError, check_positive_int

#: Guard digits added to the requested precision inside mp computations.
GUARD_DIGITS = 10


@contextlib.contextmanager
def working_dps(dps: int | None, guard: int = GUARD_DIGITS):
    """Context: mp working precision of ``dps`` (default: the current ``mp.dps``) + ``guard``."""
    if dps is not None:
        try:
            dps_i = int(dps)
        except (TypeError, ValueError):
            raise InputError(f"dps must be a positive integer, got {dps!r}") from None
        if dps_i < 1 or dps_i != dps:
            raise InputError(f"dps must be a positive integer, got {dps!r}")
    target = int(mp.mp.dps if dps is None else dps)
    with mp.workdps(target + guard):
        yield target


@functools.lru_cache(maxsize=8)
def tanh_sinh(level: int = 6, t_max: float = 3.5):
    """Tanh-sinh rule on [-1, 1]: read-only ``(x, w, dist_lo, dist_hi)``, step ``h = 2**-level``.

    x = tanh(π/2 sinh t), w = h (π/2) cosh t / cosh²(π/2 sinh t); ``1 + x`` and ``1 - x`` as
    2 / (1 + exp(±π sinh t)), without cancellation at the endpoints."""
    h = 2.0**-level
    t = np.arange(-math.ceil(t_max / h), math.ceil(t_max / h) + 1) * h
    u = 0.5 * np.pi * np.sinh(t)
    x = np.tanh(u)
    w = h * 0.5 * np.pi * np.cosh(t) / np.cosh(u) ** 2
    dist_hi = 2.0 / (1.0 + np.exp(2.0 * u))    # 1 - x
    dist_lo = 2.0 / (1.0 + np.exp(-2.0 * u))   # 1 + x
    keep = w > 0
    out = tuple(a[keep] for a in (x, w, dist_lo, dist_hi))
    for a in out:
        a.setflags(write=False)
    return out


def check_order(k, name: str = "k") -> int:
    """A positive integer (number of moments), else InputError."""
    return check_positive_int(k, name)


def check_probability(q) -> np.ndarray:
    """Array of probabilities in [0, 1], else InputError."""
    q = np.asarray(q, dtype=float)
    if np.any(~(q >= 0) | ~(q <= 1)):
        raise InputError("probabilities must lie in [0, 1]")
    return q
