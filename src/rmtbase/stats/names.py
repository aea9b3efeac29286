"""Storage names by family, read from :mod:`rmtbase.stats.storage`'s registry when used, with
no JAX import (the command line builds its choices from them): :class:`storage_names`."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .storage import Storage, records, registered


class storage_names(Sequence):  # noqa: N801 - reads as the tuple it stands for
    """The names of the registered records satisfying ``keep``, in registry order, read when used
    (a tuple made from it is fixed when made)."""

    def __init__(self, keep: Callable[[Storage], bool] = lambda s: True):
        self._keep = keep

    def _now(self) -> tuple[str, ...]:
        return tuple(s.name for s in records() if self._keep(s))

    def __getitem__(self, i):
        return self._now()[i]

    def __len__(self) -> int:
        return len(self._now())

    def __iter__(self):
        return iter(self._now())

    def __contains__(self, name) -> bool:
        """A name, or a record: the registered record of its name (so a record that reached
        a name list is not silently outside it)."""
        if isinstance(name, Storage):
            return registered(name.name) == name and self._keep(name)
        record = registered(name) if isinstance(name, str) else None
        return record is not None and self._keep(record)

    def __add__(self, other) -> tuple:
        return self._now() + tuple(other)

    def __radd__(self, other) -> tuple:
        return tuple(other) + self._now()

    def __eq__(self, other) -> bool:
        return self._now() == tuple(other) if isinstance(other, Sequence) else NotImplemented

    def __hash__(self):
        return hash(self._now())

    def __repr__(self) -> str:
        return repr(self._now())


FLOAT_STORAGES = storage_names(lambda s: s.is_float)
#: FP8 of official FP8 checkpoints (:mod:`rmtbase.stats.fp8`): E4M3 and E5M2 in 128×128 tiles,
#: E4M3 with one scale per output channel (compressed-tensors).
FP8_FORMATS = storage_names(lambda s: s.family == "fp8")
#: FP8 storages whose 128-row tiles span several heads (:func:`rmtbase.stats.precision.null_rows`).
FP8_TILED = storage_names(lambda s: s.family == "fp8" and s.tile_rows > 0)
QUANT_FORMATS = storage_names(lambda s: s.is_quantised)
STORAGES = storage_names()


class _Options(storage_names):
    """``("auto", "none", *QUANT_FORMATS)`` read when used (``quantized_null``'s choices)."""

    def __init__(self):
        super().__init__(lambda s: s.is_quantised)

    def _now(self) -> tuple[str, ...]:
        return ("auto", "none", *super()._now())

    def __contains__(self, name) -> bool:
        return name in ("auto", "none") or super().__contains__(name)


#: The values of ``quantized_null=`` / ``--quantized-null``: "auto", "none" or a quantised
#: format, the formats read from the registry when used (one registered later is in it)
QUANTIZED_NULL = _Options()

__all__ = ["FP8_FORMATS", "FP8_TILED", "FLOAT_STORAGES", "QUANTIZED_NULL", "QUANT_FORMATS",
           "STORAGES", "storage_names"]
