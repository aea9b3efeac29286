"""Baseline tables: Monte Carlo null draws of the head statistics, stored as xarray/netCDF.

- :mod:`.null`: :func:`null_draws` (one cell, explicit key) and the eigen-route choice;
- :mod:`.tables`: :func:`baseline` over a (d, d_h) grid → ``xr.Dataset`` with provenance;
- :mod:`.table_file`: :func:`read_table`, :func:`write_table` (atomic, one-line errors);
- :mod:`.references`: analytic reference values beside each statistic; :func:`summary`;
- :mod:`.cache`: :func:`null_table` (shipped data, user cache, generated) and :func:`rescale`;
- :mod:`.spectra`: the stored spectrum ``lambda`` and spectral statistics derived from it;
- :mod:`.sweep`: grid sweeps on Dask distributed, identical to one process.

``rmtbase.baseline(d, d_h, ...)`` — the package called as a function — is
:func:`rmtbase.baseline.tables.baseline`, so the one-line spelling of earlier versions keeps
working. Importing this package imports neither JAX nor xarray.
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
