"""Scoring a model's weights against the random-matrix null: the orchestration.

The facade :func:`score_model` and the settings records, and below them one sub-package a stage,
in pipeline order (``tests/test_layout.py``): :mod:`.measures`, :mod:`.nulls`, :mod:`.stopping`,
:mod:`.profile`, :mod:`.heads`, :mod:`.composition`, :mod:`.matrices`, :mod:`.collection`, then
:mod:`.ov`. The names below load on first use: importing one stage loads no other."""

from __future__ import annotations

import importlib

#: Public name -> the module defining it (relative to this package).
_NAMES = {
    "combine": ".collection.combine", "combine_components": ".collection.combine",
    "entries": ".collection.combine", "entry": ".collection.combine",
    "score_collection": ".collection.trajectory",
    "score_component_collection": ".collection.trajectory",
    "score_components": ".matrices.components", "score_delta": ".matrices.delta",
    "score_model": ".score", "ComponentSettings": ".settings",
    "CompositionSettings": ".settings", "ScoreSettings": ".settings",
}

__all__ = sorted(_NAMES)


def __getattr__(name: str):
    if name in _NAMES:
        return getattr(importlib.import_module(_NAMES[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
