"""The header of a GGUF file — metadata and tensor directory — read without touching tensors.

Layout (ggml ``docs/gguf.md``): magic ``GGUF``, version (2 or 3), tensor and metadata counts,
typed key/value pairs, one directory entry per tensor (name, dims, GGML type, offset), padding,
data. :func:`read_header` parses everything before the data; large arrays (a vocabulary) are
``None`` in :attr:`GGUFHeader.metadata`."""

from __future__ import annotations

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


@dataclass(frozen=True)
class TensorInfo:
    """One directory entry: name, shape in numpy order (outermost first), GGML type id."""

    name: str
    shape: tuple[int, ...]
    type_id: int


@dataclass(frozen=True)
class GGUFHeader:
    """Metadata ``{key: value}`` (lists for arrays, None for skipped long arrays) and the
    tensor directory of a GGUF file."""

    version: int
    metadata: dict
    tensors: tuple[TensorInfo, ...]


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
    tensors = []
    for _ in range(n_tensors):
        name = c.string()
        n_dims = c.unpack("I")
        if n_dims > 8:
            raise ModelError(f"GGUF file {c.path} is corrupt (tensor {name!r} has {n_dims} "
                             "dimensions)")
        dims = [c.unpack("Q") for _ in range(n_dims)]
        type_id = c.unpack("I")
        c.unpack("Q")  # offset into the data section
        tensors.append(TensorInfo(name, tuple(reversed(dims)), type_id))
    return GGUFHeader(version, metadata, tuple(tensors))
