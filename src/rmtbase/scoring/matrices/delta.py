"""Score what a fine-tune changed, per head: ``score_delta(finetuned, base)`` and LoRA adapters.

ΔW_Q, ΔW_K are scored like W_Q, W_K against N(0, σ²) deltas at their own rms; ``qk.*`` are those
of ΔW_Qᵀ ΔW_K (ΔW_QK's null depends on the base). ``delta_rel_qk`` = ‖ΔW_QK‖_F / ‖W_QKᵇᵃˢᵉ‖_F,
``delta_rel_q``, ``delta_rel_k`` are descriptive. Lattice-valued differences leave histogram
statistics out. LoRA: ΔW = s·B·A, float32; a one-sided adapter is scored as (ΔW_Q, W_Kᵇᵃˢᵉ);
bit-identical heads are not scored. For r < d_h spectral statistics differ from the dense null
whatever was learned. The ``model`` attr is ``<tuned> vs <base>``."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import xarray as xr

from ...errors import InputError, ModelError, with_keywords
from ...models.lora import is_lora
from ..description import model_label
from ..settings import ScoreSettings
from .unchanged import take_out

_SIZES = ("architecture", "d", "d_h", "n_layers", "n_heads", "n_kv_heads")


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


def _norms(norms: dict, ftq, ftk, bq, bk, dq, dk) -> None:
    """Record the per-head relative changes of W_Q, W_K and W_QK (thin factorisation)."""
    f = np.concatenate([ftq, -bq], axis=1)
    g = np.concatenate([ftk, bk], axis=1)
    norms.setdefault("q", []).append(_rel(_frob2(dq), _frob2(bq)))
    norms.setdefault("k", []).append(_rel(_frob2(dk), _frob2(bk)))
    norms.setdefault("qk", []).append(_rel(_frob2(f, g), _frob2(bq, bk)))


def _delta_layers(ft_layers, base_layers, info, norms: dict):
    """ΔW per layer as LayerHeads (float32 storage), recording per-head norms in ``norms``."""
    from ...models import LayerHeads

    for ft, base in zip(ft_layers, base_layers, strict=True):
        if ft.wq.shape != base.wq.shape or ft.wk.shape != base.wk.shape:
            raise ModelError(f"layer {ft.layer}: fine-tuned W_Q/W_K {ft.wq.shape} differ in "
                             f"shape from the base's {base.wq.shape}")
        dq, dk = ft.wq - base.wq, ft.wk - base.wk
        _norms(norms, ft.wq, ft.wk, base.wq, base.wk, dq, dk)
        norms.setdefault("storage", set()).update({ft.storage, base.storage,
                                                   ft.quantisation, base.quantisation})
        yield LayerHeads(layer=ft.layer, wq=dq, wk=dk)


def _pair(delta, base, sides):
    """The factor scored for one side of a layer: the change where the adapter changes this
    side, per head; the base's factor where it does not (whole side, or one head's)."""
    if not sides:
        return base
    zero = ~delta.reshape(delta.shape[0], -1).any(axis=1)
    return np.where(zero[:, None, None], base, delta)


def _placeholders(layers):
    """Layers with each bit-identical head (ΔW_Q = ΔW_K = 0) on a placeholder, and their
    (layer, head) mask (:mod:`.unchanged`)."""
    from .unchanged import placeholder

    out, masks = [], []
    for lh in layers:
        zero = ~(lh.wq.reshape(lh.n_heads, -1).any(axis=1)
                 | lh.wk.reshape(lh.n_heads, -1).any(axis=1))
        masks.append(zero)
        out.append(replace(lh, wq=placeholder(lh.wq, zero, seed=2 * lh.layer),
                           wk=placeholder(lh.wk, zero, seed=2 * lh.layer + 1)))
    return out, np.stack(masks)


def lora_layers(adapter, base, *, base_revision=None, allow_pickle=False,
                norms: dict | None = None):
    """``(layers, sides, unchanged)`` of LoRA ``adapter`` over ``base``: LayerHeads to score, sides
    changed, and the mask of bit-identical heads; relative changes go to ``norms``. ModelError when
    no query/key weight changes."""
    from ...models import LayerHeads, load_heads
    from ...models.lora import lora_heads, read_lora
    from .unchanged import placeholder

    lora = read_lora(adapter)
    norms = {} if norms is None else norms
    deltas = list(lora_heads(lora, base, revision=base_revision, allow_pickle=allow_pickle))
    sides = {s for dl in deltas for s, w in (("q", dl.wq), ("k", dl.wk)) if np.any(w)}
    if not sides:
        raise ModelError(f"LoRA adapter {lora.label} changes no query/key weights (it changes "
                         f"{', '.join(sorted(lora.updates)[:3])}…); nothing to score")
    bases = load_heads(base, revision=base_revision, allow_pickle=allow_pickle)
    out, unchanged = [], []
    for dl, bl in zip(deltas, bases, strict=True):
        _norms(norms, bl.wq + dl.wq, bl.wk + dl.wk, bl.wq, bl.wk, dl.wq, dl.wk)
        zero = ~(dl.wq.reshape(dl.n_heads, -1).any(axis=1)
                 | dl.wk.reshape(dl.n_heads, -1).any(axis=1))
        wq = placeholder(_pair(dl.wq, bl.wq, "q" in sides), zero, seed=2 * bl.layer)
        wk = placeholder(_pair(dl.wk, bl.wk, "k" in sides), zero, seed=2 * bl.layer + 1)
        unchanged.append(zero)
        out.append(LayerHeads(layer=bl.layer, wq=wq, wk=wk))
    return out, sides, np.stack(unchanged)


def _name(model) -> str:
    """A model's display name: a folder or adapter by its folder name, a hub id as given, a
    loaded object by its ``_name_or_path`` (never an absolute path)."""
    if isinstance(model, str | Path):
        text = str(model)
        if Path(text).exists():
            return Path(text).resolve().name or text
        return model_label(text)
    cfg = getattr(model, "config", None)
    return model_label(str(getattr(cfg, "_name_or_path", "") or type(model).__name__))


def delta_label(finetuned, base) -> str:
    """``"<tuned> vs <base>"`` by display names; where the two names are equal (``a/model``,
    ``b/model``), the parent folder is added to each."""
    a, b = _name(finetuned), _name(base)
    if a == b and isinstance(finetuned, str | Path) and isinstance(base, str | Path):
        pa, pb = Path(str(finetuned)).resolve(), Path(str(base)).resolve()
        a, b = f"{pa.parent.name}/{pa.name}", f"{pb.parent.name}/{pb.name}"
    return f"{a} vs {b}"


def _check_delta_settings(info, s: ScoreSettings) -> None:
    """The null's fit for a delta and its memory check, up front (one line)."""
    from ..nulls.checks import check_null_size

    s.null.require("scores_deltas", "scoring a fine-tune's change")
    check_null_size(info, s.kind, s.names, s.draws, s.null, s.element_draws)


def _add_delta_vars(ds, norms: dict, finetuned, base, lora: bool, sides) -> xr.Dataset:
    """The change's relative sizes (``delta_rel_*``) and the attrs saying what was scored
    against which null (:func:`score_delta`'s docstring)."""
    for k in ("q", "k", "qk"):
        ds[f"delta_rel_{k}"] = (("layer", "head"), np.stack(norms[k]))
    ds["delta_rel_q"].attrs["definition"] = "||dW_Q||_F / ||W_Q base||_F per head"
    ds["delta_rel_k"].attrs["definition"] = "||dW_K||_F / ||W_K base||_F per head"
    ds["delta_rel_qk"].attrs["definition"] = ("||W_QK finetuned - W_QK base||_F / "
                                              "||W_QK base||_F per head (thin factorisation)")
    null = ("the change dW_Q, dW_K of each head with i.i.d. N(0, sigma^2) entries at its own "
            "rms (each scored like a head's W_Q, W_K; qk.* statistics are of dW_Q^T dW_K, "
            "not of W_QK finetuned - W_QK base)")
    if lora and len(sides) == 1:
        (side,) = sides
        other = "k" if side == "q" else "q"
        null = (f"the adapter changes W_{side.upper()} only: each head is scored as (dW_{side.upper()}, "
                f"W_{other.upper()} of the base), both against i.i.d. N(0, sigma^2) factors at "
                f"their own rms; qk.* statistics are of the change of W_QK itself; {other}.* "
                "statistics describe the base and are left out of the decision")
    ds.attrs.update(delta_of=_name(finetuned), delta_base=_name(base),
                    delta_kind="lora" if lora else "finetune", null=null)
    if lora:
        ds.attrs["delta_sides"] = ",".join(sorted(sides))
    return ds


def score_delta(finetuned, base=None, *, revision=None, base_revision=None,
                allow_pickle=False, settings: ScoreSettings | None = None, progress=True,
                **options) -> xr.Dataset:
    """Score the per-head change from ``base`` to ``finetuned`` (a model or a PEFT LoRA folder).

    settings (its fields also as keywords) and progress as
    :func:`rmtbase.scoring.score.score_model` (a null with
    :attr:`~rmtbase.stats.null_protocol.Null.scores_deltas`); the Dataset's model is
    ``"<tuned> vs <base>"``. Returns :func:`~rmtbase.scoring.score.score_model`'s
    Dataset on ΔW_Q, ΔW_K, plus ``delta_rel_q``, ``delta_rel_k``, ``delta_rel_qk`` (layer,
    head) and attrs ``delta_of``, ``delta_base``, ``delta_kind`` (``"finetune"`` |
    ``"lora"``), ``delta_sides`` for an adapter."""
    from ...decision.family import HISTOGRAM
    from ...models import load_heads, model_info
    from ...stats import ELEMENT_STATS
    from ..score import score_heads

    s = with_keywords(ScoreSettings, settings, options, "score_delta")  # checked, once
    if base is None:
        raise InputError("scoring a fine-tune's change needs its base model (--base BASE)")
    binfo = model_info(base, revision=base_revision)
    _check_delta_settings(binfo, s)  # absurd draws: refused before any weight is read
    lora = isinstance(finetuned, str | Path) and is_lora(finetuned)
    label = delta_label(finetuned, base)
    norms: dict = {}
    unreliable: tuple = ()
    if lora:
        if revision is not None:
            raise InputError("revision= applies to hub ids, not to a LoRA adapter folder")
        layers, sides, unchanged = lora_layers(finetuned, base, base_revision=base_revision,
                                               allow_pickle=allow_pickle, norms=norms)
        # the side read from the base describes the base, not the adapter
        unreliable = tuple(f"{m}.{s}" for m in ("q", "k") if m not in sides
                           for s in (*ELEMENT_STATS, "rms"))
        info = replace(binfo, name=label)
    else:
        finfo = model_info(finetuned, revision=revision)
        diff = [f"{k} {getattr(finfo, k)} vs {getattr(binfo, k)}" for k in _SIZES
                if getattr(finfo, k) != getattr(binfo, k)]
        if diff:
            raise ModelError(f"{_name(finetuned)} and its base {_name(base)} differ: "
                             f"{'; '.join(diff)}")
        ft_layers = load_heads(finetuned, revision=revision, allow_pickle=allow_pickle)
        base_layers = load_heads(base, revision=base_revision, allow_pickle=allow_pickle)
        info = replace(finfo, name=label)
        # read every layer's delta first: the storages (which decide whether the histogram
        # statistics can be trusted) are known only once the tensors are read
        layers = list(_delta_layers(ft_layers, base_layers, info, norms))
        layers, unchanged = _placeholders(layers)
        lattice = norms["storage"] - {"float32", None}
        unreliable = tuple(f"{m}.{s}" for m in ("q", "k") for s in ELEMENT_STATS
                           if s in HISTOGRAM) if lattice else ()
    ds = score_heads(info, layers, label=label, settings=s, progress=progress,
                     unreliable=unreliable)
    ds = take_out(ds, unchanged, s.alpha, info.group_size)
    return _add_delta_vars(ds, norms, finetuned, base, lora, sides if lora else ())
