"""Scoring a model's heads against the random-matrix null.

- :mod:`.score`: :func:`score_model` (a Hugging Face model → ``xr.Dataset`` over layer × head ×
  statistic, with one decision per head);
- :mod:`.verdict`: :func:`score_values` (precomputed statistics and null draws → the same
  Dataset): per-statistic tests and the per-head decision;
- :mod:`.tails`: tail-resolving Monte Carlo p-values (add-one, GPD tails);
- :mod:`.omnibus`: the calibrated Cauchy combination per head;
- :mod:`.family`: which statistics are tested, what each tests, duplicates;
- :mod:`.permutation`: the entry-law (permutation) null;
- :mod:`.significance`: add-one empirical p-values and Benjamini–Hochberg;
- :mod:`.report`, :mod:`.figures`, :mod:`.output`: text, CSV, netCDF and figures of a score,
  written all-or-nothing;
- :mod:`.qk_histogram`: the per-head W_QK element histogram stored with a score;
- :mod:`.trajectory`, :mod:`.collection`, :mod:`.collection_report`: many checkpoints or models
  in one Dataset (leading ``checkpoint``/``model`` dimension), in one process or on Dask;
- :mod:`.profiles`, :mod:`.compare`: layer profiles and trajectories against the null band,
  ``rmtbase compare``;
- :mod:`.html`, :mod:`.html_data`: the self-contained ``report.html``;
- :mod:`.components`, :mod:`.component_report`, :mod:`.component_figures`:
  :func:`score_components` — whole weight matrices per layer against the null at their own
  shape and storage (``rmtbase score --components``).
"""

from .collection import combine, entries, entry
from .compare import write_compare
from .components import score_components
from .report import anomaly_table, write_report
from .score import score_model
from .trajectory import score_collection
from .verdict import score_values

__all__ = ["anomaly_table", "combine", "entries", "entry", "score_collection",
           "score_components", "score_model", "score_values", "write_compare", "write_report"]
