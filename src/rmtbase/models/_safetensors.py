"""A minimal safetensors reader: the header, and one tensor's bytes by a positioned read.

Format (https://huggingface.co/docs/safetensors): an 8-byte little-endian header length n,
n bytes of JSON ``{name: {"dtype", "shape", "data_offsets": [begin, end]}, ...}``, then each
tensor's bytes at ``8 + n + begin`` (row-major, little-endian). bfloat16 is widened exactly;
every header field is validated before any tensor is used."""

from __future__ import annotations

import json
import math
import os
import struct

import numpy as np

#: Bytes per element of the dtypes a tensor may have (others are named but not read here).
ITEMSIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
            "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1, "U16": 2, "U32": 4, "U64": 8}
_NUMPY = {"F64": np.float64, "F32": np.float32, "F16": np.float16}
_MAX_HEADER = 100 * 2**20


class SafetensorsError(ValueError):
    """The file is not a readable safetensors file (the message says why)."""


def read_header(path) -> tuple[dict, int]:
    """({name: {"dtype", "shape", "data_offsets"}}, data offset) of ``path``, checked: every
    tensor's byte range lies in the file and matches its dtype and shape; ``path`` may be remote."""
    remote = _is_remote(path)
    if remote:
        head = path.read_range(0, 8)
        size = path.size
    else:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(8)
    if len(head) < 8:
        raise SafetensorsError("file shorter than its 8-byte header length")
    (n,) = struct.unpack("<Q", head)
    if n > min(_MAX_HEADER, size - 8):
        raise SafetensorsError(f"header length {n} does not fit the file ({size} bytes)")
    if remote:
        raw = path.read_range(8, 8 + n)
    else:
        with open(path, "rb") as f:
            f.seek(8)
            raw = f.read(n)
    try:
        header = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise SafetensorsError(f"header is not JSON ({type(exc).__name__})") from None
    if not isinstance(header, dict):
        raise SafetensorsError("header is not a JSON object")
    start = 8 + n
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (b, e) = info["dtype"], info["shape"], info["data_offsets"]
            ok = (isinstance(dtype, str) and isinstance(shape, list)
                  and all(type(s) is int and s >= 0 for s in shape)
                  and type(b) is int and type(e) is int and 0 <= b <= e)
        except (KeyError, TypeError, ValueError):
            ok = False
        if not ok:
            raise SafetensorsError(f"bad header entry for tensor {name!r}")
        if start + e > size:
            raise SafetensorsError(f"tensor {name!r} ends at byte {start + e:,} but the file "
                                   f"has {size:,} bytes (truncated?)")
        if dtype in ITEMSIZE and e - b != math.prod(shape) * ITEMSIZE[dtype]:
            raise SafetensorsError(f"tensor {name!r} spans {e - b:,} bytes but its shape "
                                   f"{list(shape)} of {dtype} needs "
                                   f"{math.prod(shape) * ITEMSIZE[dtype]:,}")
        tensors[name] = {"dtype": dtype, "shape": tuple(shape), "offsets": (start + b, start + e)}
    return tensors, start


def read_float32(path, info: dict) -> np.ndarray:
    """The tensor described by ``info`` (a :func:`read_header` entry; F64, F32, F16 or BF16)
    as a float32 numpy array; SafetensorsError for another dtype."""
    dtype = info["dtype"]
    if dtype != "BF16" and dtype not in _NUMPY:
        raise SafetensorsError(f"tensor dtype {str(dtype)[:20]!r} is not a float this reader "
                               "widens (F64, F32, F16, BF16)")
    buf = _read(path, info)
    if dtype == "BF16":
        raw = np.frombuffer(buf, dtype="<u2")
        out = (raw.astype(np.uint32) << 16).view(np.float32)
    else:
        out = np.frombuffer(buf, dtype=np.dtype(_NUMPY[dtype]).newbyteorder("<"))
        with np.errstate(over="ignore"):  # F64 beyond float32 is inf: check_finite names it
            out = out.astype(np.float32, copy=False)
    return out.reshape(info["shape"])


def read_uint8(path, info: dict) -> np.ndarray:
    """The bytes of a one-byte tensor (``F8_E4M3``, ``U8`` …) as uint8 of its shape."""
    return np.frombuffer(_read(path, info), dtype=np.uint8).reshape(info["shape"])


def _is_remote(path) -> bool:
    return hasattr(path, "read_range")


def _read(path, info: dict) -> bytearray:
    """The raw bytes of the tensor described by ``info`` (positioned reads, or one byte-range
    read of a remote file)."""
    lo, hi = info["offsets"]
    if _is_remote(path):
        buf = bytearray(path.read_range(lo, hi))
        if len(buf) != hi - lo:
            raise SafetensorsError("file ended inside a tensor (truncated?)")
        return buf
    fd = os.open(path, os.O_RDONLY)
    try:
        buf = bytearray(hi - lo)
        view, got = memoryview(buf), 0
        while got < len(buf):
            k = os.preadv(fd, [view[got:]], lo + got) if hasattr(os, "preadv") else \
                _pread_into(fd, view[got:], lo + got)
            if k <= 0:
                raise SafetensorsError("file ended inside a tensor (truncated?)")
            got += k
    finally:
        os.close(fd)
    return buf


def _pread_into(fd: int, view: memoryview, offset: int) -> int:
    data = os.pread(fd, len(view), offset)
    view[:len(data)] = data
    return len(data)


__all__ = ["ITEMSIZE", "SafetensorsError", "read_float32", "read_header", "read_uint8"]
