"""GGUF files read directly: a reader beside safetensors, mapped onto the Hugging Face layout.

:func:`gguf_config` builds a config dict from the header alone (:mod:`.gguf_header`), refusing
an unscorable architecture or tensor type in one line before any tensor is read.
:class:`GGUFWeights` serves tensors under the Hugging Face names, dequantised to float32
(out, in), with llama.cpp's conversions undone (:mod:`.gguf_arch`). Each tensor's GGML type is
its storage (``"q4_k"`` …, :data:`GGUF_TYPES`); other types (IQ*, TQ*, MXFP4 …) are refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import ModelError
from ..stats.storage import gguf_storage, records, shipped_records
from ._errors import one_line
from ._reader import TensorReader, check_finite
from .gguf_arch import SPECS, hf_config, name_map, regroup_falcon, spec_of, unpermute
from .gguf_header import GGUFHeader, read_header

__all__ = ["GGUF_TYPES", "GGUFWeights", "check_gguf_tokenizer", "gguf_config",
           "gguf_context_length", "gguf_reader"]

#: GGML tensor types read, and the storage name each is recorded as (the storage records'
#: ``gguf`` names of the shipped ones, :mod:`rmtbase.stats.storage`, no plugin loaded at import;
#: the readers ask the registry itself).
GGUF_TYPES = {s.gguf: s.name for s in shipped_records() if s.gguf}


def _need_gguf():
    try:
        import gguf
    except ImportError as exc:
        raise ModelError("reading a .gguf file needs the gguf package: pip install -e '.[gguf]' "
                         "in the rmtbase clone (or pip install gguf)") from exc
    return gguf


def gguf_reader(path: Path):
    """A ``gguf.GGUFReader`` of ``path``; ModelError in one line if it cannot be read."""
    gguf = _need_gguf()
    try:
        return gguf.GGUFReader(str(path))
    except Exception as exc:
        raise ModelError(f"cannot read GGUF file {path}: {one_line(exc)}") from exc


def _type_name(type_id: int) -> str:
    """The GGML type name of ``type_id`` (``"Q4_1"``; ``"#N"`` for an id ``gguf`` lacks)."""
    gguf = _need_gguf()
    try:
        return gguf.GGMLQuantizationType(type_id).name
    except ValueError:
        return f"#{type_id}"


def _n_layers(cfg: dict) -> int:
    return int(cfg[SPECS[cfg["gguf_architecture"]].names[3]])


def gguf_config(path: Path, header: GGUFHeader | None = None) -> dict:
    """A Hugging Face style config dict of GGUF file ``path``, from its header alone; ModelError
    for an architecture outside :data:`SPECS` or a tensor type outside :data:`GGUF_TYPES`."""
    _need_gguf()
    header = header or read_header(path)
    cfg = hf_config(header.metadata, path)
    names = {t.name for t in header.tensors}
    flag = SPECS[cfg["gguf_architecture"]].qk_norm_flag
    if flag:  # StableLM's qk_layernorm, Cohere's use_qk_norm: present when the norms are
        cfg[flag] = "blk.0.attn_q_norm.weight" in names
    from .registry import ADAPTERS

    n_layers = _n_layers(cfg)
    if n_layers > len(header.tensors):  # a damaged count: not a name map of 2**31 layers
        raise ModelError(f"GGUF file {path} is corrupt: its header counts {n_layers:,} layers "
                         f"but holds {len(header.tensors):,} tensors")
    mapped = set(name_map(cfg, ADAPTERS[cfg["model_type"]], n_layers).values())
    for t in header.tensors:
        if t.name not in mapped:
            continue
        kind = _type_name(t.type_id)
        if gguf_storage(kind) is None:
            read = ", ".join(s.gguf for s in records() if s.gguf)
            raise ModelError(f"tensor {t.name!r} in {path} is stored as GGML type {kind}, which "
                             f"rmtbase does not read (it reads {read})")
    return cfg


#: Metadata keys a GGUF file's tokenizer is built from (``gguf.Keys.Tokenizer``).
TOKENIZER_KEYS = ("tokenizer.ggml.model", "tokenizer.ggml.tokens")


def check_gguf_tokenizer(path: Path, header: GGUFHeader | None = None) -> None:
    """One-line ModelError unless GGUF file ``path`` carries a tokenizer ``transformers`` builds
    (:data:`TOKENIZER_KEYS`; header only)."""
    header = header or read_header(path)
    meta = header.metadata
    missing = [k for k in TOKENIZER_KEYS if k not in meta]
    if missing:
        raise ModelError(f"no tokenizer in {path}: its header has no {' or '.join(missing)}, "
                         "and the probe needs the model's tokenizer")
    kind = meta["tokenizer.ggml.model"]
    try:  # transformers' builders (their names differ across versions: asked when present)
        from transformers.integrations.gguf.gguf_tokenizer_mapping import (
            select_tokenizer_builder,
        )
    except ImportError:
        return
    try:
        select_tokenizer_builder(str(meta.get("general.architecture")), kind)
    except ValueError as exc:
        raise ModelError(f"the tokenizer of {path} (tokenizer.ggml.model = {kind!r}) is not one "
                         f"transformers can build: {one_line(exc)}") from exc


def gguf_context_length(path: Path, header: GGUFHeader | None = None) -> int | None:
    """``{arch}.context_length`` of GGUF file ``path`` from its header (None if absent)."""
    meta = (header or read_header(path)).metadata
    n = meta.get(f"{meta.get('general.architecture')}.context_length")
    return int(n) if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None


def header_tensor(path: Path, t):
    """Tensor ``t`` (a :class:`.gguf_header.TensorInfo` of a little-endian file) as gguf-py's
    ``ReaderTensor`` holds it (``_build_tensors``): a read-only map of its bytes, as float16,
    float32, float64 or integers for those types, else uint8 rows of whole blocks; None for
    a type gguf-py does not know."""
    from types import SimpleNamespace

    from gguf.constants import GGML_QUANT_SIZES
    from gguf.constants import GGMLQuantizationType as Q
    from gguf.quants import quant_shape_to_byte_shape

    try:
        qtype = Q(t.type_id)
        block, size = GGML_QUANT_SIZES[qtype]
    except (ValueError, KeyError):
        return None
    n_bytes = int(np.prod(t.shape, dtype=np.int64)) * size // block
    raw = np.memmap(path, dtype=np.uint8, mode="r", offset=t.offset, shape=(n_bytes,))
    item = {Q.F16: np.float16, Q.F32: np.float32, Q.F64: np.float64, Q.I8: np.int8,
            Q.I16: np.int16, Q.I32: np.int32, Q.I64: np.int64}.get(qtype)
    data = raw.view(item).reshape(t.shape) if item is not None else \
        raw.reshape(quant_shape_to_byte_shape(t.shape, qtype))
    return SimpleNamespace(name=t.name, tensor_type=qtype, shape=tuple(reversed(t.shape)),
                           data=data)


class GGUFWeights(TensorReader):
    """Tensors of a GGUF file under Hugging Face names, dequantised to float32 on read.

    ``cfg``: :func:`gguf_config`'s dict. ``reader``: an open ``gguf.GGUFReader``, or None:
    names, types and data offsets from ``header`` (a little-endian file's tensors are then
    mapped from the file directly, :func:`header_tensor`; gguf-py's reader, which parses
    every metadata array, opens only for a big-endian one)."""

    def __init__(self, path: Path, cfg: dict, reader=None, header: GGUFHeader | None = None):
        from .registry import ADAPTERS

        self.label = str(path)
        self.format = "gguf"
        self._path = Path(path)
        self._reader = reader
        self._by_name: dict | None = None
        self._header = None
        if reader is not None:
            types = {t.name: t.tensor_type.name for t in reader.tensors}
        else:
            header = header or read_header(path)
            types = {t.name: _type_name(t.type_id) for t in header.tensors}
            if header.little_endian:
                self._header = {t.name: t for t in header.tensors}
        self._types = types
        self._spec = spec_of(cfg["gguf_architecture"], path)
        _, heads, kv, _ = self._spec.names
        self._heads = int(cfg[heads])
        self._kv = int(cfg[kv]) if kv else self._heads
        self._map: dict[str, tuple[str, int | None]] = {}  # HF name -> (GGUF name, row)
        self._names = name_map(cfg, ADAPTERS[cfg["model_type"]], _n_layers(cfg))
        for hf, gg in self._names.items():
            if gg in types:
                self._map[hf] = (gg, None)
        if self._spec.per_head_norm:  # StableLM: one (d_h,) gain per head, stacked by llama.cpp
            for hf in [k for k in self._map if k.endswith("layernorm.weight")]:
                n = self._heads if "q_layernorm" in hf else self._kv
                stem = hf.removesuffix(".weight")
                for h in range(n):
                    self._map[f"{stem}.norms.{h}.weight"] = (self._map[hf][0], h)
        self._storage: dict[str, str] = {}

    def _tensor(self, gname: str):
        """Tensor ``gname``: ``.name``, ``.tensor_type``, ``.shape`` (GGUF order) and ``.data``
        as gguf-py's reader gives them (from the header where it has them, else from the
        reader, opened now if not yet)."""
        if self._header is not None and self._header[gname].offset >= 0:
            got = header_tensor(self._path, self._header[gname])
            if got is not None:
                return got
        if self._by_name is None:
            if self._reader is None:
                self._reader = gguf_reader(self._path)
            self._by_name = {t.name: t for t in self._reader.tensors}
        return self._by_name[gname]

    def keys(self) -> set[str]:
        return set(self._map)

    def file_name(self, name: str) -> str:
        """The GGUF file's own name (``blk.0.attn_v.weight``) of Hugging Face tensor ``name``,
        present or not (``name`` itself when llama.cpp has no name for it)."""
        return self._names.get(name, name)

    def tensor_type(self, name: str) -> str:
        """The GGML type name (``"Q4_1"``, ``"F16"`` …) of tensor ``name``."""
        return self._types[self._map[name][0]]

    def get(self, name: str) -> np.ndarray:
        if name not in self._map:
            raise ModelError(f"tensor {self.file_name(name)!r} not found in {self.label}")
        from gguf.quants import dequantize

        gname, row = self._map[name]
        t = self._tensor(gname)
        kind = t.tensor_type.name
        if gguf_storage(kind) is None:
            raise ModelError(f"tensor {t.name!r} in {self.label} is stored as GGML type {kind}, "
                             f"which rmtbase does not read")
        try:
            arr = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32)
            arr = arr.reshape(tuple(int(n) for n in reversed(t.shape)))
        except Exception as exc:
            raise ModelError(f"cannot dequantise tensor {t.name!r} ({kind}) of {self.label}: "
                             f"{one_line(exc)}") from exc
        arr = self._convert(t.name, arr, row)
        self._storage[name] = gguf_storage(kind)
        return check_finite(np.ascontiguousarray(arr), t.name, self.label)

    def _convert(self, gname: str, arr: np.ndarray, row: int | None) -> np.ndarray:
        """Undo llama.cpp's conversion of tensor ``gname`` (see :mod:`.gguf_arch`)."""
        spec = self._spec
        part = gname.split(".")[2] if gname.startswith("blk.") and gname.count(".") >= 3 else ""
        if spec.permute and part in ("attn_q", "attn_k"):
            arr = unpermute(arr, self._heads if part == "attn_q" else self._kv)
        if spec.norm_shift and part.endswith("norm"):
            arr = arr - np.float32(spec.norm_shift)
        if spec.qkv_regroup and part == "attn_qkv":
            arr = regroup_falcon(arr, self._heads, self._kv)
        if spec.conv1d and arr.ndim == 2 and part in ("attn_qkv", "attn_output", "ffn_up",
                                                      "ffn_down"):
            arr = arr.T
        if row is not None:
            if arr.ndim != 2 or row >= arr.shape[0]:
                raise ModelError(f"norm tensor {gname!r} in {self.label} has shape "
                                 f"{tuple(arr.shape)}, not one row per head")
            arr = arr[row]
        return arr

    def storage_of(self, name: str) -> str:
        """Storage of tensor ``name``: float32/float16/bfloat16 or a GGML block type name."""
        if name not in self._storage:
            self._storage[name] = gguf_storage(self.tensor_type(name)) or "?"
        return self._storage[name]

    def close(self) -> None:
        self._storage = {}
