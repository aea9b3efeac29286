"""Scoring a model's heads against the random-matrix null.

- :mod:`.score`: :func:`score_model` (a Hugging Face model → ``xr.Dataset`` over layer × head ×
  statistic) and :func:`score_values` (precomputed statistics → the same Dataset);
- :mod:`.significance`: add-one empirical p-values and Benjamini–Hochberg;
- :mod:`.report`: terminal table, CSV, netCDF and figures of a score.
"""

from .report import anomaly_table, write_report
from .score import score_model, score_values

__all__ = ["anomaly_table", "score_model", "score_values", "write_report"]
