"""A model's whole weight matrices as the cells :func:`rmtbase.scoring.matrices.components.score_components`
tests: per (layer, component) the statistics, storage, detected block quantisation, the storage
its null goes through (``quantized_null``: :func:`matrix_null_storage`) and whether its
histogram statistics are left out."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import InputError, ModelError

_DETECT_ENTRIES = 2**16


@dataclass
class _Cell:
    layer: int
    name: str
    shape: tuple
    storage: str
    null_storage: str
    detected: str | None
    unreliable: bool
    stats: dict


def _detect(w, storage):
    """The record of the format ``w`` was dequantised from (None if none), judged on its first
    rows (any width: a record's own ``detector`` needs no 32-entry blocks; the block layouts
    check their width); ``storage``: the float storage it was read in."""
    from ...stats.detection import detect_record

    rows = max(1, _DETECT_ENTRIES // w.shape[1])
    return detect_record(w[:rows], storage=storage)


def matrix_null_storage(storage, detected, quantized_null: str, cols: int, where: str):
    """(measured storage, null storage) of one matrix stored as float ``storage`` and detected
    as ``detected`` (records or None) under ``quantized_null`` (checked by the caller);
    InputError where a forced format's block does not divide ``cols``."""
    from ...stats.storage import storage_record

    forced = None if quantized_null in ("auto", "none") else storage_record(quantized_null)
    if (detected is None or not detected.is_quantised) and quantized_null == "auto":
        return storage, storage  # no round trip for this type: float null
    if detected is not None and quantized_null != "none":
        return (detected, detected) if forced is None else (forced, forced)
    if forced is None:
        return storage, storage
    if cols % forced.block:
        raise InputError(f"--quantized-null {quantized_null}: {where} has {cols} columns, not "
                         f"a multiple of {forced.block}")
    return storage, forced


def _read(layers, info, progress, quantized_null) -> list[_Cell]:
    """The cells; storages are records here (the readers' names looked up once each), names in
    the cells (as the files spell them)."""
    from ...stats.matrix import matrix_stats
    from ...stats.storage import FLOAT32, storage_record

    if progress:
        from ...progress import counted

        layers = counted(layers, info.n_layers, desc="component statistics", unit="layer")
    cells = []
    for lc in layers:
        for name, w in lc.matrices.items():
            where = f"layer {lc.layer} {name} of {info.name}"
            if not np.all(np.isfinite(w)):
                raise ModelError(f"{where} has non-finite weights")
            if not np.any(w):
                raise ModelError(f"{where} is all zeros; cannot score it")
            storage = storage_record(lc.storage.get(name, "float32"))  # the reader's name
            if storage.is_float:
                detected = _detect(w, storage)
            else:  # a GGUF block type: the file says it, the values are float32
                detected, storage = storage, FLOAT32
            est, null_storage = matrix_null_storage(storage, detected, quantized_null,
                                                    w.shape[1], where)
            cells.append(_Cell(int(lc.layer), name, tuple(w.shape), storage.name,
                               null_storage.name, detected and detected.name,
                               detected is not None and (
                                   quantized_null == "none" or null_storage == storage),
                               matrix_stats(w, storage=est.name)))
    if not cells:
        raise ModelError(f"{info.name} has no matrices to score")
    return cells
