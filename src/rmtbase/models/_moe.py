"""Mixture-of-experts FFN parts: every routed expert's matrices, one layer at a time.

An MoE layer's FFN is reported expert by expert as ``ffn_gate.e{j}``, ``ffn_up.e{j}``,
``ffn_down.e{j}`` (each ``(out, in)``); the router is the component ``router``; a layer without
experts reports its dense MLP. Layouts: per-expert ``nn.Linear`` tensors, or stacked
``experts.gate_up_proj`` ``(E, 2I, d)`` (rows ``[gate; up]``) and ``experts.down_proj``."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ModelError
from ._config import Dims
from ._layout import LayerReader, Linear

_FUSED_BLOCK = {"gate": 0, "up": 1}


@dataclass(frozen=True)
class Experts:
    """Matrix ``which`` (``"gate"``, ``"up"``, ``"down"``) of every expert of layer ``{i}``:
    ``per_expert`` (expert ``{e}``'s ``nn.Linear`` name), ``stacked`` (the 3D parameter),
    ``dense`` (the dense MLP's ``nn.Linear`` on layers without experts, or None)."""

    which: str
    per_expert: str
    stacked: str
    dense: str | None = None

    def expand(self, r: LayerReader, dims: Dims, name: str, n_experts: int) -> dict:
        """``{component name: (matrix (out, in), storage)}`` for this layer."""
        if self.dense is not None and r.has(self.dense + ".weight"):
            return {name: (Linear(self.dense).read(r, dims), r.storage(self.dense + ".weight"))}
        if r.has(self.stacked):
            w = r.get(self.stacked)
            if w.ndim != 3 or w.shape[0] != n_experts:
                raise ModelError(f"tensor {r.name(self.stacked)!r} has shape {tuple(w.shape)}, "
                                 f"expected ({n_experts}, out, in) for {n_experts} experts")
            if self.which in _FUSED_BLOCK:
                m = w.shape[1] // 2
                j = _FUSED_BLOCK[self.which]
                w = w[:, j * m:(j + 1) * m]
            storage = r.storage(self.stacked)
            return {f"{name}.e{e}": (w[e], storage) for e in range(n_experts)}
        out = {}
        for e in range(n_experts):
            tensor = self.per_expert.format(i=r.i, e=e) + ".weight"
            if not r.has(tensor):
                raise ModelError(f"expert tensor {r.prefix + tensor!r} is missing (the config "
                                 f"says {n_experts} experts per layer)")
            out[f"{name}.e{e}"] = (r.get(tensor), r.storage(tensor))
        return out


@dataclass(frozen=True)
class Router:
    """The router (gate) ``nn.Linear`` ``(n_experts, d)``: the first of ``names`` present;
    nothing on a layer without experts."""

    names: tuple[str, ...]

    def expand(self, r: LayerReader, dims: Dims, name: str, n_experts: int) -> dict:
        for candidate in self.names:
            if r.has(candidate + ".weight"):
                w = Linear(candidate).read(r, dims)
                return {name: (w, r.storage(candidate + ".weight"))}
        return {}


def moe_parts(per_expert: str, names: dict[str, str], stacked: str, router: tuple[str, ...],
              dense: str | None = None) -> dict:
    """FFN parts of an MoE layer: ``names`` maps gate/up/down to per-expert module names;
    ``stacked`` the stacked ``…experts`` module; ``dense`` the MLP of layers without experts."""
    parts = {}
    for which in ("gate", "up", "down"):
        fused = f"{stacked}.{'down_proj' if which == 'down' else 'gate_up_proj'}"
        parts[f"ffn_{which}"] = Experts(
            which, f"{per_expert}.{names[which]}", fused,
            None if dense is None else f"{dense}.{which}_proj")
    parts["router"] = Router(router)
    return parts

