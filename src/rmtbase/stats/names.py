"""Storage names by family, read from :mod:`rmtbase.stats.storage`'s registry when used, with
no JAX import (the command line builds its choices from them): :func:`storage_names`, live
:class:`rmtbase.registry.Names` views of the registry."""

from __future__ import annotations

from collections.abc import Callable

from ..registry import Names
from .storage import _REGISTRY, Storage


def storage_names(keep: Callable[[Storage], bool] | None = None, first: tuple = ()) -> Names:
    """The names of the registered records satisfying ``keep``, in registry order, after the
    fixed names ``first``, read when used (a tuple made from it is fixed when made). A record
    is in it when it is the record registered under its name."""
    return Names(_REGISTRY, keep, first)


FLOAT_STORAGES = storage_names(lambda s: s.is_float)
#: FP8 of official FP8 checkpoints (:mod:`rmtbase.stats.fp8`): E4M3 and E5M2 in 128×128 tiles,
#: E4M3 with one scale per output channel (compressed-tensors).
FP8_FORMATS = storage_names(lambda s: s.family == "fp8")
#: FP8 storages whose 128-row tiles span several heads (:func:`rmtbase.stats.precision.null_rows`).
FP8_TILED = storage_names(lambda s: s.family == "fp8" and s.tile_rows > 0)
QUANT_FORMATS = storage_names(lambda s: s.is_quantised)
STORAGES = storage_names()

#: The values of ``quantized_null=`` / ``--quantized-null``: "auto", "none" or a quantised
#: format, the formats read from the registry when used (one registered later is in it)
QUANTIZED_NULL = storage_names(lambda s: s.is_quantised, first=("auto", "none"))



def check_quantized_null(value, option: str = "quantized_null") -> None:
    """InputError (one line) unless ``value`` is in :data:`QUANTIZED_NULL`: the storage
    plugin's own failure line when a plugin of that name failed to load."""
    if value not in QUANTIZED_NULL:
        from ..errors import InputError

        raise InputError(_REGISTRY.unknown(value, f"{option} must be one of "
                                                  f"{', '.join(QUANTIZED_NULL)}, got {value!r}"))


__all__ = ["FP8_FORMATS", "FP8_TILED", "FLOAT_STORAGES", "QUANTIZED_NULL", "QUANT_FORMATS",
           "STORAGES", "check_quantized_null", "storage_names"]
