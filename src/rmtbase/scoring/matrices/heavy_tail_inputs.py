"""The matrices a heavy-tail table reads, one layer at a time: :func:`layer_matrices`.

A model's own matrices ((out, in), stored values: :func:`rmtbase.models.load_components`), each
with its storage and the storage of its null (:func:`storages`: the whole-matrix score's rule,
:func:`.cells.matrix_null_storage`); or, given ``base``, what changed from the base: ΔW = W − W_base
of a fine-tune (same architecture and shapes), or ΔW = s·B·A of a PEFT LoRA adapter over its base
(:mod:`rmtbase.models.lora`; zero where the adapter leaves a matrix alone). A difference is not
stored in any format: its null is float32. :func:`undescribed` says why a matrix has no
metrics (all zero, fewer than :data:`~rmtbase.stats.heavy_tail.SMALL_N` eigenvalues,
non-finite entries)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ...errors import InputError


def storages(w, lc, name, quantized_null: str, where: str):
    """(storage, null storage) names of matrix ``name`` of ``lc`` under ``quantized_null``
    (:func:`.cells.matrix_null_storage`, as the whole-matrix score)."""
    from ...stats.storage import FLOAT32, storage_record
    from .cells import _detect, matrix_null_storage

    storage = storage_record(lc.storage.get(name, "float32"))
    if storage.is_float:
        detected = _detect(w, storage)
    else:
        detected, storage = storage, FLOAT32
    _, null = matrix_null_storage(storage, detected, quantized_null, w.shape[1], where)
    return storage.name, null.name


def undescribed(w) -> str | None:
    """Why WeightWatcher's metrics cannot describe the matrix ``w`` (m, n), or None: non-finite
    entries, every entry zero, or fewer than 20 eigenvalues (min(m, n) < 20: the power-law fit's
    :data:`~rmtbase.stats.heavy_tail.SMALL_N`, and every MoE router of few experts)."""
    from ...stats.heavy_tail import SMALL_N

    m, n = np.shape(w)
    if min(m, n) < SMALL_N:
        return f"{min(m, n)} eigenvalues, fewer than {SMALL_N}"
    if not np.isfinite(w).all():
        return "non-finite entries"
    if not np.any(w):
        return "every entry zero"
    return None


def _own(model, components, revision, allow_pickle, quantized_null, label):
    from ...models import load_components

    for lc in load_components(model, components=components, revision=revision,
                              allow_pickle=allow_pickle):
        for name, w in lc.matrices.items():
            where = f"layer {lc.layer} {name} of {label}"
            yield (int(lc.layer), name, w, *storages(w, lc, name, quantized_null, where))


def _lora(adapter, base, components, revision, allow_pickle):
    from ...models.lora import lora_components

    for lc in lora_components(adapter, base, components=components, revision=revision,
                              allow_pickle=allow_pickle):
        for name, w in lc.matrices.items():
            yield int(lc.layer), name, w, "float32", "float32"


def _finetune(model, base, components, revision, allow_pickle):
    from ...models import load_components, model_info
    from ..description import model_label

    a, b = model_info(model, revision=revision), model_info(base)
    if (a.architecture, a.n_layers) != (b.architecture, b.n_layers):
        raise InputError(f"{model_label(a.name)} ({a.architecture}, {a.n_layers} layers) is not "
                         f"a fine-tune of {model_label(b.name)} ({b.architecture}, "
                         f"{b.n_layers} layers)")
    tuned = load_components(model, components=components, revision=revision,
                            allow_pickle=allow_pickle)
    plain = load_components(base, components=components, allow_pickle=allow_pickle)
    for lt, lb in zip(tuned, plain, strict=True):
        for name, w in lt.matrices.items():
            w0 = lb.matrices.get(name)
            if w0 is None or w0.shape != w.shape:
                raise InputError(f"layer {lt.layer} {name}: {model_label(a.name)} has shape "
                                 f"{w.shape}, {model_label(b.name)} "
                                 f"{None if w0 is None else w0.shape}")
            delta = np.asarray(w, np.float64) - np.asarray(w0, np.float64)
            yield int(lt.layer), name, delta, "float32", "float32"


def layer_matrices(model, *, base=None, components="all", revision=None,
                   allow_pickle: bool = False, quantized_null: str = "auto",
                   label: str = "") -> Iterator[tuple]:
    """``(layer, name, w, storage, null storage)`` of every matrix of ``model`` (module
    docstring), or of ΔW against ``base`` (a LoRA adapter folder as ``model``, or a fine-tune);
    ``label`` names the model in messages. Checkpoint and selection are checked first."""
    from ...models.lora import is_lora

    if base is None:
        return _own(model, components, revision, allow_pickle, quantized_null, label)
    if quantized_null not in ("auto", "none"):
        raise InputError("--quantized-null: a difference W - W_base is stored in no format; "
                         "its null is float32")
    if is_lora(model):
        return _lora(model, base, components, revision, allow_pickle)
    return _finetune(model, base, components, revision, allow_pickle)


def describe(model=None, **kw) -> list[tuple]:
    """WeightWatcher's ``describe()``: ``(layer, name, rows, cols, storage, null storage)`` of
    every matrix :func:`layer_matrices` reads of ``model`` (None: the embedded MiniLM, as
    :func:`.heavy_tail.score_heavy_tail`; ``kw``: its keywords); nothing is computed."""
    if model is None:
        from ...models import default_model_path

        model = default_model_path()
    return [(layer, name, *np.shape(w), storage, null)
            for layer, name, w, storage, null in layer_matrices(model, **kw)]


__all__ = ["describe", "layer_matrices", "storages", "undescribed"]
