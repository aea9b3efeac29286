"""GGUF files read directly: a reader beside safetensors, mapped onto the Hugging Face layout.

A ``.gguf`` file (llama.cpp's format) holds its architecture and sizes as metadata and its
tensors under llama.cpp names. This module turns it into what the rest of
:mod:`rmtbase.models` reads from a Hugging Face folder:

- a config dict from the header alone (:func:`gguf_config`, parsed by
  :mod:`~rmtbase.models.gguf_header` without touching a tensor: an architecture rmtbase cannot
  score, or a q/k/v tensor of a type it cannot read, is refused in one line before any tensor
  is read);
- :class:`GGUFWeights`, a tensor reader with the interface of
  :class:`~rmtbase.models.weights.FileWeights` under the Hugging Face names the
  architecture's adapter reads, each tensor dequantised on read by ``gguf.quants.dequantize``
  to float32 in the ``nn.Linear`` (out, in) layout (GGUF lists dimensions innermost first;
  numpy's order is the reverse), with llama.cpp's conversions undone
  (:mod:`~rmtbase.models.gguf_arch`: names from ``gguf``'s tensor-name map; the rotary row
  permutation of the llama family; Gemma's +1 on norm gains; GPT-2's transpose; Falcon's and
  GPT-NeoX's q/k/v reordering; StableLM's stacked per-head norms).

Storage: each tensor's GGML type is recorded (``storage_of``): ``"float32"``, ``"float16"``,
``"bfloat16"`` for F32/F16/BF16 and the lower-case type name (``"q4_1"``, ``"q4_k"``, …) for a
block quantisation (:data:`GGUF_TYPES`); each head's null goes through its tensors' storage.
Other types (IQ*, TQ*, MXFP4 …) are refused with one line naming the type.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import ModelError
from ._errors import one_line
from .gguf_arch import SPECS, hf_config, name_map, regroup_falcon, spec_of, unpermute
from .gguf_header import GGUFHeader, is_gguf, read_header
from .weights import check_finite

__all__ = ["GGUF_TYPES", "SPECS", "GGUFWeights", "gguf_config", "is_gguf", "unpermute"]

#: GGML tensor types read, and the storage name each is recorded as.
GGUF_TYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16", "Q8_0": "q8_0",
              "Q4_0": "q4_0", "Q4_1": "q4_1", "Q5_0": "q5_0", "Q5_1": "q5_1", "Q2_K": "q2_k",
              "Q3_K": "q3_k", "Q4_K": "q4_k", "Q5_K": "q5_k", "Q6_K": "q6_k"}


def _need_gguf():
    try:
        import gguf
    except ImportError as exc:
        raise ModelError("reading a .gguf file needs the gguf package: pip install -e '.[gguf]' "
                         "in the rmtbase clone (or pip install gguf)") from exc
    return gguf


def _reader(path: Path):
    gguf = _need_gguf()
    try:
        return gguf.GGUFReader(str(path))
    except Exception as exc:
        raise ModelError(f"cannot read GGUF file {path}: {one_line(exc)}") from exc


def _n_layers(cfg: dict) -> int:
    return int(cfg[SPECS[cfg["gguf_architecture"]].names[3]])


def gguf_config(path: Path, header: GGUFHeader | None = None) -> dict:
    """A Hugging Face style config dict of GGUF file ``path``, from its header alone.

    ModelError (one line) for an architecture outside :data:`SPECS` or a mapped tensor of a
    type outside :data:`GGUF_TYPES` — both before any tensor is read."""
    gguf = _need_gguf()
    header = header or read_header(path)
    cfg = hf_config(header.metadata, path)
    names = {t.name for t in header.tensors}
    flag = SPECS[cfg["gguf_architecture"]].qk_norm_flag
    if flag:  # StableLM's qk_layernorm, Cohere's use_qk_norm: present when the norms are
        cfg[flag] = "blk.0.attn_q_norm.weight" in names
    from .registry import ADAPTERS

    mapped = set(name_map(cfg, ADAPTERS[cfg["model_type"]], _n_layers(cfg)).values())
    for t in header.tensors:
        if t.name not in mapped:
            continue
        try:
            kind = gguf.GGMLQuantizationType(t.type_id).name
        except ValueError:
            kind = f"#{t.type_id}"
        if kind not in GGUF_TYPES:
            raise ModelError(f"tensor {t.name!r} in {path} is stored as GGML type {kind}, which "
                             f"rmtbase does not read (it reads {', '.join(GGUF_TYPES)})")
    return cfg


class GGUFWeights:
    """Tensors of a GGUF file under Hugging Face names, dequantised to float32 on read, with
    llama.cpp's conversions undone (:mod:`~rmtbase.models.gguf_arch`).

    ``cfg`` is :func:`gguf_config`'s dict; ``reader`` an open ``gguf.GGUFReader`` (opened here
    when None: only after the header has been checked).
    """

    def __init__(self, path: Path, cfg: dict, reader=None):
        from .registry import ADAPTERS

        self.label = str(path)
        self.format = "gguf"
        self._reader = reader or _reader(path)
        self._spec = spec_of(cfg["gguf_architecture"], path)
        _, heads, kv, _ = self._spec.names
        self._heads = int(cfg[heads])
        self._kv = int(cfg[kv]) if kv else self._heads
        by_name = {t.name: t for t in self._reader.tensors}
        self._map: dict[str, tuple[object, int | None]] = {}
        for hf, gg in name_map(cfg, ADAPTERS[cfg["model_type"]], _n_layers(cfg)).items():
            if gg in by_name:
                self._map[hf] = (by_name[gg], None)
        if self._spec.per_head_norm:  # StableLM: one (d_h,) gain per head, stacked by llama.cpp
            for hf in [k for k in self._map if k.endswith("layernorm.weight")]:
                n = self._heads if "q_layernorm" in hf else self._kv
                stem = hf.removesuffix(".weight")
                for h in range(n):
                    self._map[f"{stem}.norms.{h}.weight"] = (self._map[hf][0], h)
        self._storage: dict[str, str] = {}

    def keys(self) -> set[str]:
        return set(self._map)

    def tensor_type(self, name: str) -> str:
        """The GGML type name (``"Q4_1"``, ``"F16"`` …) of tensor ``name``."""
        return self._map[name][0].tensor_type.name

    def get(self, name: str) -> np.ndarray:
        if name not in self._map:
            raise ModelError(f"tensor {name!r} not found in {self.label}")
        from gguf.quants import dequantize

        t, row = self._map[name]
        kind = t.tensor_type.name
        if kind not in GGUF_TYPES:
            raise ModelError(f"tensor {t.name!r} in {self.label} is stored as GGML type {kind}, "
                             f"which rmtbase does not read")
        try:
            arr = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32)
            arr = arr.reshape(tuple(int(n) for n in reversed(t.shape)))
        except Exception as exc:
            raise ModelError(f"cannot dequantise tensor {t.name!r} ({kind}) of {self.label}: "
                             f"{one_line(exc)}") from exc
        arr = self._convert(t.name, arr, row)
        self._storage[name] = GGUF_TYPES[kind]
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
            self._storage[name] = GGUF_TYPES.get(self.tensor_type(name), "?")
        return self._storage[name]

    def take_storage(self) -> dict[str, str]:
        out, self._storage = self._storage, {}
        return out

    def close(self) -> None:
        self._storage = {}
