"""Block-scaled FP8 weights as official FP8 checkpoints store them (DeepSeek-V3, Qwen3-FP8).

``config.json`` says ``quantization_config = {"quant_method": "fp8", "weight_block_size":
[128, 128], …}``; each quantised ``nn.Linear`` weight W (out, in) is stored as ``weight``
(``F8_E4M3``, E4M3 "fn": 4 exponent bits, 3 mantissa bits, no infinities, largest 448) beside
``weight_scale_inv`` (``F32``, shape ``(⌈out/128⌉, ⌈in/128⌉)``): tile (i, j) of 128×128
entries (edge tiles may be partial) holds ``q = E4M3(W_tile / s)`` with ``s = max|W_tile| / 448``
and ``weight_scale_inv[i, j] = s``. Reading back multiplies each tile by its ``s``
(DeepSeek-V3 ``weight_dequant``; transformers' ``FP8Linear`` does the same per block).

:func:`dequantize` is what the readers use; :func:`quantize` is the reference writer (numpy
and ``ml_dtypes``; the tests write checkpoints with it). The null's round trip is the same
operation in JAX (:mod:`rmtbase.stats.fp8`).
"""

from __future__ import annotations

import numpy as np

BLOCK = 128
E4M3_MAX = 448.0


def _e4m3():
    import ml_dtypes

    return ml_dtypes.float8_e4m3fn


def tiles(shape) -> tuple[int, int]:
    """``(⌈out/128⌉, ⌈in/128⌉)``: the scale grid of a weight of ``shape`` (out, in)."""
    out, inp = shape
    return -(-out // BLOCK), -(-inp // BLOCK)


def _expand(scale: np.ndarray, shape) -> np.ndarray:
    """Each tile's scale repeated over its entries, cut to ``shape`` (edge tiles partial)."""
    full = np.repeat(np.repeat(scale, BLOCK, axis=0), BLOCK, axis=1)
    return full[: shape[0], : shape[1]]


def quantize(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(q float8_e4m3fn (out, in), scale_inv float32 (⌈out/128⌉, ⌈in/128⌉))`` of a 2-D
    ``w``: s = max|tile|/448 per 128×128 tile, q = E4M3(w/s) rounded to nearest even."""
    w = np.asarray(w, dtype=np.float32)
    r, c = tiles(w.shape)
    pad = np.zeros((r * BLOCK, c * BLOCK), np.float32)
    pad[: w.shape[0], : w.shape[1]] = np.abs(w)
    amax = pad.reshape(r, BLOCK, c, BLOCK).max(axis=(1, 3))
    scale = (amax / np.float32(E4M3_MAX)).astype(np.float32)
    s = _expand(np.where(scale > 0, scale, np.float32(1.0)), w.shape)
    q = np.clip(w / s, -E4M3_MAX, E4M3_MAX).astype(_e4m3())
    return q, scale


def dequantize(raw: np.ndarray, scale_inv: np.ndarray, name: str = "weight") -> np.ndarray:
    """float32 values of the E4M3 tensor ``raw`` (its bytes as uint8 or float8_e4m3fn, 2-D)
    times its 128×128 tile scales ``scale_inv``; ValueError (one line) when the scales do not
    tile the weight in 128×128 blocks or a stored byte is NaN."""
    q = np.asarray(raw).view(_e4m3()) if np.asarray(raw).dtype == np.uint8 else np.asarray(raw)
    if q.ndim != 2:
        raise ValueError(f"FP8 weight {name} has {q.ndim} dimensions; block scales need 2")
    scale = np.asarray(scale_inv, dtype=np.float32)
    if scale.shape != tiles(q.shape):
        raise ValueError(f"FP8 weight {name} {q.shape} has scales {scale.shape}, not the "
                         f"{tiles(q.shape)} of 128x128 blocks (other FP8 layouts are not read)")
    w = q.astype(np.float32)
    if np.isnan(w).any():
        raise ValueError(f"FP8 weight {name} holds NaN bytes")
    return w * _expand(scale, q.shape)


__all__ = ["BLOCK", "E4M3_MAX", "dequantize", "quantize", "tiles"]
