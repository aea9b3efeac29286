"""PEFT LoRA adapters as a weight reader beside the base checkpoint, for every layout.

An adapter folder holds ``adapter_config.json`` and ``adapter_model.safetensors`` with, per
target module, ``lora_A.weight`` (r, in) and ``lora_B.weight`` (out, r). PEFT's update (Hu et
al. 2021; ``LoraLayer.get_delta_weight``) is ΔW = s · B A in the (out, in) layout (transposed
with ``fan_in_fan_out``), s = lora_alpha / r (``use_rslora``: lora_alpha / √r; per-module
``rank_pattern`` / ``alpha_pattern``). ΔW is added in the base checkpoint's own layout, before
the architecture's adapter. :class:`LoraWeights`: ``merged=True`` is base + ΔW (PEFT's
``merge_and_unload``), ``merged=False`` ΔW alone. Module names match base tensors by their
longest common dotted suffix. Refused
in one line: DoRA, an all-zero lora_B, a module matching no base tensor or of another shape."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import ModelError
from ._errors import one_line

CONFIG = "adapter_config.json"
WEIGHTS = "adapter_model.safetensors"
_KEY = re.compile(r"^(?P<module>.+)\.lora_(?P<ab>[AB])(?:\.(?P<name>[^.]+))?\.weight$")


def is_lora(path) -> bool:
    """True for a folder holding a PEFT adapter (``adapter_config.json``)."""
    try:
        return Path(path).is_dir() and (Path(path) / CONFIG).is_file()
    except (OSError, TypeError, ValueError):
        return False


@dataclass
class LoraAdapter:
    """A PEFT LoRA adapter read from its folder: per module path its s·BA (float64,
    ``nn.Linear`` (out, in) layout) and whether the base stores it transposed."""

    folder: Path
    updates: dict[str, np.ndarray] = field(default_factory=dict)
    fan_in_fan_out: bool = False
    target_modules: object = None

    @property
    def label(self) -> str:
        """The adapter's folder name (never an absolute path)."""
        return self.folder.name or str(self.folder)


def _pattern(patterns: dict, module: str, default):
    """PEFT's ``get_pattern_key``: the value of the first pattern that matches the module's
    dotted suffix."""
    for key, value in (patterns or {}).items():
        if re.match(rf"(.*\.)?({key})$", module):
            return value
    return default


def _config(folder: Path) -> dict:
    try:
        cfg = json.loads((folder / CONFIG).read_text())
        if not isinstance(cfg, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError, RecursionError) as exc:
        raise ModelError(f"cannot read the LoRA config {folder.name}/{CONFIG}: "
                         f"{one_line(exc)}") from exc
    kind = str(cfg.get("peft_type", "LORA")).upper()
    if kind != "LORA":
        raise ModelError(f"{folder.name} is a PEFT {kind} adapter; rmtbase reads LoRA adapters")
    if cfg.get("use_dora"):
        raise ModelError(f"{folder.name} is a DoRA adapter (use_dora), whose update is not "
                         "(alpha/r)·B·A; rmtbase reads plain LoRA")
    r, alpha = cfg.get("r"), cfg.get("lora_alpha", cfg.get("r"))
    if isinstance(r, bool) or not isinstance(r, int) or r < 1 \
            or isinstance(alpha, bool) or not isinstance(alpha, int | float):
        raise ModelError(f"LoRA config of {folder.name}: r={r!r}, lora_alpha={alpha!r} are not "
                         "a positive integer and a number")
    return cfg


def read_lora(adapter) -> LoraAdapter:
    """Read the adapter folder ``adapter``: every module's s·BA (module docstring)."""
    from ._safetensors import SafetensorsError, read_float32, read_header

    folder = Path(adapter)
    cfg = _config(folder)
    path = folder / WEIGHTS
    if not path.is_file():
        raise ModelError(f"LoRA adapter {folder.name} has no {WEIGHTS}")
    parts: dict[str, dict[str, np.ndarray]] = {}
    try:
        header = read_header(path)[0]
        for name, meta in header.items():
            m = _KEY.match(name)
            if m:
                module = m.group("module").removeprefix("base_model.model.")
                parts.setdefault(module, {})[m.group("ab")] = read_float32(path, meta)
    except (SafetensorsError, OSError, KeyError) as exc:
        raise ModelError(f"cannot read LoRA weights {folder.name}/{WEIGHTS}: "
                         f"{one_line(exc)}") from exc
    out = LoraAdapter(folder, fan_in_fan_out=bool(cfg.get("fan_in_fan_out")),
                      target_modules=cfg.get("target_modules"))
    for module, ab in sorted(parts.items()):
        if set(ab) != {"A", "B"}:
            raise ModelError(f"LoRA adapter {folder.name} has lora_{''.join(ab)} but not both "
                             f"lora_A and lora_B for {module}")
        a, b = ab["A"].astype(np.float64), ab["B"].astype(np.float64)
        r = _pattern(cfg.get("rank_pattern"), module, cfg["r"])
        alpha = _pattern(cfg.get("alpha_pattern"), module, cfg.get("lora_alpha", cfg["r"]))
        if a.ndim != 2 or b.ndim != 2 or a.shape[0] != b.shape[1]:
            raise ModelError(f"LoRA {module} in {folder.name} has A {a.shape}, B {b.shape}: "
                             "not (r, in) and (out, r)")
        scale = alpha / (math.sqrt(r) if cfg.get("use_rslora") else r)
        out.updates[module] = scale * (b @ a)
    if not out.updates:
        raise ModelError(f"LoRA adapter {folder.name} holds no lora_A/lora_B weights")
    _check_targets(cfg, sorted(out.updates), folder)
    if not any(np.any(u) for u in out.updates.values()):
        raise ModelError(f"this adapter changes nothing: every lora_B of {folder.name} is zero "
                         "(saved before training?)")
    return out


def targeted(targets, module: str) -> bool:
    """PEFT's ``check_target_module_exists``: a string is a regular expression matched whole
    (``"all-linear"``: every linear module); a list names modules by dotted suffix."""
    if isinstance(targets, str):
        return targets == "all-linear" or re.fullmatch(targets, module) is not None
    return any(module == t or module.endswith("." + t) for t in targets)


def _check_targets(cfg: dict, modules: list[str], folder: Path) -> None:
    """ModelError (one line) when ``target_modules`` is malformed, matches none of the adapter's
    modules, or leaves one out; None (PEFT's defaults) is not checked."""
    targets = cfg.get("target_modules")
    if targets is None or cfg.get("target_parameters"):
        return
    where, shown = f"{folder.name}/{CONFIG}", json.dumps(targets)
    if not (isinstance(targets, str) or isinstance(targets, list)
            and all(isinstance(t, str) for t in targets)):
        raise ModelError(f"{where}: target_modules {shown} is neither a list of module names "
                         "nor a regular expression")
    try:
        missed = [m for m in modules if not targeted(targets, m)]
    except re.error as exc:
        raise ModelError(f"{where}: target_modules {shown} is not a regular expression "
                         f"({one_line(exc)})") from exc
    if len(missed) == len(modules):
        raise ModelError(f"{where}: target_modules {shown} matches none of the adapter's "
                         f"{len(modules)} modules (e.g. {modules[0]}): PEFT would adapt no "
                         "module of the base")
    if missed:
        raise ModelError(f"{where}: the adapter holds weights for {missed[0]} ({len(missed)} "
                         f"such), which its target_modules {shown} leaves out (PEFT would not "
                         "apply them)")


def _match(module: str, keys: set[str]) -> str | None:
    """The base tensor ``<…>.weight`` whose dotted path shares the longest suffix with
    ``module`` (at least the module's last two components), or None."""
    parts = module.split(".")
    for start in range(len(parts) - 1):
        tail = ".".join(parts[start:]) + ".weight"
        hits = [k for k in keys if k == tail or k.endswith("." + tail)]
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            return None
    return None


def base_deltas(lora: LoraAdapter, weights) -> dict[str, np.ndarray]:
    """``{base tensor name: ΔW in that tensor's layout}`` of ``lora`` against the base
    reader ``weights`` (one-line ModelError for a module with no or a mismatched tensor)."""
    keys = set(weights.keys())
    out = {}
    for module, upd in lora.updates.items():
        name = _match(module, keys)
        if name is None:
            raise ModelError(f"LoRA module {module} of {lora.label} matches no weight of the "
                             "base model (a different architecture?)")
        delta = upd.T if lora.fan_in_fan_out else upd
        shape = tuple(weights.get(name).shape)
        if delta.shape != shape:
            raise ModelError(f"LoRA {module} of {lora.label} makes a {delta.shape} update, but "
                             f"the base's {name} is {shape}")
        out[name] = delta
    weights.take_storage()
    return out


class LoraWeights:
    """A weight reader of base + ΔW (``merged=True``) or of ΔW alone (float32, zeros where the
    adapter leaves a tensor alone)."""

    def __init__(self, base, deltas: dict[str, np.ndarray], *, merged: bool, label: str):
        self.base, self.deltas, self.merged, self.label = base, deltas, merged, label
        self._storage: dict[str, str] = {}

    def keys(self) -> set[str]:
        return self.base.keys()

    def get(self, name: str) -> np.ndarray:
        w = self.base.get(name)
        if self.merged:
            self._storage[name] = self.base.storage_of(name)
            if name in self.deltas:
                w = (w.astype(np.float64) + self.deltas[name]).astype(np.float32)
            return w
        self._storage[name] = "float32"
        if name in self.deltas:
            return self.deltas[name].astype(np.float32)
        return np.zeros_like(w, dtype=np.float32)

    def storage_of(self, name: str) -> str:
        return self._storage[name]

    def take_storage(self) -> dict[str, str]:
        self.base.take_storage()
        out, self._storage = self._storage, {}
        return out

    def close(self) -> None:
        self.base.close()


def lora_weights(adapter, base, *, merged: bool, revision=None, allow_pickle=False):
    """``(info, located, LoraWeights)`` of the LoRA ``adapter`` folder over the model ``base``
    (as :func:`rmtbase.models.loading.open_model` returns for a checkpoint)."""
    from .loading import open_model

    lora = adapter if isinstance(adapter, LoraAdapter) else read_lora(adapter)
    info, located, weights = open_model(base, revision, allow_pickle)
    try:
        deltas = base_deltas(lora, weights)
    except BaseException:
        weights.close()
        raise
    return info, located, LoraWeights(weights, deltas, merged=merged, label=lora.label)


def lora_heads(adapter, base, *, merged: bool = False, revision=None, allow_pickle=False):
    """Per-layer :class:`rmtbase.models.LayerHeads` of ΔW (``merged=False``) or base + ΔW for a LoRA
    ``adapter`` over ``base``; GQA keys expanded."""
    from .loading import _iterate

    info, located, weights = lora_weights(adapter, base, merged=merged, revision=revision,
                                          allow_pickle=allow_pickle)
    return _iterate(weights, located, info, False)


def lora_components(adapter, base, *, components="all", revision=None, allow_pickle=False):
    """Per-layer :class:`rmtbase.models.types.LayerComponents` of ΔW alone (float32, zeros where
    the adapter leaves a matrix alone) of the LoRA ``adapter`` over ``base``; ``components`` as
    :func:`rmtbase.models.load_components` selects them."""
    from .components import layer_components

    return layer_components(lora_weights(adapter, base, merged=False, revision=revision,
                                         allow_pickle=allow_pickle), components)


__all__ = ["LoraAdapter", "LoraWeights", "base_deltas", "is_lora", "lora_components",
           "lora_heads", "lora_weights", "read_lora", "targeted"]
