"""Base class of the per-architecture adapters, and a located checkpoint that reads layers.

An adapter knows one architecture: its sizes from the config and, through its
:class:`~rmtbase.models._layout.Layout` s, which tensors hold each layer's q, k, v, o and FFN
matrices. W_Q, W_K are ``(d_h, d)``, the logit ``x_iᵀ W_Qᵀ W_K x_j``. :meth:`Adapter.locate`
finds the layout whose layer-0 probe tensor is present."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ModelError
from ._config import Dims
from ._layout import LayerReader, Layout, expect_shape, split_heads_rows
from ._qknorm import QKNorm


class Adapter:
    """One architecture: subclasses set ``model_types`` and ``layouts``, implement :meth:`dims`,
    and may override :meth:`qk_norm`, :meth:`n_experts`, :meth:`layouts_for`."""

    model_types: tuple[str, ...] = ()
    layouts: tuple[Layout, ...] = ()

    def dims(self, cfg: dict) -> Dims:  # pragma: no cover - abstract
        raise NotImplementedError

    def layouts_for(self, cfg: dict) -> tuple[Layout, ...]:
        return self.layouts

    def qk_norm(self, cfg: dict) -> QKNorm | None:
        """The q/k norm of this config, or None (the default: no QK-norm)."""
        return None

    def n_experts(self, cfg: dict) -> int:
        """Routed experts per MoE layer (0: a dense model)."""
        return 0

    def locate(self, keys: set[str], label: str, cfg: dict) -> Located:
        """The layout and prefix of this checkpoint (ModelError if none matches)."""
        layouts = self.layouts_for(cfg)
        for layout in layouts:
            found = layout.candidates(keys)
            if found:
                return Located(self, layout, layout.pick_prefix(found, label), self.dims(cfg),
                               self.qk_norm(cfg), self.n_experts(cfg))
        probes = " or ".join(f"'*{lay.probe_tensor.format(i=0)}'" for lay in layouts)
        raise ModelError(f"no tensor named {probes} in {label}: the weights do not look like a "
                         f"{self.model_types[0]} checkpoint")


_IN_WIDTH = ("ffn_gate", "ffn_up", "ffn_in", "router")  # (·, d)
_OUT_WIDTH = ("ffn_down", "ffn_out")                      # (d, ·)


@dataclass(frozen=True)
class Located:
    """An adapter bound to one checkpoint: its layout, tensor prefix, sizes, QK-norm, experts."""

    adapter: Adapter
    layout: Layout
    prefix: str
    dims: Dims
    qk_norm: QKNorm | None
    n_experts: int

    @property
    def arch(self) -> str:
        return self.adapter.model_types[0]

    def check_layers(self, keys: set[str], label: str) -> None:
        """The weights must hold exactly the config's n_layers attention layers."""
        n = self.dims.n_layers
        last = self.prefix + self.layout.probe_tensor.format(i=n - 1)
        if last not in keys:
            raise ModelError(f"config of {label} says {n} layers but tensor {last!r} is missing")
        extra = self.prefix + self.layout.probe_tensor.format(i=n)
        if extra in keys:
            raise ModelError(f"weights of {label} have more layers than the config's {n} "
                             f"(found {extra!r})")

    def reader(self, src, i: int) -> LayerReader:
        return LayerReader(src, self.prefix, i)

    def component_names(self) -> tuple[str, ...]:
        return tuple(self.layout.parts)

    # -- per-head query/key factors ----------------------------------------------------
    def read_heads(self, r: LayerReader):
        """``(wq, wk, bq, bk)``: wq ``(n_heads, d_h, d)``, wk ``(n_kv_heads, d_h, d)``, biases
        ``(heads, d_h)`` or None (keys not yet GQA-expanded)."""
        dims = self.dims
        out = []
        for which, n in (("q", dims.n_heads), ("k", dims.n_kv_heads)):
            part = self.layout.parts[which]
            name = r.name(part.tensor())
            w = expect_shape(part.read(r, dims), (n * dims.d_h, dims.d), name)
            b = part.read_bias(r, dims)
            if b is not None:
                b = expect_shape(b, (n * dims.d_h,), name.removesuffix(".weight") + ".bias")
                b = b.reshape(n, dims.d_h)
            out.append((split_heads_rows(w, n, dims.d_h, name), b))
        (wq, bq), (wk, bk) = out
        return wq, wk, bq, bk

    # -- whole matrices ----------------------------------------------------------------
    def read_components(self, r: LayerReader, wanted) -> dict[str, tuple[np.ndarray, str]]:
        """``{name: (matrix (out, in) float32, storage)}`` for the components in ``wanted``."""
        out = {}
        for name, part in self.layout.parts.items():
            if name not in wanted:
                continue
            if hasattr(part, "expand"):  # MoE: one matrix per expert
                got = part.expand(r, self.dims, name, self.n_experts)
                where = f"layer {r.i} {name}"
            else:
                got = {name: (part.read(r, self.dims), r.storage(part.tensor()))}
                where = r.name(part.tensor())
            for key, (w, storage) in got.items():
                out[key] = (self._check(name, w, where), storage)
        return out

    def _check(self, name: str, w: np.ndarray, where: str) -> np.ndarray:
        dims = self.dims
        rows = {"q": dims.n_heads, "k": dims.n_kv_heads, "v": dims.n_kv_heads}
        if name in rows:
            return expect_shape(w, (rows[name] * dims.d_h, dims.d), where)
        if name == "o":
            return expect_shape(w, (dims.d, dims.n_heads * dims.d_h), where)
        if w.ndim != 2 or (name in _IN_WIDTH and w.shape[1] != dims.d) \
                or (name in _OUT_WIDTH and w.shape[0] != dims.d):
            side = "input" if name in _IN_WIDTH else "output"
            raise ModelError(f"{name} matrix {where!r} has shape {tuple(w.shape)}, but its "
                             f"{side} width should be d={dims.d}")
        return w
