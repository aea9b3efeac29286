"""A TransformerLens model as a model input: its attention weights read as the model holds them.

``TransformerBridge`` (4.x), ``HookedTransformer`` (3.x), or any ``transformer_lens`` object with
``blocks[l].attn`` and a ``cfg``; ``W_Q[h]`` ``(d_model, d_head)`` becomes W_Q,h = ``W_Q[h]ᵀ``.
QK-norm and RoPE are not folded. Refused in one line: no ``attn``, no per-head ``W_Q`` (MLA),
sizes disagreeing with ``cfg``, meta or quantized tensors."""

from __future__ import annotations

import numpy as np

from ..errors import ModelError
from ._adapter import Adapter
from ._config import Dims
from ._errors import one_line
from ._layout import Layout, attention_parts
from ._qknorm import QKNorm
from ._reader import DTYPE_STORAGE, TensorReader, check_finite, refuse_quantized

#: ``Resolved.source`` and ``ModelInfo.architecture`` of a TransformerLens model.
SOURCE = "transformer_lens"

#: TransformerLens' per-head accessors of each rmtbase component: (weight, bias); the
#: grouped-query names of 3.x first (its ``W_K`` is expanded to the query heads).
_ACCESSORS = {"q": (("W_Q",), ("b_Q",)), "k": (("_W_K", "W_K"), ("_b_K", "b_K")),
              "v": (("_W_V", "W_V"), ("_b_V", "b_V")), "o": (("W_O",), ("b_O",))}


def is_transformer_lens(model) -> bool:
    """Whether ``model`` is a TransformerLens model (a class of the ``transformer_lens``
    package with ``blocks`` and ``cfg``), checked without importing ``transformer_lens``."""
    if isinstance(model, (str, bytes)) or not hasattr(type(model), "__mro__"):
        return False
    ours = any(str(getattr(c, "__module__", "")).split(".")[0] == "transformer_lens"
               for c in type(model).__mro__)
    return ours and hasattr(model, "cfg") and hasattr(model, "blocks")


def _cfg_int(cfg, name: str, default=None) -> int:
    v = getattr(cfg, name, None)
    if v is None:
        v = default
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or int(v) < 1:
        raise ModelError(f"TransformerLens model: cfg.{name}={v!r} is not a positive integer")
    return int(v)


def weights_processing(model) -> str:
    """``"processed"`` where the model says its weights were processed, ``"unprocessed"`` where a
    bridge says not, ``""`` where nothing says."""
    flag = getattr(model, "_weights_processed", None)
    if isinstance(flag, bool):
        return "processed" if flag else "unprocessed"
    if getattr(model.cfg, "normalization_type", None) in ("LNPre", "RMSPre"):
        return "processed"
    return ""


def tl_config(model) -> tuple[dict, str, str]:
    """``(cfg, name, model_class)`` of a TransformerLens ``model``: the config dict rmtbase reads,
    ``cfg.model_name``, and its class with the processing."""
    cfg = model.cfg
    n_layers = _cfg_int(cfg, "n_layers")
    n_heads = _cfg_int(cfg, "n_heads")
    n_kv = _cfg_int(cfg, "n_key_value_heads", n_heads)
    d_head = _cfg_int(cfg, "d_head")
    if n_heads % n_kv:
        raise ModelError(f"TransformerLens model: cfg.n_heads={n_heads} is not a multiple of "
                         f"cfg.n_key_value_heads={n_kv}")
    rotary = 0.0
    if getattr(cfg, "positional_embedding_type", "") == "rotary":
        rd = getattr(cfg, "rotary_dim", None)
        rotary = 1.0 if rd is None else min(1.0, float(rd) / d_head)
    try:
        blocks = len(model.blocks)
    except TypeError as exc:
        raise ModelError(f"TransformerLens model: its blocks cannot be counted "
                         f"({one_line(exc)})") from exc
    if blocks != n_layers:
        raise ModelError(f"TransformerLens model: cfg.n_layers={n_layers} but it has {blocks} "
                         "blocks")
    missing = [i for i, b in enumerate(model.blocks) if getattr(b, "attn", None) is None]
    if missing:
        raise ModelError(f"TransformerLens model: block {missing[0]} has no attn "
                         f"({len(missing)} of {n_layers} blocks so; hybrid models are not read)")
    hf = getattr(getattr(model, "original_model", None), "config", None)
    inner = (getattr(hf, "architectures", None) or [getattr(hf, "model_type", "")])[0] \
        if hf is not None else ""
    qk, hf_rotary = _hf_facts(model, hf)
    rotary = rotary if hf_rotary is None else hf_rotary
    cls = type(model).__name__ + (f"({inner})" if inner else "")
    state = weights_processing(model)
    out = {"model_type": SOURCE, "d_model": _cfg_int(cfg, "d_model"), "n_heads": n_heads,
           "n_key_value_heads": n_kv, "d_head": d_head, "n_layers": n_layers,
           "rotary_fraction": rotary, "qk_norm": qk, "processing": state}
    name = str(getattr(cfg, "model_name", "") or type(model).__name__)
    return out, name, cls + (f", {state}" if state else "")


def _hf_facts(model, hf) -> tuple[str | None, float | None]:
    """``(q/k norm label or None, rotary fraction or None)``: a bridge's from the config it wraps
    (its ``cfg`` misreports both); for 3.x ``cfg.use_qk_norm`` as ``rms_head``, no rotary."""
    if hf is not None and hasattr(hf, "to_dict"):
        from .registry import ADAPTERS

        hf_cfg = hf.to_dict()
        adapter = ADAPTERS.get(hf_cfg.get("model_type"))
        if adapter is not None:
            try:
                norm, rotary = adapter.qk_norm(hf_cfg), adapter.dims(hf_cfg).rotary_fraction
            except ModelError:
                return None, None
            return (None if norm is None else norm.label), rotary
    return ("rms_head" if getattr(model.cfg, "use_qk_norm", False) else None), None


class _UnreadQKNorm(QKNorm):
    """A TransformerLens model's q/k norm: said, not folded (its gains are not read)."""

    def check_foldable(self, arch: str) -> None:
        raise ModelError("fold_qk_norm: the q/k norm gains of a TransformerLens model are not "
                         "read; score W_Q, W_K as the model holds them (before the norm)")


class TransformerLensAdapter(Adapter):
    """The per-head accessors under names ``blocks.{i}.attn.{q,k,v,o}.weight`` (and
    ``.bias``), presented by :class:`TLWeights` in the ``nn.Linear`` (out, in) layout."""

    model_types = (SOURCE,)
    layouts = (Layout(attention_parts(*(f"blocks.{{i}}.attn.{p}" for p in "qkvo"))),)

    def dims(self, cfg: dict) -> Dims:
        return Dims(d=cfg["d_model"], d_h=cfg["d_head"], n_layers=cfg["n_layers"],
                    n_heads=cfg["n_heads"], n_kv_heads=cfg["n_key_value_heads"],
                    rotary_fraction=cfg["rotary_fraction"])

    def qk_norm(self, cfg: dict) -> QKNorm | None:
        if not cfg.get("qk_norm"):
            return None
        kind, scope = cfg["qk_norm"].split("_", 1)
        return _UnreadQKNorm("", "", kind=kind, scope=scope)


ADAPTER = TransformerLensAdapter()


def _accessor(attn, names: tuple[str, ...], where: str):
    for n in names:
        try:
            t = getattr(attn, n, None)
        except Exception as exc:  # the bridge raises its own kinds (meta, quantized, MLA)
            raise ModelError(f"cannot read {where}.{n}: {one_line(exc)}") from exc
        if t is not None:
            return t
    return None


class TLWeights(TensorReader):
    """Reader of a TransformerLens model's attention weights (the interface of
    :mod:`rmtbase.models.weights`); one tensor converted when asked for, no copy kept."""

    def __init__(self, model, label: str, cfg: dict):
        self.label, self._model, self._cfg = label, model, cfg
        self._storage: dict[str, str] = {}
        keys = set()
        for i, block in enumerate(model.blocks):
            for part, (_, bias) in _ACCESSORS.items():
                keys.add(f"blocks.{i}.attn.{part}.weight")
                if _accessor(block.attn, bias, f"blocks.{i}.attn") is not None:
                    keys.add(f"blocks.{i}.attn.{part}.bias")
        self._keys = keys

    def get(self, name: str) -> np.ndarray:
        if name not in self._keys:
            raise ModelError(f"tensor {name!r} not found in the TransformerLens model "
                             f"{self.label}")
        _, i, _, part, kind = name.split(".")
        where = f"blocks.{i}.attn"
        weight, bias = _ACCESSORS[part]
        t = _accessor(self._model.blocks[int(i)].attn, weight if kind == "weight" else bias,
                      where)
        if t is None:
            raise ModelError(f"{where} of the TransformerLens model {self.label} has no "
                             f"per-head {'/'.join(weight)}")
        if getattr(t, "is_meta", False):
            raise ModelError(f"{where}.{weight[-1]} of {self.label} is on the meta device "
                             "(not loaded)")
        if not t.is_floating_point() or t.element_size() < 2:
            refuse_quantized(name, str(t.dtype), f"TransformerLens model {self.label}")
        self._storage[name] = DTYPE_STORAGE.get(str(t.dtype), str(t.dtype))
        a = np.asarray(t.detach().to("cpu").float().numpy(), dtype=np.float32)
        a = check_finite(a, f"{where}.{weight[-1] if kind == 'weight' else bias[-1]}",
                         f"TransformerLens model {self.label}")
        return self._linear(a, part, kind, where)

    def _linear(self, a: np.ndarray, part: str, kind: str, where: str) -> np.ndarray:
        """The accessor's per-head tensor in the ``nn.Linear`` layout (module docstring)."""
        c = self._cfg
        heads = c["n_heads"] if part in ("q", "o") else c["n_key_value_heads"]
        d, dh = c["d_model"], c["d_head"]
        if kind == "bias":
            want = (d,) if part == "o" else (heads, dh)
            if a.shape != want:
                raise ModelError(f"{where} bias of {self.label} has shape {a.shape}, expected "
                                 f"{want}")
            return a.reshape(-1)
        want = (heads, dh, d) if part == "o" else (heads, d, dh)
        if a.shape != want:
            raise ModelError(f"{where}.W_{part.upper()} of {self.label} has shape {a.shape}, "
                             f"expected {want} (n_heads, d_model, d_head as cfg says)")
        if part == "o":  # out = z @ W_O: o[:, h·d_h + r] = W_O[h, r, :]
            return np.ascontiguousarray(a.reshape(heads * dh, d).T)
        return np.ascontiguousarray(a.transpose(0, 2, 1).reshape(heads * dh, d))

    def close(self) -> None:
        self._model = None


__all__ = ["ADAPTER", "SOURCE", "TLWeights", "TransformerLensAdapter", "is_transformer_lens",
           "tl_config", "weights_processing"]
