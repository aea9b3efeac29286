"""Scoring a model's weights against the random-matrix null: the orchestration.

:mod:`.score` (:func:`score_model`: per-head decisions as an ``xr.Dataset``), :mod:`.components`
(whole matrices), :mod:`.delta` (fine-tune changes), :mod:`.permutation` (entry-law null),
:mod:`.trajectory`, :mod:`.collection` (many models in one Dataset)."""

from .collection.combine import combine, combine_components, entries, entry
from .collection.trajectory import score_collection, score_component_collection
from .matrices.components import score_components
from .matrices.delta import score_delta
from .score import score_model
from .settings import ComponentSettings, CompositionSettings, ScoreSettings

__all__ = ["ComponentSettings", "CompositionSettings", "ScoreSettings", "combine",
           "combine_components", "entries", "entry", "score_collection",
           "score_component_collection", "score_components", "score_delta", "score_model"]
