"""FP8 weights as FP8 checkpoints store them: 128×128 block scales, or one scale per row.

**Block FP8** (``quant_method = "fp8"``, ``weight_block_size = [128, 128]``): W (out, in) is
stored as ``weight`` in ``F8_E4M3`` (max 448) or ``F8_E5M2`` (max 57344) beside
``weight_scale_inv`` (``F32``, ``(⌈out/128⌉, ⌈in/128⌉)``): tile (i, j) holds
``q = FP8(W_tile / s)``, ``s = max|W_tile| / FP8_MAX = weight_scale_inv[i, j]``; value ``q · s``.

**Per-channel FP8** (compressed-tensors ``float-quantized``, ``strategy: "channel"``):
``weight`` in ``F8_E4M3`` beside ``weight_scale`` (out, 1), ``s_r = max|W_r| / 448``,
``q = E4M3(clamp(W_r/s_r, ±448))``; the value is ``q · s_r``.
:func:`dequantize` / :func:`dequantize_rows` refuse a negative, non-finite or zero scale;
:func:`quantize` / :func:`quantize_rows` are the reference writers (round to nearest even)."""

from __future__ import annotations

import numpy as np

from ..stats.storage import shipped_records

BLOCK = 128
E4M3_MAX = 448.0
E5M2_MAX = 57344.0
#: FP8 element formats: name -> (largest finite value, storage name of block scales), from
#: the shipped storage records (:mod:`rmtbase.stats.storage`; no plugin is loaded at import).
FORMATS = {s.element: (s.spec[0], s.name) for s in shipped_records()
           if s.family == "fp8" and s.tile_rows}
#: safetensors dtype of each format.
DTYPES = {"F8_E4M3": "e4m3", "F8_E5M2": "e5m2"}
#: Storage name of per-output-channel E4M3 (compressed-tensors).
CHANNEL_STORAGE = next(s.name for s in shipped_records()
                       if s.family == "fp8" and not s.tile_rows and s.element == "e4m3")


def _dtype(fmt: str):
    import ml_dtypes

    return {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}[fmt]


def tiles(shape) -> tuple[int, int]:
    """``(⌈out/128⌉, ⌈in/128⌉)``: the scale grid of a weight of ``shape`` (out, in)."""
    out, inp = shape
    return -(-out // BLOCK), -(-inp // BLOCK)


def _expand(scale: np.ndarray, shape) -> np.ndarray:
    """Each tile's scale repeated over its entries, cut to ``shape`` (edge tiles partial)."""
    full = np.repeat(np.repeat(scale, BLOCK, axis=0), BLOCK, axis=1)
    return full[: shape[0], : shape[1]]


def _cast(x: np.ndarray, fmt: str) -> np.ndarray:
    top = np.float32(FORMATS[fmt][0])
    return np.clip(x, -top, top).astype(_dtype(fmt))


def quantize(w: np.ndarray, fmt: str = "e4m3") -> tuple[np.ndarray, np.ndarray]:
    """``(q (out, in) in ``fmt``, scale_inv float32 (⌈out/128⌉, ⌈in/128⌉))`` of a 2-D ``w``:
    s = max|tile|/FP8_MAX per 128×128 tile, q = FP8(w/s) rounded to nearest even."""
    w = np.asarray(w, dtype=np.float32)
    r, c = tiles(w.shape)
    pad = np.zeros((r * BLOCK, c * BLOCK), np.float32)
    pad[: w.shape[0], : w.shape[1]] = np.abs(w)
    amax = pad.reshape(r, BLOCK, c, BLOCK).max(axis=(1, 3))
    scale = (amax / np.float32(FORMATS[fmt][0])).astype(np.float32)
    s = _expand(np.where(scale > 0, scale, np.float32(1.0)), w.shape)
    return _cast(w / s, fmt), scale


def quantize_rows(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(q float8_e4m3fn (out, in), scale float32 (out, 1))``: per-row s = max|row|/448,
    q = E4M3(w/s) rounded to nearest even (compressed-tensors' channel strategy)."""
    w = np.asarray(w, dtype=np.float32)
    scale = (np.abs(w).max(axis=1, keepdims=True) / np.float32(E4M3_MAX)).astype(np.float32)
    return _cast(w / np.where(scale > 0, scale, np.float32(1.0)), "e4m3"), scale


def _values(raw, fmt: str, name: str) -> np.ndarray:
    raw = np.asarray(raw)
    q = raw.view(_dtype(fmt)) if raw.dtype == np.uint8 else raw
    if q.ndim != 2:
        raise ValueError(f"FP8 weight {name} has {q.ndim} dimensions; its scales need 2")
    w = q.astype(np.float32)
    if not np.isfinite(w).all():
        raise ValueError(f"FP8 weight {name} holds NaN or infinite bytes")
    return w


def _check_scales(scale: np.ndarray, amax: np.ndarray, scale_name: str, what: str) -> None:
    """ValueError (one line) unless every scale is finite and > 0, or 0 over an all-zero tile
    (row)."""
    bad = ~np.isfinite(scale) | (scale < 0) | ((scale == 0) & (amax > 0))
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        at = first if what == "tile" else first[0]
        raise ValueError(f"FP8 scale {scale_name} holds {float(scale[first]):g} at {what} {at} "
                         f"({int(bad.sum())} such); scales must be finite and > 0 (0 only "
                         f"over an all-zero {what})")


def dequantize(raw: np.ndarray, scale_inv: np.ndarray, name: str = "weight",
               fmt: str = "e4m3", scale_name: str | None = None) -> np.ndarray:
    """float32 values of the 2-D FP8 tensor ``raw`` (format ``fmt``) times its 128×128 tile scales
    ``scale_inv``; ValueError for scales not tiling the weight, a bad scale or a NaN byte."""
    scale = np.asarray(scale_inv, dtype=np.float32)
    w = _values(raw, fmt, name)
    if scale.shape != tiles(w.shape):
        raise ValueError(f"FP8 weight {name} {w.shape} has scales {scale.shape}, not the "
                         f"{tiles(w.shape)} of 128x128 blocks (other FP8 layouts are not read)")
    r, c = scale.shape
    pad = np.zeros((r * BLOCK, c * BLOCK), np.float32)
    pad[: w.shape[0], : w.shape[1]] = np.abs(w)
    _check_scales(scale, pad.reshape(r, BLOCK, c, BLOCK).max(axis=(1, 3)),
                  scale_name or f"{name}_scale_inv", "tile")
    return w * _expand(scale, w.shape)


def dequantize_rows(raw: np.ndarray, scale: np.ndarray, name: str = "weight",
                    scale_name: str | None = None) -> np.ndarray:
    """float32 values of the E4M3 tensor ``raw`` (out, in) times its per-row ``scale`` (out, 1);
    ValueError (one line) for any other scale shape or a bad scale."""
    s = np.asarray(scale, dtype=np.float32)
    w = _values(raw, "e4m3", name)
    if s.shape != (w.shape[0], 1):
        raise ValueError(f"FP8 weight {name} {w.shape} has weight_scale {s.shape}, not the "
                         f"({w.shape[0]}, 1) of one scale per output channel (per-tensor and "
                         "per-group FP8 scales are not read)")
    _check_scales(s, np.abs(w).max(axis=1, keepdims=True), scale_name or f"{name}_scale", "row")
    return w * s


def check_config(cfg: dict, where: str) -> None:
    """ModelError (one line, naming ``where`` and the value) for a block-FP8 ``quantization_config``
    whose ``weight_block_size`` is not [128, 128] (absent: [128, 128])."""
    import json

    from ..errors import ModelError

    qc = cfg.get("quantization_config") if isinstance(cfg, dict) else None
    if not isinstance(qc, dict) or qc.get("quant_method") != "fp8" \
            or "weight_block_size" not in qc:
        return
    size = qc["weight_block_size"]
    shown = json.dumps(size)
    if not (isinstance(size, list) and len(size) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in size)):
        raise ModelError(f"{where}: quantization_config.weight_block_size {shown} is not two "
                         "integers >= 1")
    if size != [BLOCK, BLOCK]:
        raise ModelError(f"{where}: quantization_config.weight_block_size {shown}; rmtbase "
                         f"reads block FP8 with {BLOCK}x{BLOCK} blocks only")


__all__ = ["BLOCK", "CHANNEL_STORAGE", "DTYPES", "E4M3_MAX", "E5M2_MAX", "FORMATS",
           "check_config", "dequantize", "dequantize_rows", "quantize", "quantize_rows", "tiles"]
