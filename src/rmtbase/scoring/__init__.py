"""Scoring a model's weights against the random-matrix null: the orchestration.

The facade :func:`score_model` and the settings records, and below them one sub-package a stage,
in pipeline order (``tests/test_layout.py``): :mod:`.measures`, :mod:`.nulls`, :mod:`.stopping`,
:mod:`.profile`, :mod:`.heads`, :mod:`.composition`, :mod:`.matrices`, :mod:`.collection`, then
:mod:`.ov`."""

from .collection.combine import combine, combine_components, entries, entry
from .collection.trajectory import score_collection, score_component_collection
from .matrices.components import score_components
from .matrices.delta import score_delta
from .score import score_model
from .settings import ComponentSettings, CompositionSettings, ScoreSettings

__all__ = ["ComponentSettings", "CompositionSettings", "ScoreSettings", "combine",
           "combine_components", "entries", "entry", "score_collection",
           "score_component_collection", "score_components", "score_delta", "score_model"]
