"""Score a model's attention heads against a random-matrix null: ``score_model``.

Per head, statistics of W_Q, W_K (d_h, d) and W_QK = W_Qᵀ W_K (raw weights, no 1/√d; RoPE: the
relative-position-0 form) from :func:`rmtbase.stats.head_stats`, tested by
:func:`rmtbase.decision.verdict.score_values`. Nulls (``null=``):

- ``"gaussian"``: i.i.d. N(0, σ²) W_Q, W_K at the head's (d, d_h, σ_Q, σ_K), stored like each
  layer (precision, block quantisation per ``quantized_null``), one table per storage;
  statistics undefined or unmatched under some layer's null are left out for every head; the
  spectral reference grows while a flag could change (:mod:`rmtbase.scoring.stopping.rule`).
- ``"permutation"``: each head against its own shuffled entries; W_Q/W_K element statistics
  are left out."""

from __future__ import annotations

import xarray as xr

from ..checks import MIN_NULL_DRAWS, check_int, check_probability, check_seed
from ..decision.verdict import NOT_TESTED, score_values
from ..errors import InputError, with_keywords
from ..files.heap import gives_heap_back
from ..stats.names import QUANTIZED_NULL, check_quantized_null  # noqa: F401 - re-exported
from ..stats.null_protocol import Null
from .description import default_label, null_description
from .heads.pipeline import Options, score
from .heads.reference import NullStart
from .measures.spectrum_band import (  # noqa: F401 - _drawn_spectrum_band: tests/test_cache.py
    SPECTRUM_QUANTILES,
    _drawn_spectrum_band,
    null_spectrum_band,
)
from .nulls.checks import check_element_draws, check_null_size, check_null_storage
from .nulls.layer_null import is_spectral
from .settings import ScoreSettings
from .stopping.budget import check_budget


def _stat_kind(stats) -> tuple[str, tuple[str, ...] | None]:
    """('all'|'spectral'|'elementwise', explicit names or None) from the ``stats`` argument."""
    if isinstance(stats, str):
        if stats in ("all", "spectral", "elementwise"):
            return stats, None
        stats = [stats]
    names = tuple(stats)
    if not names:
        raise InputError("stats must name at least one statistic")
    return "all", names


def _check_options(alpha, draws, null, quantized_null, max_draws, element_draws, seed=0,
                   spectrum_draws=0):
    """(alpha, the :class:`~rmtbase.stats.null_kind.Null` spelled ``null``), or InputError:
    types checked, not coerced (:mod:`rmtbase.checks`); draws at least
    :data:`~rmtbase.checks.MIN_NULL_DRAWS`, what the omnibus calibration needs."""
    alpha = check_probability("alpha", alpha)
    if draws is not None:
        check_int("draws", draws, minimum=MIN_NULL_DRAWS,
                  why="the omnibus calibration of each head's p reads the 10 largest null "
                      "statistics")
    if max_draws is not None:
        check_int("max_draws", max_draws, minimum=2)
    check_int("element_draws", element_draws, minimum=0)
    check_int("spectrum_draws", spectrum_draws, minimum=0)
    check_seed(seed)
    null = Null.parse(null)
    check_null_storage(null)
    check_quantized_null(quantized_null)  # a failed plugin: its own line
    return alpha, null


@gives_heap_back
def score_model(model=None, *, revision=None, settings: ScoreSettings | None = None,
                allow_pickle=False, progress=True, circuit="qk", **options) -> xr.Dataset:
    """Score every (layer, head) of ``model`` against the null.

    model: hub id, folder, ``transformers`` or TransformerLens model; None = the embedded MiniLM.
    settings: what is tested against which null (:class:`~rmtbase.scoring.settings.ScoreSettings`);
    ``options``: its fields as keywords, replacing the record's. circuit: "qk" or "ov". Returns
    an ``xr.Dataset`` (:mod:`rmtbase.decision.verdict`) with ``qk_spectrum`` (layer, head, rank)
    and provenance attrs."""
    from ..models import default_model_path, load_heads, model_info
    from ..models.finite import naming_heads

    s = with_keywords(ScoreSettings, settings, options, "score_model")
    if circuit not in ("qk", "ov"):
        raise InputError(f"circuit must be 'qk' or 'ov', got {circuit!r}")
    _, null = _check_options(s.alpha, s.draws, s.null, s.quantized_null, s.max_draws,
                             s.element_draws, s.seed, s.spectrum_draws)
    check_budget(s.growth_budget)
    stats, draws, element_draws = s.stats, s.draws, s.element_draws
    kind, names = _stat_kind(stats)
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
        ds = score_heads(info, layers, label=label, settings=s, progress=progress, null=null)
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
    s = with_keywords(ScoreSettings, settings, options, "score_heads")
    alpha, null = _check_options(s.alpha, s.draws, s.null, s.quantized_null, s.max_draws,
                                 s.element_draws, s.seed, s.spectrum_draws)
    kind, names = _stat_kind(s.stats)
    opts = Options(kind, names, null, draws=s.draws, alpha=alpha, seed=s.seed,
                   spectrum_draws=s.spectrum_draws, quantized_null=s.quantized_null,
                   max_draws=s.max_draws, element_draws=s.element_draws, progress=progress,
                   unreliable=tuple(unreliable), start=NullStart.of(s.null_start),
                   growth_budget=check_budget(s.growth_budget))
    return score(info, layers, opts, label)


__all__ = ["SPECTRUM_QUANTILES", "ScoreSettings", "null_description", "null_spectrum_band",
           "score_heads", "score_model", "score_values"]
