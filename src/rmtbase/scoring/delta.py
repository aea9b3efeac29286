"""Score what a fine-tune changed, per head: ``score_delta(finetuned, base)`` and LoRA adapters.

For every (layer, head) the *change* of the query/key factors, ΔW_Q = W_Qᶠᵗ − W_Qᵇᵃˢᵉ and
ΔW_K = W_Kᶠᵗ − W_Kᵇᵃˢᵉ (``(d_h, d)``, GQA keys expanded as in :func:`rmtbase.models.load_heads`),
is scored exactly as :func:`rmtbase.scoring.score.score_model` scores a head, with ΔW_Q, ΔW_K
in place of W_Q, W_K (:func:`rmtbase.scoring.score.score_heads`).

The null for the delta. ΔW_Q and ΔW_K have i.i.d. N(0, σ²) entries, each at its own σ (the
delta's measured rms; scale-carrying statistics are self-normalised, so nothing is estimated):
a fine-tune whose update to a head looks like dense isotropic noise is not flagged; an update
with structure (low rank, aligned directions, heavy-tailed entries) is. The ``qk.*``
statistics are those of the product of the deltas, ΔW_Qᵀ ΔW_K (what the null's factors
give), **not** of the change of the bilinear form ΔW_QK = W_QKᶠᵗ − W_QKᵇᵃˢᵉ =
ΔW_Qᵀ W_Kᵇ + W_Qᵇᵀ ΔW_K + ΔW_Qᵀ ΔW_K, whose law under that null depends on the base weights.
ΔW_QK enters only descriptively: ``delta_rel_qk`` = ‖ΔW_QK‖_F / ‖W_QKᵇᵃˢᵉ‖_F, computed from
the thin factorisation ΔW_QK = [W_Qᶠᵗ; −W_Qᵇ]ᵀ [W_Kᶠᵗ; W_Kᵇ] through 2d_h × 2d_h Gram
matrices (‖FᵀG‖²_F = tr(FFᵀ GGᵀ); never a d × d matrix), beside ``delta_rel_q`` =
‖ΔW_Q‖_F/‖W_Qᵇ‖_F and ``delta_rel_k`` per head.

Storage. A difference of two 16-bit or block-quantised checkpoints lies on the lattice of the
weights, whose spacing can be as large as the change itself; the null's entries are float32
Gaussians. When either checkpoint is not float32 the histogram statistics of ΔW_Q, ΔW_K
(:data:`rmtbase.decision.family.HISTOGRAM`) are left out of the decision (``unreliable``).
All layers' deltas are held at once (2·n_layers·n_heads·d_h·d float32 values).

LoRA (PEFT adapter folder: ``adapter_config.json`` + ``adapter_model.safetensors``, tensors
``…layers.{i}.self_attn.{q,k}_proj.lora_{A,B}.weight``): ΔW = s·B·A per target module with
s = lora_alpha/r (``use_rslora``: lora_alpha/√r), Hu et al. 2021. The base model (``base``) is
needed for the head layout and the relative changes; both q_proj and k_proj must be targeted.
A LoRA update has rank ≤ r by construction, so where r < d_h its spectral statistics differ
from the dense Gaussian null whatever it learned; its entry-law statistics remain informative.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import xarray as xr

from ..errors import InputError, ModelError

_SIZES = ("architecture", "d", "d_h", "n_layers", "n_heads", "n_kv_heads")
_LORA = re.compile(r"layers\.(\d+)\.(?:self_attn|attention)\.(q_proj|k_proj)\.lora_([AB])"
                   r"(?:\.default)?\.weight$")


def is_lora(path) -> bool:
    """True for a folder holding a PEFT adapter (``adapter_config.json``)."""
    try:
        return Path(path).is_dir() and (Path(path) / "adapter_config.json").is_file()
    except (OSError, TypeError, ValueError):
        return False


def _frob2(a, b=None):
    """Squared Frobenius norm per head of a (heads, m, d), or of aᵀb from Gram matrices."""
    a = np.asarray(a, np.float64)
    if b is None:
        return np.einsum("hij,hij->h", a, a)
    b = np.asarray(b, np.float64)
    return np.einsum("hij,hji->h", a @ a.transpose(0, 2, 1), b @ b.transpose(0, 2, 1))


def _rel(delta2, base2):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt(delta2) / np.sqrt(base2)


def lora_deltas(adapter, info) -> dict[int, dict[str, np.ndarray]]:
    """``{layer: {"q": ΔW (n_heads·d_h, d), "k": ΔW (n_kv·d_h, d)}}`` = s·B·A of a PEFT adapter
    folder, checked against the base's ``info`` (one-line ModelError on any mismatch)."""
    from ..models._safetensors import SafetensorsError, read_float32, read_header

    folder = Path(adapter)
    try:
        cfg = json.loads((folder / "adapter_config.json").read_text())
        r, alpha = cfg["r"], cfg.get("lora_alpha", cfg["r"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ModelError(f"cannot read the LoRA config {folder / 'adapter_config.json'}: "
                         f"{exc!s}".splitlines()[0]) from exc
    if isinstance(r, bool) or not isinstance(r, int) or r < 1 \
            or isinstance(alpha, bool) or not isinstance(alpha, int | float):
        raise ModelError(f"LoRA config of {folder}: r={r!r}, lora_alpha={alpha!r} are not a "
                         "positive integer and a number")
    scale = alpha / (np.sqrt(r) if cfg.get("use_rslora") else r)
    path = folder / "adapter_model.safetensors"
    try:
        header = read_header(path)[0]
        parts: dict[tuple[int, str], dict[str, np.ndarray]] = {}
        for name, meta in header.items():
            m = _LORA.search(name)
            if m:
                parts.setdefault((int(m.group(1)), m.group(2)), {})[m.group(3)] = \
                    read_float32(path, meta)
    except (SafetensorsError, OSError) as exc:
        raise ModelError(f"cannot read LoRA weights {path}: {exc!s}".splitlines()[0]) from exc
    rows = {"q_proj": info.n_heads * info.d_h, "k_proj": info.n_kv_heads * info.d_h}
    out: dict[int, dict[str, np.ndarray]] = {}
    for (layer, mod), ab in sorted(parts.items()):
        if set(ab) != {"A", "B"}:
            raise ModelError(f"LoRA adapter {folder} has lora_{''.join(ab)} but not both "
                             f"lora_A and lora_B for layer {layer} {mod}")
        a, b = ab["A"], ab["B"]
        if a.shape != (r, info.d) or b.shape != (rows[mod], r):
            raise ModelError(f"LoRA {mod} of layer {layer} in {folder} has A {a.shape}, "
                             f"B {b.shape}; the base needs A ({r}, {info.d}), "
                             f"B ({rows[mod]}, {r})")
        if layer >= info.n_layers:
            raise ModelError(f"LoRA adapter {folder} changes layer {layer}, but the base has "
                             f"{info.n_layers} layers")
        out.setdefault(layer, {})[mod[0]] = (scale * (b.astype(np.float64)
                                                      @ a.astype(np.float64))).astype(np.float32)
    targeted = {k for v in out.values() for k in v}
    if targeted != {"q", "k"}:
        raise ModelError(f"LoRA adapter {folder} changes {sorted(targeted) or 'no'} q/k "
                         "projections; rmtbase scores an adapter that targets both q_proj "
                         "and k_proj")
    return out


def _delta_layers(ft_layers, base_layers, info, norms: dict):
    """ΔW per layer as LayerHeads (float32 storage), recording per-head norms in ``norms``."""
    from ..models import LayerHeads

    for ft, base in zip(ft_layers, base_layers, strict=True):
        if ft.wq.shape != base.wq.shape or ft.wk.shape != base.wk.shape:
            raise ModelError(f"layer {ft.layer}: fine-tuned W_Q/W_K {ft.wq.shape} differ in "
                             f"shape from the base's {base.wq.shape}")
        dq, dk = ft.wq - base.wq, ft.wk - base.wk
        f = np.concatenate([ft.wq, -base.wq], axis=1)
        g = np.concatenate([ft.wk, base.wk], axis=1)
        norms.setdefault("q", []).append(_rel(_frob2(dq), _frob2(base.wq)))
        norms.setdefault("k", []).append(_rel(_frob2(dk), _frob2(base.wk)))
        norms.setdefault("qk", []).append(_rel(_frob2(f, g), _frob2(base.wq, base.wk)))
        norms.setdefault("storage", set()).update({ft.storage, base.storage,
                                                   ft.quantisation, base.quantisation})
        yield LayerHeads(layer=ft.layer, wq=dq, wk=dk)


def _lora_layers(deltas, base_layers, info):
    """(fine-tuned = base + ΔW, base) layer pairs of a LoRA adapter."""
    from ..models import LayerHeads

    g = info.group_size
    for base in base_layers:
        d = deltas.get(base.layer, {})
        dq = d.get("q", np.zeros((info.n_heads * info.d_h, info.d), np.float32))
        dk = d.get("k", np.zeros((info.n_kv_heads * info.d_h, info.d), np.float32))
        dq = dq.reshape(info.n_heads, info.d_h, info.d)
        dk = np.repeat(dk.reshape(info.n_kv_heads, info.d_h, info.d), g, axis=0)
        yield (LayerHeads(layer=base.layer, wq=base.wq + dq, wk=base.wk + dk,
                          storage=base.storage, quantisation=base.quantisation), base)


def _check_delta_options(info, options: dict) -> None:
    """score_heads' option checks and the null's memory check, up front (one line)."""
    from .null_checks import check_null_size
    from .score import _check_options, _stat_kind

    _check_options(options.get("alpha", 0.05), options.get("draws"), "gaussian",
                   options.get("quantized_null", "auto"), options.get("max_draws", 100_000),
                   options.get("element_draws", 200))
    kind, names = _stat_kind(options.get("stats", "all"))
    check_null_size(info, kind, names, options.get("draws"), "gaussian",
                    options.get("element_draws", 200))


def score_delta(finetuned, base=None, *, revision=None, base_revision=None,
                allow_pickle=False, **options) -> xr.Dataset:
    """Score the per-head change from ``base`` to ``finetuned`` (module docstring).

    ``finetuned``: a model (hub id, folder, GGUF file, loaded model) or a PEFT LoRA adapter
    folder; ``base``: the model it was tuned from (required). Options as for
    :func:`rmtbase.scoring.score.score_model`. Returns that function's Dataset, computed on
    ΔW_Q, ΔW_K, plus ``delta_rel_q``, ``delta_rel_k``, ``delta_rel_qk`` (layer, head) and attrs
    ``delta_of``, ``delta_base``, ``delta_kind`` (``"finetune"`` or ``"lora"``).
    """
    from ..decision.family import HISTOGRAM
    from ..models import load_heads, model_info
    from ..stats import ELEMENT_STATS
    from .score import score_heads

    if base is None:
        raise InputError("scoring a fine-tune's change needs its base model (--base BASE)")
    binfo = model_info(base, revision=base_revision)
    _check_delta_options(binfo, options)  # absurd draws: refused before any weight is read
    lora = isinstance(finetuned, str | Path) and is_lora(finetuned)
    if lora:
        if revision is not None:
            raise InputError("revision= applies to hub ids, not to a LoRA adapter folder")
        deltas = lora_deltas(finetuned, binfo)
        pairs = list(_lora_layers(deltas, load_heads(base, revision=base_revision,
                                                     allow_pickle=allow_pickle), binfo))
        ft_layers, base_layers = (p[0] for p in pairs), (p[1] for p in pairs)
        finfo = binfo
    else:
        finfo = model_info(finetuned, revision=revision)
        diff = [f"{k} {getattr(finfo, k)} vs {getattr(binfo, k)}" for k in _SIZES
                if getattr(finfo, k) != getattr(binfo, k)]
        if diff:
            raise ModelError(f"{finfo.name} and its base {binfo.name} differ: {'; '.join(diff)}")
        ft_layers = load_heads(finetuned, revision=revision, allow_pickle=allow_pickle)
        base_layers = load_heads(base, revision=base_revision, allow_pickle=allow_pickle)
    norms: dict = {}
    from .description import model_label

    # "<tuned> vs <base>" by folder names (never an absolute path; for a LoRA adapter the
    # adapter's folder, not the base's name twice)
    tuned = model_label(os.fspath(finetuned) if isinstance(finetuned, str | Path)
                        else finfo.name)
    label = f"{tuned} vs {model_label(binfo.name)}"
    info = replace(finfo, name=label)
    # read every layer's delta first: the storages (which decide whether the histogram
    # statistics can be trusted) are known only once the tensors are read
    layers = list(_delta_layers(ft_layers, base_layers, info, norms))
    lattice = norms["storage"] - {"float32", None}
    unreliable = tuple(f"{m}.{s}" for m in ("q", "k") for s in ELEMENT_STATS
                       if s in HISTOGRAM) if lattice else ()
    ds = score_heads(info, layers, label=label, **options, unreliable=unreliable)
    for k in ("q", "k", "qk"):
        ds[f"delta_rel_{k}"] = (("layer", "head"), np.stack(norms[k]))
    ds["delta_rel_q"].attrs["definition"] = "||dW_Q||_F / ||W_Q base||_F per head"
    ds["delta_rel_k"].attrs["definition"] = "||dW_K||_F / ||W_K base||_F per head"
    ds["delta_rel_qk"].attrs["definition"] = ("||W_QK finetuned - W_QK base||_F / "
                                              "||W_QK base||_F per head (thin factorisation)")
    ds.attrs.update(
        delta_of=tuned, delta_base=model_label(binfo.name),
        delta_kind="lora" if lora else "finetune",
        null=("the change dW_Q, dW_K of each head with i.i.d. N(0, sigma^2) entries at its own "
              "rms (each scored like a head's W_Q, W_K; qk.* statistics are of dW_Q^T dW_K, "
              "not of W_QK finetuned - W_QK base)"))
    return ds
