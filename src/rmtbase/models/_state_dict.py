"""Tensor access by name from a loaded module's ``state_dict()`` (:class:`StateDictWeights`):
no copy of the model; each tensor becomes a finite float32 array when asked for."""

from __future__ import annotations

import numpy as np

from ..errors import ModelError
from ._errors import one_line
from ._reader import DTYPE_STORAGE, TensorReader, check_finite, refuse_quantized


class StateDictWeights(TensorReader):
    """Reader of a loaded ``torch.nn.Module``; tensors are converted one at a time."""

    def __init__(self, module, label: str):
        self.label = label
        try:
            self._state = module.state_dict()
        except Exception as exc:
            raise ModelError(f"cannot get the state dict of {label}: {one_line(exc)}") from exc
        self._keys = set(self._state)
        self._storage: dict[str, str] = {}

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
