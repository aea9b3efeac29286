"""Scoring a model's weights against the random-matrix null: the orchestration.

The per-statistic tests and the per-head decision are in :mod:`rmtbase.decision`; the
reports (text, CSV, figures, report.html) in :mod:`rmtbase.report`.

- :mod:`.score`: :func:`score_model` (a Hugging Face model → ``xr.Dataset`` over layer × head ×
  statistic, with one decision per head);
- :mod:`.components`: :func:`score_components` — whole weight matrices per layer against the
  null at their own shape and storage (``rmtbase score --components``);
- :mod:`.delta`: :func:`score_delta` — what a fine-tune (or a LoRA adapter) changed, per head,
  against Gaussian deltas (``rmtbase score MODEL --base BASE``);
- :mod:`.permutation`: the entry-law (permutation) null;
- :mod:`.qk_elements`, :mod:`.qk_histogram`: W_QK element statistics head by head, and the
  per-head W_QK element histogram stored with a score;
- :mod:`.trajectory`, :mod:`.collection`: many checkpoints or models in one Dataset (leading
  ``checkpoint``/``model`` dimension), in one process or on Dask; whole-matrix scores of
  a collection with :func:`score_component_collection` (one process).
"""

from .collection import combine, combine_components, entries, entry
from .components import score_components
from .delta import score_delta
from .score import score_model
from .trajectory import score_collection, score_component_collection

__all__ = ["combine", "combine_components", "entries", "entry", "score_collection",
           "score_component_collection", "score_components", "score_delta", "score_model"]
