"""Tensor access by name, one tensor at a time, from checkpoint files or a loaded model.

Two readers share one small interface (``keys()``, ``get(name)``, ``close()``):

- :class:`FileWeights` reads ``model.safetensors``, sharded safetensors
  (``model.safetensors.index.json`` + shards) or, only when the caller opts in with
  ``allow_pickle=True``, ``pytorch_model.bin`` (single or sharded). Safetensors headers are
  read and checked once per file, then only the tensors asked for are read, by positioned reads
  (:mod:`rmtbase.models._safetensors`; nothing stays memory-mapped, bfloat16 is widened in
  numpy without torch), so a 7B model is visited layer by layer without holding it in memory.
  Files are obtained through a ``fetch(filename) -> path`` callable, which is a plain path join for a local folder and a
  ``huggingface_hub`` download for a hub repository (see :mod:`rmtbase.models.hub`), so shards
  of a hub model are downloaded only when first needed.
- :class:`StateDictWeights` reads an already-loaded ``torch.nn.Module``'s ``state_dict()``
  (no copy of the model is made; each tensor is converted when asked for).

FP8 (:mod:`rmtbase.models._fp8`) is dequantised with its scales: block FP8 (official FP8
checkpoints: ``F8_E4M3`` or ``F8_E5M2`` weights with a float32 ``weight_scale_inv`` of 128×128
tiles beside them) has storage ``"fp8_e4m3"`` / ``"fp8_e5m2"``, and per-channel FP8
(compressed-tensors: ``F8_E4M3`` with a ``weight_scale`` of one scale per output row)
``"fp8_e4m3_channel"``; formats the null shares (:mod:`rmtbase.stats.fp8`).

Every tensor comes back as a float32 numpy array and is checked for NaN/inf; problems raise
:class:`rmtbase.errors.ModelError` naming the tensor and the file. Each reader remembers the
*storage* precision of the tensors it returned (``storage_of(name)``: ``"float32"``,
``"float16"`` or ``"bfloat16"``; float64 counts as float32, since it is read as float32), so that
scoring can pass its null through the same rounding (:mod:`rmtbase.stats.precision`).
"""

from __future__ import annotations

import json
import os
import pickle
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath, PureWindowsPath

import numpy as np

from ..errors import ModelError
from ..stats.storage import records
from ._errors import one_line

SAFETENSORS = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
PICKLE = "pytorch_model.bin"
PICKLE_INDEX = "pytorch_model.bin.index.json"

# safetensors dtypes read as float32 (:mod:`._safetensors`). F8_E4M3/F8_E5M2 with a
# 128×128-tile ``weight_scale_inv`` beside it is block FP8, F8_E4M3 with a per-row
# ``weight_scale`` per-channel FP8 (:mod:`._fp8`), dequantised. Other integer and 8-bit float
# tensors are quantized weights whose values mean nothing without their scales: refused.
_FLOAT_DTYPES = {"F64", "F32", "F16", "BF16"}
#: Storage precision names of safetensors / torch dtypes (float64 is read as float32).
_STORAGE = {"F64": "float32", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
            "torch.float64": "float32", "torch.float32": "float32",
            "torch.float16": "float16", "torch.bfloat16": "bfloat16"}


def _refuse_quantized(name: str, dtype: str, where: str) -> None:
    raise ModelError(f"tensor {name!r} in {where} is stored as {dtype} (quantized?); rmtbase "
                     "needs unquantized floating-point weights")


#: Storage precisions from coarsest to finest significand (8, 11, 24 bits): the float
#: records of :mod:`rmtbase.stats.storage` by their bits.
STORAGE_ORDER = tuple(s.name for s in sorted((r for r in records() if r.is_float),
                                             key=lambda r: r.bits))


def coarsest_storage(names) -> str:
    """The coarsest of the storage precisions ``names`` (``"float32"`` when there are none)."""
    names = set(names)
    for s in STORAGE_ORDER:
        if s in names:
            return s
    return "float32"


def split_storage(names) -> tuple[str, str | None]:
    """``(float storage, quantisation)`` of the tensors read for one layer: a block type
    (``"q4_1"``, ``"q4_k"`` … from a GGUF file) is dequantised to float32 values, so it counts as
    float32 storage and is named as the quantisation (several distinct types: joined with
    ``"+"``, sorted); None when every tensor is a float storage."""
    names = set(names)
    quant = sorted(n for n in names if n not in STORAGE_ORDER)
    floats = [n for n in names if n in STORAGE_ORDER] + (["float32"] if quant else [])
    return coarsest_storage(floats), "+".join(quant) or None


def check_shard_name(name, index: Path, folder: Path | None) -> None:
    """A shard index may only name files inside the model: a relative path without ``..``
    that stays inside ``folder`` once normalised (ModelError otherwise).

    The name is resolved lexically, not through symlinks: a Hugging Face cache snapshot folder
    is a folder of symlinks into ``../../blobs``, and those are the folder's own files. What is
    refused is an index that *names* a path outside (``../other/model.safetensors``,
    ``/etc/passwd``, ``C:\\x``).
    """
    text = name if isinstance(name, str) else repr(name)
    bad = (not isinstance(name, str) or not name or "\x00" in name
           or PurePosixPath(name).is_absolute() or PureWindowsPath(name).is_absolute()
           or PureWindowsPath(name).drive
           or ".." in PurePosixPath(name.replace("\\", "/")).parts)
    if not bad and folder is not None:
        root = os.path.normpath(os.path.abspath(folder))
        full = os.path.normpath(os.path.join(root, name))
        bad = os.path.commonpath([root, full]) != root
    if bad:
        raise ModelError(f"shard index {index} names {text!r}, which is outside the model "
                         "folder; refusing to read it")


def _pickle_reason(exc: BaseException) -> str:
    """One line for a failed ``torch.load(weights_only=True)``; never the advice to unpickle
    with ``weights_only=False``."""
    if isinstance(exc, pickle.UnpicklingError) or "weights_only" in str(exc):
        return ("it holds Python objects besides tensors, which rmtbase does not unpickle "
                "(that could run code); convert the checkpoint to safetensors")
    return one_line(exc)


def check_finite(arr: np.ndarray, name: str, where: str) -> np.ndarray:
    """Raise ModelError if ``arr`` holds NaN or inf, naming the tensor and its file."""
    finite = np.isfinite(arr)
    if not finite.all():
        bad = int(arr.size - np.count_nonzero(finite))
        raise ModelError(f"tensor {name!r} in {where} has {bad} non-finite (NaN/inf) entries")
    return arr


class FileWeights:
    """Lazy reader of checkpoint files named by ``files`` and obtained through ``fetch``.

    Parameters
    ----------
    files : iterable of str
        File names available (a folder listing or a hub repository's file list).
    fetch : callable
        ``fetch(filename) -> path`` returning a local path to that file.
    label : str
        How to name the model in messages (folder path or hub id).
    allow_pickle : bool
        Permit ``pytorch_model.bin`` checkpoints, which are loaded by unpickling (with
        ``torch.load(weights_only=True)``) and can therefore execute code if malicious.
    folder : Path, optional
        The model folder, for a local checkpoint: every file a shard index names must lie
        inside it (:func:`check_shard_name`).
    """

    def __init__(self, files: Iterable[str], fetch: Callable[[str], Path], label: str,
                 *, allow_pickle: bool = False, folder: Path | None = None):
        self.label = label
        self._fetch = fetch
        self._folder = folder
        self._headers: dict[str, dict] = {}
        self._pickled: tuple[str, dict] | None = None  # (filename, state dict) of one shard
        self._storage: dict[str, str] = {}
        files = set(files)
        if SAFETENSORS_INDEX in files:
            self.format = "safetensors"
            self._map = self._read_index(SAFETENSORS_INDEX)
        elif SAFETENSORS in files:
            self.format = "safetensors"
            self._map = None
            self._single = SAFETENSORS
        elif PICKLE in files or PICKLE_INDEX in files:
            if not allow_pickle:
                raise ModelError(
                    f"{label} has only {PICKLE} weights, which load by unpickling and can run "
                    "code; pass allow_pickle=True (CLI: --allow-pickle) if you trust the source, "
                    "or convert the checkpoint to safetensors")
            self.format = "pickle"
            if PICKLE_INDEX in files:
                self._map = self._read_index(PICKLE_INDEX)
            else:
                self._map = None
                self._single = PICKLE
        else:
            raise ModelError(
                f"no weights found in {label}: expected {SAFETENSORS}, {SAFETENSORS_INDEX} "
                f"or {PICKLE}")
        if self._map is None:
            self._keys = set(self._header(self._single)) if self.format == "safetensors" \
                else set(self._load_pickle(self._single).keys())
        else:
            self._keys = set(self._map)

    # -- file access -------------------------------------------------------------------
    def _path(self, filename: str) -> Path:
        path = self._fetch(filename)
        if hasattr(path, "read_range"):  # a remote shard read by byte ranges (files.ranges)
            return path
        path = Path(path)
        if not path.is_file():
            raise ModelError(f"weight file {filename} of {self.label} is missing")
        return path

    def _read_index(self, filename: str) -> dict[str, str]:
        path = self._path(filename)
        try:
            weight_map = json.loads(path.read_text())["weight_map"]
        except RecursionError as exc:
            raise ModelError(f"cannot read shard index {path}: nested too deeply") from exc
        except (OSError, ValueError, KeyError, TypeError) as exc:
            reason = f"no {one_line(exc)}" if isinstance(exc, KeyError) else one_line(exc)
            raise ModelError(f"cannot read shard index {path}: {reason}") from exc
        if not isinstance(weight_map, dict):
            raise ModelError(f"cannot read shard index {path}: 'weight_map' is not a mapping")
        for shard in set(weight_map.values()):
            check_shard_name(shard, path, self._folder)
        return {str(k): str(v) for k, v in weight_map.items()}

    def _header(self, filename: str) -> dict:
        """The checked header of a safetensors file (:func:`._safetensors.read_header`), read
        once; tensors are then read by positioned reads, nothing stays mapped."""
        if filename not in self._headers:
            from ._safetensors import SafetensorsError, read_header

            path = self._path(filename)
            try:
                self._headers[filename] = {"path": path, "tensors": read_header(path)[0]}
            except (SafetensorsError, OSError) as exc:
                raise ModelError(f"cannot read safetensors file {path}: "
                                 f"{one_line(exc)}") from exc
        return self._headers[filename]["tensors"]

    def _load_pickle(self, filename: str) -> dict:
        if self._pickled is None or self._pickled[0] != filename:
            import torch

            path = self._path(filename)
            self._pickled = None  # release the previous shard first
            try:
                state = torch.load(str(path), map_location="cpu", weights_only=True, mmap=True)
            except Exception:
                try:
                    state = torch.load(str(path), map_location="cpu", weights_only=True)
                except Exception as exc:
                    raise ModelError(f"cannot read pickled weights {path}: "
                                     f"{_pickle_reason(exc)}") from exc
            if not isinstance(state, dict):
                raise ModelError(f"{path} does not hold a state dict")
            self._pickled = (filename, state)
        return self._pickled[1]

    def file_of(self, name: str) -> str:
        """The file that holds tensor ``name``."""
        if name not in self._keys:
            raise ModelError(f"tensor {name!r} not found in the weights of {self.label}")
        return self._map[name] if self._map is not None else self._single

    # -- interface ---------------------------------------------------------------------
    def keys(self) -> set[str]:
        return self._keys

    def file_name(self, name: str) -> str:
        """The checkpoint's own name of tensor ``name`` (the same: its names are read as
        they are)."""
        return name

    def prefetch(self, names) -> None:
        """Say which tensors are read next: a remote shard (:mod:`rmtbase.files.ranges`)
        fetches their byte ranges (FP8 scales included) in as few requests as it can; a local
        file ignores this."""
        if self.format != "safetensors":
            return
        by_file: dict[str, list[str]] = {}
        for name in names:
            for n in (name, self._scale_name(name)):
                if n in self._keys:
                    by_file.setdefault(self.file_of(n), []).append(n)
        for filename, group in by_file.items():
            tensors = self._header(filename)
            source = self._headers[filename]["path"]
            if hasattr(source, "prefetch"):
                try:
                    source.prefetch([tensors[n]["offsets"] for n in group if n in tensors])
                except OSError as exc:
                    raise ModelError(f"cannot read {self.label}/{filename}: "
                                     f"{one_line(exc)}") from exc

    def get(self, name: str) -> np.ndarray:
        """Tensor ``name`` as a finite float32 numpy array (read from disk now)."""
        filename = self.file_of(name)
        where = f"{self.label}/{filename}"
        try:
            if self.format == "safetensors":
                from ._safetensors import read_float32

                info = self._header(filename)[name]
                dtype = info["dtype"]
                self._storage[name] = _STORAGE.get(dtype, dtype)
                if dtype in ("F8_E4M3", "F8_E5M2") and self._scale_name(name) in self._keys:
                    arr = self._fp8(name, info, filename, where)
                elif dtype == "F8_E4M3" and self._scale_name(name, "") in self._keys:
                    arr = self._fp8(name, info, filename, where, channel=True)
                elif dtype not in _FLOAT_DTYPES:
                    _refuse_quantized(name, dtype, where)
                else:
                    arr = read_float32(self._headers[filename]["path"], info)
            else:
                state = self._load_pickle(filename)
                if name not in state:
                    raise ModelError(f"tensor {name!r} not found in {where}")
                tensor = state[name]
                if not tensor.is_floating_point() or tensor.element_size() < 2:
                    _refuse_quantized(name, str(tensor.dtype), where)
                self._storage[name] = _STORAGE.get(str(tensor.dtype), str(tensor.dtype))
                arr = tensor.detach().float().numpy()
        except ModelError:
            raise
        except Exception as exc:
            raise ModelError(f"cannot read tensor {name!r} from {where}: "
                             f"{one_line(exc)}") from exc
        return check_finite(np.asarray(arr, dtype=np.float32), name, where)

    @staticmethod
    def _scale_name(name: str, inv: str = "_inv") -> str:
        """``weight_scale_inv`` (block FP8) or, with ``inv=""``, ``weight_scale`` beside it."""
        return name + "_scale" + inv if name.endswith(".weight") else \
            name + ".weight_scale" + inv

    def _fp8(self, name: str, info: dict, filename: str, where: str,
             channel: bool = False) -> np.ndarray:
        """FP8: the bytes times their 128×128 tile scales, or with ``channel`` their per-row
        scales (:mod:`._fp8`)."""
        from ._fp8 import CHANNEL_STORAGE, DTYPES, FORMATS, dequantize, dequantize_rows
        from ._safetensors import read_float32, read_uint8

        sname = self._scale_name(name, "" if channel else "_inv")
        sfile = self.file_of(sname)
        self._header(sfile)
        sinfo = self._headers[sfile]["tensors"][sname]
        if sinfo["dtype"] not in _FLOAT_DTYPES:
            raise ModelError(f"FP8 scales {sname!r} in {self.label}/{sfile} are stored as "
                             f"{sinfo['dtype']}; expected float32")
        scale = check_finite(read_float32(self._headers[sfile]["path"], sinfo), sname, where)
        raw, fmt = read_uint8(self._headers[filename]["path"], info), DTYPES[info["dtype"]]
        try:
            arr = dequantize_rows(raw, scale, name) if channel else \
                dequantize(raw, scale, name, fmt)
        except ValueError as exc:
            raise ModelError(f"{one_line(exc)} ({where})") from exc
        self._storage[name] = CHANNEL_STORAGE if channel else FORMATS[fmt][1]
        return arr

    def storage_of(self, name: str) -> str:
        """Storage precision of tensor ``name`` as it was read (after :meth:`get`)."""
        return self._storage[name]

    def take_storage(self) -> dict[str, str]:
        """``{name: storage}`` of the tensors read since the last call (then forgotten)."""
        out, self._storage = self._storage, {}
        return out

    def close(self) -> None:
        self._headers.clear()
        self._pickled = None


class StateDictWeights:
    """Reader of a loaded ``torch.nn.Module``; tensors are converted one at a time."""

    def __init__(self, module, label: str):
        self.label = label
        try:
            self._state = module.state_dict()
        except Exception as exc:
            raise ModelError(f"cannot get the state dict of {label}: {one_line(exc)}") from exc
        self._keys = set(self._state)
        self._storage: dict[str, str] = {}

    def keys(self) -> set[str]:
        return self._keys

    def file_name(self, name: str) -> str:
        """The module's own name of tensor ``name`` (the same)."""
        return name

    def storage_of(self, name: str) -> str:
        """Storage precision of tensor ``name`` as it was read (after :meth:`get`)."""
        return self._storage[name]

    def take_storage(self) -> dict[str, str]:
        """``{name: storage}`` of the tensors read since the last call (then forgotten)."""
        out, self._storage = self._storage, {}
        return out

    def get(self, name: str) -> np.ndarray:
        if name not in self._state:
            raise ModelError(f"tensor {name!r} not found in the loaded model {self.label}")
        tensor = self._state[name]
        if getattr(tensor, "is_meta", False):
            raise ModelError(f"tensor {name!r} of {self.label} is on the meta device (not loaded)")
        if not tensor.is_floating_point() or tensor.element_size() < 2:
            _refuse_quantized(name, str(tensor.dtype), f"loaded model {self.label}")
        self._storage[name] = _STORAGE.get(str(tensor.dtype), str(tensor.dtype))
        arr = tensor.detach().to("cpu").float().numpy()
        return check_finite(np.asarray(arr, dtype=np.float32), name, f"loaded model {self.label}")

    def close(self) -> None:
        self._state = {}
