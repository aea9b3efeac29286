"""Tensor access by name, one tensor at a time, from checkpoint files or a loaded model.

Readers share ``keys()``, ``get(name)``, ``close()``: :class:`FileWeights` (safetensors, each
tensor by a positioned read, or with ``allow_pickle=True`` ``pytorch_model.bin``) and
:class:`StateDictWeights` (a loaded module). FP8 is dequantised with its scales; every tensor is
a float32 array checked for NaN/inf, its storage precision logged."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from ..errors import ModelError
from ._errors import one_line
from ._reader import DTYPE_STORAGE, TensorReader, check_finite, refuse_quantized
from ._shard_index import read_index

__all__ = ["PICKLE", "PICKLE_INDEX", "SAFETENSORS", "SAFETENSORS_INDEX", "FileWeights"]

SAFETENSORS = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
PICKLE = "pytorch_model.bin"
PICKLE_INDEX = "pytorch_model.bin.index.json"

# safetensors dtypes read as float32 (:mod:`._safetensors`). F8_E4M3/F8_E5M2 with a
# 128×128-tile ``weight_scale_inv`` beside it is block FP8, F8_E4M3 with a per-row
# ``weight_scale`` per-channel FP8 (:mod:`._fp8`), dequantised. Other integer and 8-bit float
# tensors are quantized weights whose values mean nothing without their scales: refused.
_FLOAT_DTYPES = {"F64", "F32", "F16", "BF16"}


def _pickle_reason(exc: BaseException) -> str:
    """One line for a failed ``torch.load(weights_only=True)``; never the advice to unpickle
    with ``weights_only=False``."""
    if isinstance(exc, pickle.UnpicklingError) or "weights_only" in str(exc):
        return ("it holds Python objects besides tensors, which rmtbase does not unpickle "
                "(that could run code); convert the checkpoint to safetensors")
    return one_line(exc)


class FileWeights(TensorReader):
    """Lazy reader of checkpoint files named by ``files`` (the names available) and obtained
    through ``fetch(filename) -> path``. ``label``: the model's name in messages;
    ``allow_pickle``: permit ``pytorch_model.bin`` (``weights_only=True``); ``folder``: the local
    model folder, which must hold every shard an index names."""

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
        return read_index(self._path(filename), self._folder)

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

    # -- interface (keys, file_name, storage_of, take_storage: _reader.TensorReader) ------
    def prefetch(self, names) -> None:
        """Say which tensors are read next: a remote shard fetches their byte ranges (FP8 scales
        included) in few requests; a local file ignores this."""
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
                self._storage[name] = DTYPE_STORAGE.get(dtype, dtype)
                if dtype in ("F8_E4M3", "F8_E5M2") and self._scale_name(name) in self._keys:
                    arr = self._fp8(name, info, filename, where)
                elif dtype == "F8_E4M3" and self._scale_name(name, "") in self._keys:
                    arr = self._fp8(name, info, filename, where, channel=True)
                elif dtype not in _FLOAT_DTYPES:
                    refuse_quantized(name, dtype, where)
                else:
                    arr = read_float32(self._headers[filename]["path"], info)
            else:
                state = self._load_pickle(filename)
                if name not in state:
                    raise ModelError(f"tensor {name!r} not found in {where}")
                tensor = state[name]
                if not tensor.is_floating_point() or tensor.element_size() < 2:
                    refuse_quantized(name, str(tensor.dtype), where)
                self._storage[name] = DTYPE_STORAGE.get(str(tensor.dtype), str(tensor.dtype))
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

    def close(self) -> None:
        self._headers.clear()
        self._pickled = None
