"""Baseline tables: Monte Carlo null draws of the head statistics, stored as xarray/netCDF.

:mod:`.null` (one cell), :mod:`.tables` (a (d, d_h) grid), :mod:`.table_file`, :mod:`.cache`
(:func:`null_table`), :mod:`.sweep` (Dask). ``rmtbase.baseline(d, d_h, ...)`` is
:func:`rmtbase.baseline.tables.baseline`. Importing this package imports neither JAX nor
xarray: its names and submodules load on first use."""

from __future__ import annotations

import importlib
import sys
import types

#: The package's names, each imported from its module when first asked for (so that
#: ``rmtbase.baseline.heavy_tail_null`` does not import the head statistics and JAX).
_LAZY = {"baseline": "tables", "null_table": "cache", "read_table": "table_file",
         "rescale": "cache", "write_table": "table_file"}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name.startswith("__"):  # never a submodule (inspection asks for many)
        raise AttributeError(name)
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    try:  # a submodule (``rmtbase.baseline.tables``), as an eager package would have it
        return importlib.import_module(f".{name}", __name__)
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _CallablePackage(types.ModuleType):
    """Module type whose instances forward calls to :func:`baseline`."""

    def __call__(self, *args, **kwargs):
        from .tables import baseline

        return baseline(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
