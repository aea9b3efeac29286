"""How the report names the storage W_Q/W_K were read from and the null was drawn at.

GGUF block types in ggml's spelling (``Q4_K``), others as the score names them
(``bfloat16``); mixed layers listed with counts (``Q5_0 (26 layers), Q8_0 (8 layers)``)."""

from __future__ import annotations

import re

import numpy as np
import xarray as xr


def storage_name(label) -> str:
    """A storage as users know it (GGUF types in ggml's spelling; differing W_Q, W_K joined by
    "+")."""
    parts = str(label).split("+")
    return "+".join(p.upper() if re.fullmatch(r"(q|iq|tq)\d.*", p) else p for p in parts)


def _per_layer(ds: xr.Dataset, var: str, attr: str) -> list[str]:
    """One label per scored layer: the variable ``var`` when the score keeps one (its layers
    differ), else the attribute ``attr`` for every layer."""
    if var in ds:
        return [str(x) for x in np.asarray(ds[var].values).ravel()]
    n = int(ds.sizes.get("layer", 1))
    return [str(ds.attrs.get(attr, "") or "")] * n


def _counted(labels: list[str]) -> str:
    """``Q4_1`` when every layer has it, else ``Q5_0 (26 layers), Q8_0 (8 layers)`` in order
    of first appearance."""
    counts: dict[str, int] = {}
    for x in labels:
        counts[x] = counts.get(x, 0) + 1
    if len(counts) == 1:
        return next(iter(counts))
    return ", ".join(f"{x} ({n} layer{'s' if n != 1 else ''})" for x, n in counts.items())


def storage_read(ds: xr.Dataset) -> str:
    """What W_Q/W_K were read from per layer (quantisation named or detected, else float dtype),
    several with their layer counts."""
    a = ds.attrs
    floats = str(a.get("storage_dtypes", a.get("storage_dtype", "float32")) or "float32")
    quant = _per_layer(ds, "layer_quantisation", "quantisation")
    if any(re.search(r"\(layers? ", q) for q in quant):  # an older file: by_layers' own text
        return ", ".join(storage_name(x) for x in quant[0].split(", "))
    return _counted([floats if q in ("", "none") else storage_name(q) for q in quant])


def null_storage_read(ds: xr.Dataset) -> str:
    """The storage the null was drawn at, named as :func:`storage_read` names the weights'."""
    a = ds.attrs
    st = str(a.get("storage_dtype", "float32") or "float32")
    ns = _per_layer(ds, "layer_null_storage", "null_storage")
    if any(re.search(r"\(layers? ", x) for x in ns):
        return ", ".join(storage_name(x) for x in ns[0].split(", "))
    return _counted([storage_name(x or st) for x in ns])


def storage_phrase(ds: xr.Dataset) -> str:
    """``stored Q4_1, null Q4_1``: the storage read and the null drawn for it, as the first
    line, the summary, report.html and ``--json`` name them."""
    return f"stored {storage_read(ds)}, null {null_storage_read(ds)}"
