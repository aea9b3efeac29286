"""An element statistic's estimator as a record: its per-tile sufficient statistics and their merge.

Element statistics combine over any split into tiles. An :class:`Estimator` has:

- ``accumulators``: one :class:`Accumulator` per per-tile value, with its merge (``"sum"``,
  ``"min"`` or ``"max"``);
- ``range`` (optional, pass 1: ``(w, storage) -> {acc: value}``) and ``count`` (pass 2:
  ``(w, geo, n, storage, side) -> {acc: value}``), traceable, over one flat tile; ``geo`` is
  the fused geometry (:func:`rmtbase.stats.fused.range_finish`);
- ``finish``: ``(acc, geo, n, trims, storage) -> {statistic: value}``;
- ``statistics``: the names it computes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import InputError

__all__ = ["Accumulator", "Estimator", "accumulators", "add_host", "declared", "merge",
           "to_device"]

_COMBINES = ("sum", "min", "max")


@dataclass(frozen=True)
class Accumulator:
    """One per-tile value (a scalar or a histogram) and how two tiles' values combine."""

    name: str
    combine: str = "sum"

    def __post_init__(self):
        if self.combine not in _COMBINES:
            raise InputError(f"accumulator {self.name!r}: combine must be sum, min or max, got "
                             f"{self.combine!r}")

    def merge(self, a, b, xp=jnp):
        """``a`` and ``b`` combined (``xp``: jax.numpy in the compiled passes, numpy on the
        host)."""
        if self.combine == "min":
            return xp.minimum(a, b)
        if self.combine == "max":
            return xp.maximum(a, b)
        return a + b


@dataclass(frozen=True)
class Estimator:
    """The estimator of one or more element statistics (module docstring). Frozen and hashable:
    it keys the tile engine's compiled functions."""

    name: str
    #: the element statistics it computes (the records that may point to it)
    statistics: tuple[str, ...]
    accumulators: tuple[Accumulator, ...]
    count: Callable
    finish: Callable
    range: Callable | None = None

    def own(self, acc: dict) -> dict:
        """This estimator's accumulators out of the combined ``acc`` (those present)."""
        return {a.name: acc[a.name] for a in self.accumulators if a.name in acc}


def accumulators(estimators) -> dict[str, Accumulator]:
    """``{name: Accumulator}`` of ``estimators``; InputError if two declare the same name."""
    out: dict[str, Accumulator] = {}
    for est in estimators:
        for a in est.accumulators:
            if a.name in out:
                raise InputError(f"accumulator {a.name!r} of estimator {est.name!r} is declared "
                                 "twice")
            out[a.name] = a
    return out


def _record(records: dict, key: str) -> Accumulator:
    if key not in records:
        raise InputError(f"a tile yielded {key!r}, which no estimator declares as an accumulator")
    return records[key]


def declared(records: dict, part: dict) -> dict:
    """``part`` (one tile's accumulators) unchanged; InputError if a value has no record."""
    for key in part:
        _record(records, key)
    return part


def merge(records: dict, a: dict, b: dict) -> dict:
    """Two tiles' accumulators (traceable) combined, each as its record says."""
    return {k: _record(records, k).merge(a[k], b[k]) for k in a}


def add_host(records: dict, total: dict | None, part: dict) -> dict:
    """One tile's accumulators added into the running host totals (numpy: floats as float64,
    counts as int64), each combined as its record says."""
    out = {}
    for key, p in part.items():
        p = np.asarray(p)
        p = p.astype(np.float64) if p.dtype.kind == "f" else p.astype(np.int64)
        out[key] = p if total is None else _record(records, key).merge(total[key], p, np)
    return out


def to_device(acc: dict, dtype) -> dict:
    """Host totals back to the matrix's float dtype (counts to JAX's default integer)."""
    int_t = jax.dtypes.canonicalize_dtype(np.int64)
    return jax.tree_util.tree_map(
        lambda a: jnp.asarray(a, dtype=dtype if a.dtype.kind == "f" else int_t), acc)
