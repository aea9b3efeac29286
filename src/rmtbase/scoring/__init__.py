"""Scoring a model's weights against the random-matrix null: the orchestration.

:mod:`.score` (:func:`score_model`: a Hugging Face model → ``xr.Dataset`` over layer × head ×
statistic, one decision per head); :mod:`.components` (whole weight matrices per layer);
:mod:`.delta` (what a fine-tune changed, against Gaussian deltas); :mod:`.permutation` (the
entry-law null); :mod:`.trajectory`, :mod:`.collection` (many checkpoints or models in one
Dataset). The tests and the decision are in :mod:`rmtbase.decision`, reports in
:mod:`rmtbase.report`.
"""

from .collection import combine, combine_components, entries, entry
from .components import score_components
from .delta import score_delta
from .score import score_model
from .trajectory import score_collection, score_component_collection

__all__ = ["combine", "combine_components", "entries", "entry", "score_collection",
           "score_component_collection", "score_components", "score_delta", "score_model"]
