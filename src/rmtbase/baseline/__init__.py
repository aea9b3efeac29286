"""Baseline tables: Monte Carlo null draws of the head statistics, stored as xarray/netCDF.

:mod:`.null` (one cell, explicit key), :mod:`.tables` (a (d, d_h) grid with provenance),
:mod:`.table_file` (read/write), :mod:`.references` (analytic reference values),
:mod:`.cache` (:func:`null_table`: shipped, cached or generated), :mod:`.spectra` (the stored
spectrum ``lambda``), :mod:`.sweep` (grid sweeps on Dask, identical to one process).
``rmtbase.baseline(d, d_h, ...)`` is :func:`rmtbase.baseline.tables.baseline`. Importing this
package imports neither JAX nor xarray.
"""

from __future__ import annotations

import sys
import types

from .cache import null_table, rescale
from .table_file import read_table, write_table
from .tables import baseline

__all__ = ["baseline", "null_table", "read_table", "rescale", "write_table"]


class _CallablePackage(types.ModuleType):
    """Module type whose instances forward calls to :func:`baseline`."""

    def __call__(self, *args, **kwargs):
        return baseline(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
