"""FP8 weights as FP8 checkpoints store them: 128×128 block scales, or one scale per row.

**Block FP8** (DeepSeek-V3, Qwen3-FP8): ``config.json`` says ``quantization_config =
{"quant_method": "fp8", "weight_block_size": [128, 128], …}``; each quantised ``nn.Linear``
weight W (out, in) is stored as ``weight`` in an 8-bit float — ``F8_E4M3`` (E4M3 "fn": 4
exponent bits, 3 mantissa bits, no infinities, largest 448) or ``F8_E5M2`` (IEEE-like: 5
exponent bits, 2 mantissa bits, largest finite 57344) — beside ``weight_scale_inv`` (``F32``,
shape ``(⌈out/128⌉, ⌈in/128⌉)``): tile (i, j) of 128×128 entries (edge tiles may be partial)
holds ``q = FP8(W_tile / s)`` with ``s = max|W_tile| / FP8_MAX`` and ``weight_scale_inv[i, j]
= s``. Reading back multiplies each tile by its ``s`` (DeepSeek-V3 ``weight_dequant``;
transformers' ``Fp8Dequantize`` casts the weight to float32, whatever its 8-bit format, and
multiplies by the tile's scale).

**Per-channel FP8** (compressed-tensors ``float-quantized``, llm-compressor's ``FP8`` /
``FP8_DYNAMIC`` schemes: ``quant_method = "compressed-tensors"``, weights ``strategy:
"channel"``): ``weight`` in ``F8_E4M3`` beside ``weight_scale`` of shape (out, 1), one scale
per output row, ``s_r = max|W_r| / 448`` (compressed-tensors' symmetric ``calculate_qparams``:
max|x| / ((q_max − q_min)/2)), ``q = E4M3(clamp(W_r/s_r, ±448))``; value ``q · s_r``
(compressed-tensors' ``dequantize``).

:func:`dequantize` / :func:`dequantize_rows` are what the readers use (refusing a scale that
is negative, not finite, or 0 over nonzero values); :func:`check_config` refuses a
``weight_block_size`` other than [128, 128] (below 1, malformed, or another size) from the
config alone, before any tensor; :func:`quantize` / :func:`quantize_rows` are the reference
writers (numpy and ``ml_dtypes``, round to nearest even; the tests write checkpoints with
them). The null's round trips are the same operations in JAX (:mod:`rmtbase.stats.fp8`).
"""

from __future__ import annotations

import numpy as np

from ..stats.storage import records

BLOCK = 128
E4M3_MAX = 448.0
E5M2_MAX = 57344.0
#: FP8 element formats: name -> (largest finite value, storage name of block scales), from
#: the storage records (:mod:`rmtbase.stats.storage`).
FORMATS = {s.element: (s.spec[0], s.name) for s in records()
           if s.family == "fp8" and s.tile_rows}
#: safetensors dtype of each format.
DTYPES = {"F8_E4M3": "e4m3", "F8_E5M2": "e5m2"}
#: Storage name of per-output-channel E4M3 (compressed-tensors).
CHANNEL_STORAGE = next(s.name for s in records()
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
    """ValueError (one line) unless every scale is finite and > 0, or 0 over a tile (row)
    whose stored values are all 0 (what :func:`quantize` writes for an all-zero tile): a
    negative or zero scale over nonzero bytes is no scale a writer makes."""
    bad = ~np.isfinite(scale) | (scale < 0) | ((scale == 0) & (amax > 0))
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        at = first if what == "tile" else first[0]
        raise ValueError(f"FP8 scale {scale_name} holds {float(scale[first]):g} at {what} {at} "
                         f"({int(bad.sum())} such); scales must be finite and > 0 (0 only "
                         f"over an all-zero {what})")


def dequantize(raw: np.ndarray, scale_inv: np.ndarray, name: str = "weight",
               fmt: str = "e4m3", scale_name: str | None = None) -> np.ndarray:
    """float32 values of the FP8 tensor ``raw`` (its bytes as uint8, or the ml_dtypes array;
    2-D; element format ``fmt``) times its 128×128 tile scales ``scale_inv``; ValueError (one
    line) when the scales do not tile the weight in 128×128 blocks, a scale is negative, not
    finite, or 0 over a tile with nonzero values, or a stored byte is NaN."""
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
    """float32 values of the E4M3 tensor ``raw`` (out, in) times its per-row ``scale``
    (out, 1); ValueError (one line) for any other scale shape (per-tensor, per-group) or a
    scale that is negative, not finite, or 0 over a row with nonzero values."""
    s = np.asarray(scale, dtype=np.float32)
    w = _values(raw, "e4m3", name)
    if s.shape != (w.shape[0], 1):
        raise ValueError(f"FP8 weight {name} {w.shape} has weight_scale {s.shape}, not the "
                         f"({w.shape[0]}, 1) of one scale per output channel (per-tensor and "
                         "per-group FP8 scales are not read)")
    _check_scales(s, np.abs(w).max(axis=1, keepdims=True), scale_name or f"{name}_scale", "row")
    return w * s


def check_config(cfg: dict, where: str) -> None:
    """ModelError (one line, naming ``where`` and the value) for a block-FP8
    ``quantization_config`` (``quant_method = "fp8"``) whose ``weight_block_size`` is not two
    integers ≥ 1, or is not the [128, 128] this reader and the null use (another size would
    read its scales against the wrong tiles). Absent: transformers' default, [128, 128]."""
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
