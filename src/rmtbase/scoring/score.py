"""Score a model's attention heads against a random-matrix null: ``score_model``.

Per head, statistics of W_Q, W_K and W_QK = W_Qᵀ W_K (raw weights, no 1/√d; RoPE: the
relative-position-0 form) from :func:`rmtbase.stats.head_stats`, tested by
:func:`rmtbase.decision.verdict.score_values` against ``null=``: ``"gaussian"`` (i.i.d.
N(0, σ²) W_Q, W_K at each layer's shape and storage; statistics undefined under some layer's
null left out for every head) or ``"permutation"`` (each head against its own shuffled entries)."""

from __future__ import annotations

import xarray as xr

from ..decision.verdict import NOT_TESTED, score_values
from ..errors import InputError, with_keywords
from ..files.heap import gives_heap_back
from ..stats.names import QUANTIZED_NULL, check_quantized_null  # noqa: F401 - re-exported
from .description import default_label, null_description
from .heads.pipeline import score
from .measures.spectrum_band import (  # noqa: F401 - _drawn_spectrum_band: tests/test_cache.py
    SPECTRUM_QUANTILES,
    _drawn_spectrum_band,
    null_spectrum_band,
)
from .nulls.checks import check_element_draws, check_null_size
from .nulls.layer_null import is_spectral
from .settings import ScoreSettings


@gives_heap_back
def score_model(model=None, *, revision=None, settings: ScoreSettings | None = None,
                allow_pickle=False, progress=True, circuit="qk", **options) -> xr.Dataset:
    """Score every (layer, head) of ``model`` against the null.

    model: hub id, folder, ``transformers`` or TransformerLens model; None = the embedded MiniLM.
    settings: what is tested against which null (:class:`~rmtbase.scoring.settings.ScoreSettings`,
    checked when built); ``options``: its fields as keywords, replacing the record's (a new
    record, checked once). circuit: "qk" or "ov". Returns
    an ``xr.Dataset`` (:mod:`rmtbase.decision.verdict`) with ``qk_spectrum`` (layer, head, rank)
    and provenance attrs."""
    from ..models import default_model_path, load_heads, model_info
    from ..models.finite import naming_heads

    s = with_keywords(ScoreSettings, settings, options, "score_model")  # checked, once
    if circuit not in ("qk", "ov"):
        raise InputError(f"circuit must be 'qk' or 'ov', got {circuit!r}")
    null, draws, element_draws, kind, names = s.null, s.draws, s.element_draws, s.kind, s.names
    spectral_only = names is not None and all(is_spectral(n) or n in NOT_TESTED for n in names)
    check_element_draws(null, "spectral" if spectral_only else kind, element_draws)
    label = None
    if model is None:
        model, label = default_model_path(), default_label()
    info = model_info(model, revision=revision)
    check_null_size(info, kind, names, draws, null, element_draws)  # before any weight is read
    if circuit == "ov":
        from ..models.ov import OV_FACTORS, load_ov_heads

        layers = load_ov_heads(model, revision=revision, allow_pickle=allow_pickle)
    else:
        layers = load_heads(model, revision=revision, allow_pickle=allow_pickle)
    with naming_heads(model, allow_pickle=allow_pickle, revision=revision):  # a NaN/inf tensor
        ds = score_heads(info, layers, label=label, settings=s, progress=progress)
    if circuit == "ov":
        ds.attrs.update(circuit="ov", factors=OV_FACTORS)
    if info.source == "transformer_lens":  # which weights: as the model holds them
        ds.attrs["transformer_lens"] = info.model_class
    return ds


def score_heads(info, layers, *, label=None, settings: ScoreSettings | None = None,
                progress=True, unreliable=(), **options) -> xr.Dataset:
    """:func:`score_model` once the model is read: ``layers`` (iterable of
    :class:`rmtbase.models.LayerHeads`) of a model ``info``, each layer against the null of its own
    storage (:func:`rmtbase.decision.verdict.score_values_by_layer`). settings, ``options``: as
    :func:`score_model`'s. ``unreliable``: statistics left out of the decision besides those a
    detected quantisation leaves out."""
    s = with_keywords(ScoreSettings, settings, options, "score_heads")  # the record as it is
    return score(info, layers, s, label, progress=progress, unreliable=tuple(unreliable))


__all__ = ["SPECTRUM_QUANTILES", "ScoreSettings", "null_description", "null_spectrum_band",
           "score_heads", "score_model", "score_values"]
