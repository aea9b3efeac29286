"""A model's whole weight matrices as the cells that
:func:`rmtbase.scoring.components.score_components` tests: per (layer, component) the
matrix's statistics (:func:`rmtbase.stats.matrix.matrix_stats`), its storage, the block
quantisation detected on its first rows (:func:`rmtbase.stats.precision.detect_quantisation`),
the storage its null is put through (``quantized_null``: ``"auto"``, ``"none"`` or a block
format) and whether its histogram statistics are left out of the decision (module docstring
of :mod:`rmtbase.scoring.components`, "Storage").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError, ModelError
from ..stats.precision import QUANT_FORMATS

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
    """The format ``w`` was dequantised from, judged on its first rows (any width: a record's
    own ``detector`` needs no 32-entry blocks; the block layouts check their width)."""
    from ..stats.precision import detect_quantisation

    rows = max(1, _DETECT_ENTRIES // w.shape[1])
    return detect_quantisation(w[:rows], storage=storage)


def _read(layers, info, progress, quantized_null) -> list[_Cell]:
    from ..stats.matrix import matrix_stats
    from ..stats.precision import FLOAT_STORAGES, block_size

    if progress:
        from ..progress import counted

        layers = counted(layers, info.n_layers, desc="component statistics", unit="layer")
    cells = []
    for lc in layers:
        for name, w in lc.matrices.items():
            where = f"layer {lc.layer} {name} of {info.name}"
            if not np.all(np.isfinite(w)):
                raise ModelError(f"{where} has non-finite weights")
            if not np.any(w):
                raise ModelError(f"{where} is all zeros; cannot score it")
            storage = lc.storage.get(name, "float32")
            if storage in FLOAT_STORAGES:
                detected = _detect(w, storage)
            else:  # a GGUF block type: the file says it, the values are float32
                detected, storage = storage, "float32"
            est, null_storage = storage, storage
            if detected not in QUANT_FORMATS and quantized_null == "auto":
                pass  # no round trip for this type: float null, histogram statistics left out
            elif detected and quantized_null != "none":
                est = null_storage = detected if quantized_null == "auto" else quantized_null
            elif quantized_null not in ("auto", "none"):
                if w.shape[1] % block_size(quantized_null):
                    raise InputError(f"--quantized-null {quantized_null}: {where} has "
                                     f"{w.shape[1]} columns, not a multiple of "
                                     f"{block_size(quantized_null)}")
                null_storage = quantized_null
            cells.append(_Cell(int(lc.layer), name, tuple(w.shape), storage, null_storage,
                               detected, bool(detected) and (
                                   quantized_null == "none" or null_storage == storage),
                               matrix_stats(w, storage=est)))
    if not cells:
        raise ModelError(f"{info.name} has no matrices to score")
    return cells
