"""Baseline tables: Monte Carlo null draws of the head statistics, stored as xarray/netCDF.

:mod:`.null` (one cell), :mod:`.tables` (a (d, d_h) grid), :mod:`.table_file`, :mod:`.cache`
(:func:`null_table`), :mod:`.sweep` (Dask). ``rmtbase.baseline(d, d_h, ...)`` is
:func:`rmtbase.baseline.tables.baseline`. Importing this package imports neither JAX nor xarray."""

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
