"""The one statistics implementation, shared by the null and by model scoring.

:func:`head_stats` takes a head's factors W_Q, W_K ``(..., d_h, d)`` (raw weights or a null
draw: the same code either way) and returns ``{"<matrix>.<stat>": array}``:

- ``q.<stat>``, ``k.<stat>``: element statistics of W_Q, W_K (:mod:`.elementwise`);
- ``qk.<stat>``: element statistics of W_QK = W_Qᵀ W_K ``(d, d)`` (formed one head at a time);
- ``qk.<spectral>``: spectral statistics of W_QK from d_h×d_h cores (:mod:`.spectral`);
- ``q.rms``, ``k.rms`` always: √(tr G / (d_h d)) = ‖W‖_F/√(d_h d), for exact σ-normalisation.

:data:`STAT_INFO` documents every statistic (``long_name``, ``units``, ``definition``,
``sigma_power``, ``scaling``): value(σ) = σ^p value(1) for ``scaling="power"`` and
value(σ) = value(1) + p ln σ for ``scaling="log"``, where σ is σ_Q (q.*), σ_K (k.*) or σ_Q σ_K
(qk.*), so a σ = 1 table serves any σ exactly. Conventions: ``docs/conventions.md``.

The names are loaded on first use (:mod:`._core`, which imports JAX): importing a light
submodule such as :mod:`.null_kind` or :mod:`.names` imports no JAX, so that the command line
parses its arguments (and ``rmtbase --help`` answers) without it. The shipped nulls are
registered on import (:mod:`.null_kind`, light), so ``Null.parse`` knows them whichever
``stats`` module :class:`~.null_protocol.Null` was imported from.
"""

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
