"""The one statistics implementation, shared by the null and by model scoring.

:func:`head_stats` takes a head's factors W_Q, W_K ``(..., d_h, d)`` (raw weights or a null
draw) and returns ``{"<matrix>.<stat>": array}``:

- ``q.<stat>``, ``k.<stat>``: element statistics of W_Q, W_K (:mod:`.elementwise`);
- ``qk.<stat>``: element statistics of W_QK = W_Qᵀ W_K ``(d, d)`` (one head at a time);
- ``qk.<spectral>``: spectral statistics of W_QK from d_h×d_h cores (:mod:`.spectral`);
- ``q.rms``, ``k.rms`` always: ‖W‖_F/√(d_h d), for exact σ-normalisation.
:data:`STAT_INFO`: each statistic's σ scaling (:mod:`.statistic`). Names load on first use."""

from __future__ import annotations

import importlib

from . import null_kind as _null_kind  # noqa: F401  (registers the shipped nulls)

__all__ = [
    "ELEMENT_STATS",
    "SPECTRAL_STATS",
    "STATISTICS",
    "STAT_INFO",
    "Statistic",
    "element_stats",
    "head_stats",
    "spectral_stats",
    "statistic",
    "table_name",
]


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    core = importlib.import_module(f"{__name__}._core")
    try:
        return getattr(core, name)
    except AttributeError:
        pass
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
