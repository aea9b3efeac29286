"""GGUF files read directly: a reader beside safetensors, mapped onto the Hugging Face layout.

A ``.gguf`` file (llama.cpp's format, read with the ``gguf`` package's ``GGUFReader``) holds
its architecture and sizes as metadata and its tensors under llama.cpp names. This module turns
it into what the rest of :mod:`rmtbase.models` reads from a Hugging Face folder:

- a config dict (``model_type``, ``hidden_size`` = ``<arch>.embedding_length``,
  ``num_attention_heads`` = ``<arch>.attention.head_count``, ``num_key_value_heads`` =
  ``<arch>.attention.head_count_kv``, ``num_hidden_layers`` = ``<arch>.block_count``,
  ``head_dim`` = ``<arch>.attention.key_length`` when given, ``partial_rotary_factor`` =
  ``<arch>.rope.dimension_count`` / head_dim), so that the architecture's adapter reads it;
- :class:`GGUFWeights`, a tensor reader with the interface of
  :class:`~rmtbase.models.weights.FileWeights` under Hugging Face names
  (``blk.{i}.attn_q.weight`` → ``model.layers.{i}.self_attn.q_proj.weight``, …), each tensor
  dequantised on read by ``gguf.quants.dequantize`` to float32 in the ``nn.Linear`` (out, in)
  layout (GGUF lists dimensions innermost first; numpy's order is the reverse).

Rotary row order. For ``llama`` files, llama.cpp's ``convert_hf_to_gguf.py``
(``LlamaModel.permute``) reorders the rows of q_proj (and k_proj, with the KV head count)
within each head from the Hugging Face "rotate half" order to interleaved pairs:
``w.reshape(n_head, 2, d_h/2, d).swapaxes(1, 2).reshape(w.shape)``. :func:`unpermute` inverts
it, so per-head W_Q, W_K — and W_QK — equal the Hugging Face model's (``transformers``'
GGUF loader undoes the same permutation). ``qwen2`` files are written without it.

Storage: each tensor's GGML type is recorded (``storage_of``): ``"float32"``, ``"float16"``,
``"bfloat16"`` for F32/F16/BF16 and the lower-case type name (``"q4_1"``, ``"q4_k"``, …) for a
block quantisation (:data:`GGUF_TYPES`). Other types (IQ*, TQ*, MXFP4 …) are refused with one
line naming the type.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ..errors import ModelError
from ._errors import one_line
from .weights import check_finite

#: GGML tensor types read, and the storage name each is recorded as.
GGUF_TYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16", "Q8_0": "q8_0",
              "Q4_0": "q4_0", "Q4_1": "q4_1", "Q5_0": "q5_0", "Q5_1": "q5_1", "Q2_K": "q2_k",
              "Q3_K": "q3_k", "Q4_K": "q4_k", "Q5_K": "q5_k", "Q6_K": "q6_k"}
#: GGUF architectures read: (Hugging Face model_type, class, q/k rows permuted for rotary).
ARCHITECTURES = {"llama": ("llama", "LlamaForCausalLM", True),
                 "qwen2": ("qwen2", "Qwen2ForCausalLM", False)}
#: llama.cpp tensor name (per block) -> Hugging Face name (LLaMA layout).
_NAMES = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
          "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
          "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
          "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm"}
_BLOCK = re.compile(r"^blk\.(\d+)\.(\w+)\.(weight|bias)$")


def is_gguf(path: Path) -> bool:
    """True when ``path`` is a file that starts with the GGUF magic bytes."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"GGUF"
    except OSError:
        return False


def _reader(path: Path):
    try:
        from gguf import GGUFReader
    except ImportError as exc:
        raise ModelError("reading a .gguf file needs the gguf package: pip install -e '.[gguf]' "
                         "in the rmtbase clone (or pip install gguf)") from exc
    try:
        return GGUFReader(str(path))
    except Exception as exc:
        raise ModelError(f"cannot read GGUF file {path}: {one_line(exc)}") from exc


def _field(reader, key: str, path: Path, *, required: bool = True):
    f = reader.fields.get(key)
    if f is None:
        if required:
            raise ModelError(f"GGUF file {path} lacks metadata {key!r}")
        return None
    try:
        return f.contents()
    except Exception as exc:
        raise ModelError(f"cannot read metadata {key!r} of {path}: {one_line(exc)}") from exc


def gguf_config(path: Path, reader=None) -> dict:
    """A Hugging Face style config dict from the metadata of GGUF file ``path``."""
    reader = reader or _reader(path)
    arch = _field(reader, "general.architecture", path)
    if arch not in ARCHITECTURES:
        raise ModelError(f"unsupported GGUF architecture {arch!r}; supported: "
                         f"{', '.join(ARCHITECTURES)}")
    model_type, cls, _ = ARCHITECTURES[arch]
    cfg = {"model_type": model_type, "architectures": [cls], "gguf_architecture": arch}
    for key, name in (("hidden_size", "embedding_length"),
                      ("num_attention_heads", "attention.head_count"),
                      ("num_hidden_layers", "block_count")):
        cfg[key] = _field(reader, f"{arch}.{name}", path)
    for key, name in (("num_key_value_heads", "attention.head_count_kv"),
                      ("head_dim", "attention.key_length"),
                      ("intermediate_size", "feed_forward_length")):
        value = _field(reader, f"{arch}.{name}", path, required=False)
        if value is not None:
            cfg[key] = value
    rot = _field(reader, f"{arch}.rope.dimension_count", path, required=False)
    heads = cfg["num_attention_heads"]
    d_h = cfg.get("head_dim") or (cfg["hidden_size"] // heads if isinstance(heads, int)
                                  and heads > 0 else None)
    if isinstance(rot, int) and d_h:
        cfg["partial_rotary_factor"] = min(1.0, rot / d_h)
    name = _field(reader, "general.name", path, required=False)
    cfg["_name_or_path"] = str(name or path)
    return cfg


def unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Undo llama.cpp's rotary row permutation of a q/k weight ``(n_head·d_h, …)`` or bias."""
    d_h = w.shape[0] // n_head
    if n_head < 1 or d_h * n_head != w.shape[0] or d_h % 2:
        raise ModelError(f"cannot undo llama.cpp's q/k row permutation of a tensor with "
                         f"{w.shape[0]} rows for {n_head} heads")
    rest = w.shape[1:]
    return w.reshape(n_head, d_h // 2, 2, *rest).swapaxes(1, 2).reshape(w.shape)


class GGUFWeights:
    """Tensors of a GGUF file under Hugging Face names, dequantised to float32 on read.

    ``cfg`` is :func:`gguf_config`'s dict (head counts for the row permutation). Every mapped
    tensor's type is checked up front (ModelError naming the first type not in
    :data:`GGUF_TYPES`).
    """

    def __init__(self, path: Path, cfg: dict, reader=None):
        self.label = str(path)
        self.format = "gguf"
        self._reader = reader or _reader(path)
        _, _, permuted = ARCHITECTURES[cfg["gguf_architecture"]]
        heads = cfg["num_attention_heads"]
        self._heads = {"attn_q": heads, "attn_k": cfg.get("num_key_value_heads", heads)} \
            if permuted else {}
        self._map: dict[str, object] = {}
        self._part: dict[str, str] = {}
        for t in self._reader.tensors:
            m, part = _BLOCK.match(t.name), None
            if m:
                i, part, kind = m.groups()
                if part not in _NAMES:
                    continue
                hf = f"model.layers.{int(i)}.{_NAMES[part]}.{kind}"
                self._part[hf] = part
            elif t.name == "token_embd.weight":
                hf = "model.embed_tokens.weight"
            else:
                continue
            if t.tensor_type.name not in GGUF_TYPES and part is not None:
                raise ModelError(f"tensor {t.name!r} in {path} is stored as GGML type "
                                 f"{t.tensor_type.name}, which rmtbase does not read (it reads "
                                 f"{', '.join(GGUF_TYPES)})")
            self._map[hf] = t
        self._storage: dict[str, str] = {}

    def keys(self) -> set[str]:
        return set(self._map)

    def tensor_type(self, name: str) -> str:
        """The GGML type name (``"Q4_1"``, ``"F16"`` …) of tensor ``name``."""
        return self._map[name].tensor_type.name

    def get(self, name: str) -> np.ndarray:
        if name not in self._map:
            raise ModelError(f"tensor {name!r} not found in {self.label}")
        from gguf.quants import dequantize

        t = self._map[name]
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
        part = self._part.get(name)
        if part in self._heads:
            arr = unpermute(arr, int(self._heads[part]))
        self._storage[name] = GGUF_TYPES[kind]
        return check_finite(np.ascontiguousarray(arr), t.name, self.label)

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
