"""Tensor access by name from an already-loaded ``torch.nn.Module``'s ``state_dict()``.

:class:`StateDictWeights` has the reader interface of :mod:`rmtbase.models.weights`
(``keys()``, ``get(name)``, ``storage_of``, ``take_storage``, ``close()``); no copy of the
model is made, each tensor is converted to a finite float32 numpy array when asked for
(:mod:`._reader`: storage precision, refusals).
"""

from __future__ import annotations

import numpy as np

from ..errors import ModelError
from ._errors import one_line
from ._reader import DTYPE_STORAGE, check_finite, refuse_quantized


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
            refuse_quantized(name, str(tensor.dtype), f"loaded model {self.label}")
        self._storage[name] = DTYPE_STORAGE.get(str(tensor.dtype), str(tensor.dtype))
        arr = tensor.detach().to("cpu").float().numpy()
        return check_finite(np.asarray(arr, dtype=np.float32), name, f"loaded model {self.label}")

    def close(self) -> None:
        self._state = {}
