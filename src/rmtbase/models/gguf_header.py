"""The header of a GGUF file — metadata and tensor directory — read without touching tensors.

Layout (ggml ``docs/gguf.md``): magic ``GGUF``, version (2 or 3), counts, typed key/value pairs,
one directory entry per tensor (name, dims, GGML type, offset), padding, data.
:func:`read_header` checks that every tensor lies inside the file (a file cut short is refused
before any tensor is read); large arrays are ``None`` in :attr:`GGUFHeader.metadata`."""

from __future__ import annotations

import math
import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path

from ..errors import ModelError
from ._errors import one_line

#: GGUF value types: struct format of each scalar type (8 string, 9 array handled apart).
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
            12: "d"}
_STRING, _ARRAY = 8, 9
#: Arrays longer than this are skipped (their metadata value is None).
KEEP_ARRAY = 1024
#: (elements per block, bytes per block) of each GGML type id: ggml's type traits
#: (``ggml.c``; ``gguf.constants.GGML_QUANT_SIZES`` holds the same, tests/test_gguf_fuzz.py).
BLOCKS = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24),
          8: (32, 34), 9: (32, 40), 10: (256, 84), 11: (256, 110), 12: (256, 144),
          13: (256, 176), 14: (256, 210), 15: (256, 292), 16: (256, 66), 17: (256, 74),
          18: (256, 98), 19: (256, 50), 20: (32, 18), 21: (256, 110), 22: (256, 82),
          23: (256, 136), 24: (1, 1), 25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8),
          29: (256, 56), 30: (1, 2), 34: (256, 54), 35: (256, 66), 39: (32, 17), 40: (64, 36),
          41: (128, 18)}
#: The data section's alignment when ``general.alignment`` is absent (GGUF spec).
DEFAULT_ALIGNMENT = 32


@dataclass(frozen=True)
class TensorInfo:
    """One directory entry: name, shape in numpy order (outermost first), GGML type id, and
    the byte where its data starts in the file (-1 where not known)."""

    name: str
    shape: tuple[int, ...]
    type_id: int
    offset: int = -1


@dataclass(frozen=True)
class GGUFHeader:
    """Metadata ``{key: value}`` (lists for arrays, None for skipped long arrays) and the
    tensor directory of a GGUF file."""

    version: int
    metadata: dict
    tensors: tuple[TensorInfo, ...]
    little_endian: bool = True


def is_regular(path: Path) -> bool:
    """True when ``path`` is a regular file (following links); never opens it."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def is_gguf(path: Path) -> bool:
    """True when ``path`` is a regular file that starts with the GGUF magic bytes (a FIFO or
    device named ``x.gguf`` is not opened, so this never blocks)."""
    if not is_regular(path):
        return False
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"GGUF"
    except OSError:
        return False


class _Cursor:
    """Little- or big-endian reads from a buffered binary file, bounded by its size."""

    def __init__(self, f, size: int, path: Path):
        self.f, self.size, self.path, self.order = f, size, path, "<"

    def take(self, n: int) -> bytes:
        if n < 0 or self.f.tell() + n > self.size:
            raise ModelError(f"GGUF file {self.path} is truncated or corrupt (a field runs "
                             f"past the end of the file)")
        return self.f.read(n)

    def unpack(self, fmt: str):
        return struct.unpack(self.order + fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        raw = self.take(self.unpack("Q"))
        return raw.decode("utf-8", errors="replace")

    def skip(self, n: int) -> None:
        self.take(0)
        if self.f.tell() + n > self.size:
            self.take(n)  # raises
        self.f.seek(n, os.SEEK_CUR)

    def value(self, vtype: int, keep: bool = True):
        if vtype in _SCALARS:
            return self.unpack(_SCALARS[vtype])
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            item, count = self.unpack("I"), self.unpack("Q")
            keep = keep and count <= KEEP_ARRAY
            if item in _SCALARS and not keep:
                self.skip(count * struct.calcsize(_SCALARS[item]))
                return None
            if item == _STRING and not keep:
                for _ in range(count):
                    self.skip(self.unpack("Q"))
                return None
            out = [self.value(item, keep) for _ in range(count)]
            return out if keep else None
        raise ModelError(f"GGUF file {self.path} has a metadata value of unknown type {vtype}")


def read_header(path: Path) -> GGUFHeader:
    """Metadata and tensor directory of GGUF file ``path`` (ModelError, one line, if it is not
    a regular file, not GGUF, or cut short)."""
    path = Path(path)
    if not is_regular(path):
        raise ModelError(f"{path} is not a regular file; give a .gguf file")
    try:
        with open(path, "rb", buffering=1 << 16) as f:
            return _parse(_Cursor(f, os.fstat(f.fileno()).st_size, path))
    except OSError as exc:
        raise ModelError(f"cannot read GGUF file {path}: {one_line(exc)}") from exc


def _parse(c: _Cursor) -> GGUFHeader:
    if c.take(4) != b"GGUF":
        raise ModelError(f"{c.path} is not a GGUF file (no GGUF magic bytes)")
    version = c.unpack("I")
    if version & 0xFFFF == 0 and version:  # written big-endian (gguf-py's --bigendian)
        c.order, version = ">", struct.unpack(">I", struct.pack("<I", version))[0]
    if version not in (2, 3):
        raise ModelError(f"GGUF file {c.path} has version {version}; rmtbase reads versions "
                         "2 and 3")
    n_tensors, n_kv = c.unpack("Q"), c.unpack("Q")
    if n_tensors > c.size or n_kv > c.size:
        raise ModelError(f"GGUF file {c.path} is corrupt (counts {n_tensors} tensors, "
                         f"{n_kv} metadata entries)")
    metadata = {}
    for _ in range(n_kv):
        key = c.string()
        metadata[key] = c.value(c.unpack("I"))
    tensors, offsets = [], []
    for _ in range(n_tensors):
        name = c.string()
        n_dims = c.unpack("I")
        if n_dims > 8:
            raise ModelError(f"GGUF file {c.path} is corrupt (tensor {name!r} has {n_dims} "
                             "dimensions)")
        dims = [c.unpack("Q") for _ in range(n_dims)]
        type_id = c.unpack("I")
        offsets.append(c.unpack("Q"))  # offset into the data section
        tensors.append(TensorInfo(name, tuple(reversed(dims)), type_id))
    start = _check_sizes(c, metadata, tensors, offsets)
    tensors = [TensorInfo(t.name, t.shape, t.type_id, start + o)
               for t, o in zip(tensors, offsets, strict=True)]
    return GGUFHeader(version, metadata, tuple(tensors), c.order != ">")


def _check_sizes(c: _Cursor, metadata: dict, tensors: list, offsets: list) -> int:
    """ModelError (one line, naming the bytes expected and found) unless every tensor of a
    type in :data:`BLOCKS` lies inside the file: the data section starts at the directory's
    end rounded up to ``general.alignment``, a tensor of n elements in blocks of b elements
    of B bytes takes n / b · B bytes from its offset, and its rows are whole blocks. A file cut
    short is refused here, from the header, before any tensor is read. Returns that start."""
    align = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if isinstance(align, bool) or not isinstance(align, int) or align <= 0 \
            or align & (align - 1):
        raise ModelError(f"GGUF file {c.path} is corrupt (general.alignment = {align!r} is not "
                         "a power of two)")
    end = c.f.tell()
    start = end + (-end) % align
    for t, offset in zip(tensors, offsets, strict=True):
        if t.type_id not in BLOCKS:
            continue  # a type rmtbase does not read: gguf_config names it
        block, nbytes = BLOCKS[t.type_id]
        row = t.shape[-1] if t.shape else 1
        if row % block:
            raise ModelError(f"GGUF file {c.path} is corrupt (tensor {t.name!r}: rows of {row} "
                             f"elements are not whole {block}-element blocks)")
        need = start + offset + math.prod(t.shape) // block * nbytes
        if need > c.size:
            raise ModelError(f"GGUF file {c.path} is truncated or corrupt: tensor {t.name!r} "
                             f"ends at byte {need:,} but the file has {c.size:,} bytes")
    return start
