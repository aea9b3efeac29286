"""The presentation of scores: ``summary.txt``, CSV, netCDF, figures and ``report.html``,
written all-or-nothing.

:func:`.write.write_report` is the one entry point; it decides the report's shape once and
hands it to :mod:`.model_report`, :mod:`.collection_report` or :mod:`.component_report`. The
names below load on first use."""

from __future__ import annotations

import importlib

_NAMES = {"anomaly_table": ".tables", "write_compare": ".compare", "write_report": ".write"}

__all__ = sorted(_NAMES)


def __getattr__(name: str):
    if name in _NAMES:
        return getattr(importlib.import_module(_NAMES[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
