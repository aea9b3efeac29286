"""What every tensor reader shares: the storage precision of what it returned, and the refusals.

Readers return float32 arrays and log each tensor's storage for the null's round trip.
Integer or 8-bit float tensors without their scales (:func:`refuse_quantized`) and NaN/inf
values (:func:`check_finite`) are a :class:`rmtbase.errors.ModelError` naming tensor and file."""

from __future__ import annotations

import contextlib
import contextvars

import numpy as np

from ..errors import ModelError
from ..stats.storage import shipped_records

#: Storage precision names of safetensors / torch dtypes (float64 is read as float32).
DTYPE_STORAGE = {"F64": "float32", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
                 "torch.float64": "float32", "torch.float32": "float32",
                 "torch.float16": "float16", "torch.bfloat16": "bfloat16"}


def refuse_quantized(name: str, dtype: str, where: str) -> None:
    raise ModelError(f"tensor {name!r} in {where} is stored as {dtype} (quantized?); rmtbase "
                     "needs unquantized floating-point weights")


#: Storage precisions from coarsest to finest significand (8, 11, 24 bits): the shipped float
#: records of :mod:`rmtbase.stats.storage` by their bits (read without loading plugins: nothing
#: enumerates plugins at import).
STORAGE_ORDER = tuple(s.name for s in sorted((r for r in shipped_records() if r.is_float),
                                             key=lambda r: r.bits))


def coarsest_storage(names) -> str:
    """The coarsest of the storage precisions ``names`` (``"float32"`` when there are none)."""
    names = set(names)
    for s in STORAGE_ORDER:
        if s in names:
            return s
    return "float32"


def split_storage(names) -> tuple[str, str | None]:
    """``(float storage, quantisation)`` of one layer's tensors: block types count as float32
    storage and name the quantisation (sorted, joined by ``"+"``; None when none)."""
    names = set(names)
    quant = sorted(n for n in names if n not in STORAGE_ORDER)
    floats = [n for n in names if n in STORAGE_ORDER] + (["float32"] if quant else [])
    return coarsest_storage(floats), "+".join(quant) or None


#: True inside :func:`finite_unchecked`.
_UNCHECKED = contextvars.ContextVar("rmtbase_finite_unchecked", default=False)


@contextlib.contextmanager
def finite_unchecked():
    """Within, :func:`check_finite` passes values through: for a check that names the heads of
    a non-finite tensor itself (:func:`rmtbase.cli.score_checks.check_finite_model`)."""
    token = _UNCHECKED.set(True)
    try:
        yield
    finally:
        _UNCHECKED.reset(token)


class NonFiniteTensor(ModelError):
    """A tensor holds NaN or inf (:func:`check_finite`); ``tensor`` is its name."""

    def __init__(self, message: str, tensor: str):
        super().__init__(message)
        self.tensor = tensor


def check_finite(arr: np.ndarray, name: str, where: str) -> np.ndarray:
    """Raise :class:`NonFiniteTensor` (a ModelError) if ``arr`` holds NaN or inf, naming the
    tensor and its file."""
    if _UNCHECKED.get():
        return arr
    finite = np.isfinite(arr)
    if not finite.all():
        bad = int(arr.size - np.count_nonzero(finite))
        raise NonFiniteTensor(f"tensor {name!r} in {where} has {bad} non-finite (NaN/inf) "
                              "entries", name)
    return arr


class TensorReader:
    """The readers' common part: ``keys()``, ``file_name``, and the storage log behind
    ``storage_of`` and ``take_storage``."""

    _keys: set[str]
    _storage: dict[str, str]

    def keys(self) -> set[str]:
        return self._keys

    def file_name(self, name: str) -> str:
        """The reader's own name of tensor ``name`` (the same: names are read as they are)."""
        return name

    def storage_of(self, name: str) -> str:
        """Storage precision of tensor ``name`` as it was read (after :meth:`get`)."""
        return self._storage[name]

    def take_storage(self) -> dict[str, str]:
        """``{name: storage}`` of the tensors read since the last call (then forgotten)."""
        out, self._storage = self._storage, {}
        return out
