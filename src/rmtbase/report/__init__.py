"""The presentation of scores: ``summary.txt``, CSV, netCDF, figures and ``report.html``,
written all-or-nothing.

- :mod:`.write`: :func:`write_report`, the one entry point; it decides the report's shape
  (one model, a collection, with or without whole matrices) once;
- :mod:`.tables`: the head ranking, the terminal table and the CSV frames of one model;
- :mod:`.model_report`, :mod:`.collection_report`, :mod:`.component_report`: the writer of each
  shape;
- :mod:`.figures`, :mod:`.component_figures`, :mod:`.profiles`, :mod:`.collection_figures`:
  plots (each takes ``ax``);
- :mod:`.html`, :mod:`.html_data`: the self-contained ``report.html``;
- :mod:`.compare`: ``rmtbase compare``.
"""

from .compare import write_compare
from .tables import anomaly_table
from .write import write_report

__all__ = ["anomaly_table", "write_compare", "write_report"]
