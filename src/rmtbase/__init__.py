"""rmtbase: random-matrix baselines for transformer attention weights.

Import is cheap and side-effect free: submodules are loaded on first attribute access.
Conventions are in ``docs/conventions.md``."""

from __future__ import annotations

import importlib

from ._version import __version__

_SUBMODULES = {
    "analytic", "ensembles", "stats", "baseline", "models", "decision", "scoring", "report",
    "files", "extend",
    "plot", "studies", "errors", "depth",
}
# Top-level functions and settings records, resolved lazily: name -> (module, attribute).
_FUNCTIONS = {
    "score_model": ("rmtbase.scoring.score", "score_model"),
    "composition": ("rmtbase.scoring.composition.run", "composition"),
    "ScoreSettings": ("rmtbase.scoring.settings", "ScoreSettings"),
    "CompositionSettings": ("rmtbase.scoring.settings", "CompositionSettings"),
    "write_report": ("rmtbase.report.write", "write_report"),
}

__all__ = ["__version__", *sorted(_SUBMODULES), *sorted(_FUNCTIONS)]


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _FUNCTIONS:
        module, attr = _FUNCTIONS[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'rmtbase' has no attribute {name!r}")
