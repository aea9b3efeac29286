"""Storage names, with no heavy import (the command line's choices are built from them before
JAX loads): the lists of :mod:`rmtbase.stats.storage`'s records by family, read from its
registry when used (a record registered later is in them)."""

from .storage import storage_names

FLOAT_STORAGES = storage_names(lambda s: s.is_float)
#: FP8 of official FP8 checkpoints (:mod:`rmtbase.stats.fp8`): E4M3 and E5M2 in 128×128 tiles,
#: E4M3 with one scale per output channel (compressed-tensors).
FP8_FORMATS = storage_names(lambda s: s.family == "fp8")
#: FP8 storages whose 128-row tiles span several heads (:func:`rmtbase.stats.precision.null_rows`).
FP8_TILED = storage_names(lambda s: s.family == "fp8" and s.tile_rows > 0)
QUANT_FORMATS = storage_names(lambda s: s.is_quantised)
STORAGES = storage_names()

__all__ = ["FP8_FORMATS", "FP8_TILED", "FLOAT_STORAGES", "QUANT_FORMATS", "STORAGES"]
