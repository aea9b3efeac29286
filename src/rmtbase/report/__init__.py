"""The presentation of scores: ``summary.txt``, CSV, netCDF, figures and ``report.html``,
written all-or-nothing.

:func:`.write.write_report` is the one entry point; it decides the report's shape once and
hands it to :mod:`.model_report`, :mod:`.collection_report` or :mod:`.component_report`."""

from .compare import write_compare
from .tables import anomaly_table
from .write import write_report

__all__ = ["anomaly_table", "write_compare", "write_report"]
