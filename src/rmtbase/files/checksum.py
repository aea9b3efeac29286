"""Checksums of cached nulls: what a file's values are and what they were drawn from.

:func:`checksum` is ``sha256:<hex>`` (FIPS 180-4) of every array given, sorted by name (name,
dimensions, shape, the named attributes, then canonical bytes: floats as little-endian float64
with one NaN, integers and booleans as little-endian int64, text as UTF-8 joined by NUL), then
a canonical JSON of the keys the draws were made from. The bytes depend on the values alone,
not on how a file stores them, so any change of a value, a key or a file's identity is caught.
Writers put it in the global attribute :data:`CHECKSUM_ATTR`; readers compare with
:func:`verify` and treat a file without it as unverified."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping

import numpy as np

#: The global attribute that carries a file's checksum.
CHECKSUM_ATTR = "rmtbase_checksum"
_PREFIX = "sha256:"


def _plain(v):
    """A JSON-ready form of an attribute value (numpy scalars and arrays as Python)."""
    if isinstance(v, np.ndarray):
        return [_plain(x) for x in v.tolist()]
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    if isinstance(v, Mapping):
        return {str(k): _plain(x) for k, x in v.items()}
    return v


def _canonical(values) -> tuple[str, bytes]:
    """(kind, bytes) of an array's values, independent of their stored width (module doc)."""
    a = np.asarray(values)
    if a.dtype.kind == "f":
        x = a.astype("<f8")
        return "f", np.where(np.isnan(x), np.nan, x).astype("<f8").tobytes()
    if a.dtype.kind in "iub":
        return "i", a.astype("<i8").tobytes()
    if a.dtype.kind in "mM":
        return "t", a.view("<i8").tobytes()
    return "s", "\x00".join(str(x) for x in a.ravel().tolist()).encode("utf-8")


def keys_json(keys: Mapping) -> str:
    """The canonical JSON of ``keys`` (sorted, no spaces)."""
    return json.dumps({str(k): _plain(v) for k, v in keys.items()}, sort_keys=True,
                      separators=(",", ":"), ensure_ascii=True)


def checksum(arrays: Mapping, keys: Mapping, var_attrs: Mapping | None = None) -> str:
    """``sha256:<hex>`` of ``arrays`` ({name: array, or (dims, array)}), the per-array
    attributes ``var_attrs`` ({name: {attr: value}}) and ``keys`` (module docstring)."""
    h = hashlib.sha256(b"rmtbase-checksum-1\x00")
    for name in sorted(arrays, key=str):
        item = arrays[name]
        dims, values = item if isinstance(item, tuple) else ((), item)
        kind, data = _canonical(values)
        head = {"name": str(name), "dims": [str(d) for d in dims],
                "shape": list(np.shape(values)), "kind": kind,
                "attrs": (var_attrs or {}).get(name, {})}
        h.update(keys_json(head).encode("ascii") + b"\x00")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    h.update(keys_json(dict(keys)).encode("ascii"))
    return _PREFIX + h.hexdigest()


def dataset_checksum(ds, keys: Iterable[str], var_keys: Iterable[str] = ()) -> str:
    """:func:`checksum` of every variable of ``ds`` with its attributes ``var_keys`` and the global
    attributes ``keys``, where present."""
    var_keys = tuple(var_keys)
    arrays = {str(n): (v.dims, v.values) for n, v in ds.variables.items()}
    attrs = {str(n): {k: v.attrs[k] for k in var_keys if k in v.attrs}
             for n, v in ds.variables.items()}
    return checksum(arrays, {k: ds.attrs[k] for k in keys if k in ds.attrs}, attrs)


def verify(stored, computed: str) -> str | None:
    """None where the ``stored`` checksum (an attribute value, or None where the file has
    none) equals ``computed``, else why not, in a few words."""
    if stored is None:
        return "it carries no checksum"
    if str(stored) != computed:
        return "its values or keys do not match its checksum"
    return None


__all__ = ["CHECKSUM_ATTR", "checksum", "dataset_checksum", "keys_json", "verify"]
