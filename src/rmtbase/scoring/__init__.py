"""Scoring a model's weights against the random-matrix null: the orchestration.

The facade: :func:`score_model` (:mod:`.score`: per-head decisions as an ``xr.Dataset``), the
settings records (:mod:`.settings`), and below it one sub-package a stage, in pipeline order
(a stage imports only earlier ones; ``tests/test_layout.py``): :mod:`.measures` (what is
measured of a head, one program for heads and null), :mod:`.nulls` (a layer's null and its
checks), :mod:`.stopping` (how far a null is drawn), :mod:`.profile` (profile axes and their
null), :mod:`.heads` (the heads against their references, layer by layer), :mod:`.composition`
(head pairs), :mod:`.matrices` (whole matrices, fine-tune deltas), :mod:`.collection` (many
scores in one Dataset), then :mod:`.ov` (both circuits side by side)."""

from .collection.combine import combine, combine_components, entries, entry
from .collection.trajectory import score_collection, score_component_collection
from .matrices.components import score_components
from .matrices.delta import score_delta
from .score import score_model
from .settings import ComponentSettings, CompositionSettings, ScoreSettings

__all__ = ["ComponentSettings", "CompositionSettings", "ScoreSettings", "combine",
           "combine_components", "entries", "entry", "score_collection",
           "score_component_collection", "score_components", "score_delta", "score_model"]
