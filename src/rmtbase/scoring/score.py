"""Score a model's attention heads against a random-matrix null: ``score_model``.

For every layer ℓ and head h the statistics of W_Q, W_K (shape (d_h, d)) and W_QK = W_Qᵀ W_K
(shape (d, d)) come from the one implementation, :func:`rmtbase.stats.head_stats` (batched over
the heads of a layer, raw weights, no 1/√d factor; λ are the squared singular values of W_QK
in raw units), and are tested by :func:`rmtbase.decision.verdict.score_values` — per statistic,
and once per head.

The null (``null=``):

- ``"gaussian"`` (default): W_Q, W_K with i.i.d. N(0, σ²) entries at the head's own
  (d, d_h, σ_Q, σ_K), **stored like the checkpoint**: each layer's storage precision is read
  from the checkpoint (:attr:`rmtbase.models.LayerHeads.storage`), a block quantisation it was
  dequantised from is detected (:func:`rmtbase.stats.precision.detect_quantisation`), and the
  null draws pass through the same round trip (``quantized_null="auto"``; ``"none"`` keeps the
  float null and leaves the histogram statistics out of the decision; a format name forces
  it). **Layer by layer**: each layer's null has that layer's storage and quantisation (the
  GGUF type of its tensors, or the lattice detected on its W_Q and W_K), so a file that mixes
  types across layers compares every head with a null of its own precision; one table per
  distinct storage, shared by the layers stored alike
  (:func:`rmtbase.decision.verdict.score_values_by_layer`: per-statistic tests and each head's
  combination from its layer's null, BH over all heads). A statistic undefined under any
  layer's null is left out for every head; histogram statistics are left out for every head
  where some layer has no matched null. W_Q and W_K of one layer in different block types get
  that layer's float null under ``"auto"`` (one null round trip cannot match both), with the
  histogram statistics left out as under ``"none"``. Tables come from
  :func:`rmtbase.baseline.cache.null_table` (shipped, user cache or generated). Spectral statistics have their own, larger reference (≥ 1000 draws), extended ×5
  at a time only while some head's flag could still change (its p's Clopper–Pearson interval
  straddles its Benjamini–Hochberg threshold; stated error 0.01: :mod:`rmtbase.scoring.stopping`),
  cached; with ``max_draws`` given, up to it wherever a head near a flag sits beyond all but
  10 draws (Besag & Clifford 1991).
- ``"permutation"``: each head against its own entries shuffled
  (:mod:`rmtbase.scoring.permutation`); tests structure beyond the entry law; W_Q/W_K element
  statistics are left out.

For RoPE models W_QK is the relative-position-0 bilinear form (RoPE is not applied).
"""

from __future__ import annotations

import datetime as _dt

import numpy as np
import xarray as xr

from .._version import __version__
from ..decision.combined import add_axes_decision
from ..decision.family import HISTOGRAM
from ..decision.significance import _check_alpha
from ..decision.spikes import add_spikes
from ..decision.verdict import NOT_TESTED, score_values
from ..errors import InputError, ModelError
from ..stats.null_kind import Null
from ..stats.precision import QUANT_FORMATS
from .description import (
    by_layers,
    default_label,
    describe,
    model_label,
    null_description,
)
from .layer_null import (
    has_lambda_max,
    is_spectral,
    layer_null,
    layer_quantisation,
)
from .layer_stats import layer_stats, safe_factors
from .null_checks import (
    check_element_draws,
    check_null_size,
    report_undefined,
)
from .profile import add_profile, factor_profile, null_storage
from .qk_histogram import add_qk_hist
from .reference import Cells
from .sequential import Decision, decide

#: Quantiles of the sorted normalised null spectrum stored for the spectrum figure.
SPECTRUM_QUANTILES = (0.025, 0.5, 0.975)
QUANTIZED_NULL = ("auto", "none", *QUANT_FORMATS)


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


def null_spectrum_band(d: int, d_h: int, n_draws: int = 200, *, seed: int = 0) -> np.ndarray:
    """Quantiles :data:`SPECTRUM_QUANTILES` of the sorted self-normalised null spectrum.

    x_k = λ_k / (rms_Q² rms_K² d²) per draw (the same normalisation as the heads'), from
    ``null_draws(..., stats="spectral", return_lambda=True)`` (x from λ in float64) with key
    ``fold_in(key(seed), 0x5EC7)`` (independent of the table's keys; a typed key, like the
    tables', so the band reuses their compiled spectral program; its bits are those of the
    legacy ``PRNGKey(seed)`` the shipped bands were drawn with).
    Returns (len(SPECTRUM_QUANTILES), d_h); the seed shapes' bands are shipped
    (:func:`rmtbase.baseline.cache.shipped_band`), which spares a first run their compilation.
    """
    from ..baseline.cache import shipped_band

    band = shipped_band(d, d_h, n_draws, seed, SPECTRUM_QUANTILES)
    return _drawn_spectrum_band(d, d_h, n_draws, seed) if band is None else band


def _drawn_spectrum_band(d: int, d_h: int, n_draws: int, seed: int) -> np.ndarray:
    """:func:`null_spectrum_band` from its draws (what the shipped bands were made with)."""
    import jax

    from ..baseline.null import null_draws

    key = jax.random.fold_in(jax.random.key(seed), 0x5EC7)
    # λ as the spectral tables draw it (return_lambda): the same compiled program as the
    # shape's spectral table, where return_spectrum (λ/d² on the device) was a second one
    nd = null_draws(key, d, d_h, n_draws, stats="spectral", return_lambda=True)
    rms2 = np.asarray(nd["q.rms"], np.float64) ** 2 * np.asarray(nd["k.rms"], np.float64) ** 2
    x = np.asarray(nd["qk.lambda"], dtype=np.float64) / (float(d) ** 2 * rms2[:, None])
    return np.quantile(x, SPECTRUM_QUANTILES, axis=0)


def _check_options(alpha, draws, null, quantized_null, max_draws, element_draws):
    """(alpha, the :class:`~rmtbase.stats.null_kind.Null` spelled ``null``), or InputError."""
    alpha = _check_alpha(alpha)
    for name, v, lo in (("draws", draws, 2), ("max_draws", max_draws, 2),
                        ("element_draws", element_draws, 0)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | np.integer)
                              or v < lo):
            raise InputError(f"{name} must be an integer >= {lo}, got {v!r}")
    null = Null.parse(null)
    if quantized_null not in QUANTIZED_NULL:
        raise InputError(f"quantized_null must be one of {', '.join(QUANTIZED_NULL)}, "
                         f"got {quantized_null!r}")
    return alpha, null


def _read_layers(layers, kind, info, progress, quantized_null, null):
    """Statistics of every layer; returns (per_layer, spectra, layer_ids, storages, detected,
    null_storages, unmatched, factors, hists, profiles): per layer its float storage, the quantisation
    detected (None if none) and the storage of its null (:func:`layer_null`); ``unmatched``
    when some layer's histogram statistics lack a matched null; factors only for the
    null's per-head draws (:attr:`rmtbase.stats.null_kind.Null.per_head`), hists (W_QK
    histograms) only with element statistics, profiles (:func:`.profile.factor_profile`)."""
    per_layer, spectra, layer_ids, factors, hists, profiles = [], [], [], [], [], []
    storages, detected, null_storages, unmatched = [], [], [], False
    bar = None
    if progress:  # a bar updated by hand: iterating through tqdm would hold the last layer
        from ..progress import progress_bar

        bar = progress_bar(info.n_layers, desc="scoring layers", unit="layer")
    group = info.group_size
    for lh in layers:
        wq, wk = np.asarray(lh.wq), np.asarray(lh.wk)
        if not (np.all(np.isfinite(wq)) and np.all(np.isfinite(wk))):
            raise ModelError(f"layer {lh.layer} of {info.name} has non-finite W_Q/W_K weights")
        storage = getattr(lh, "storage", "float32")
        # a GGUF file names its block type; a dequantised folder is recognised by its lattice
        quant = layer_quantisation(lh, wq, wk, storage, group)
        est, null_storage, bad = layer_null(storage, quant, quantized_null)
        # a head far outside float32's comfortable range is divided by a power of two first
        wq, wk, cq, ck = safe_factors(wq, wk)
        st, x, h = layer_stats(wq, wk, kind, est, group, entry_law=null.tests_entry_law,
                                hist=True, scales=(cq, ck),
                                where=f"layer {lh.layer} of {info.name}, ")
        per_layer.append(st)
        profiles.append(factor_profile(wq, wk))
        if h is not None:
            hists.append(h)
        spectra.append(x)
        layer_ids.append(int(lh.layer))
        storages.append(storage)
        detected.append(quant)
        null_storages.append(null_storage)
        unmatched |= bad
        if null.per_head:
            factors.append((wq, wk))
        del lh, wq, wk  # else this layer's weights stay alive while the next one is read
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    if not per_layer:
        raise ModelError(f"{info.name} has no attention layers to score")
    return (per_layer, spectra, layer_ids, storages, detected, null_storages, unmatched,
            factors, hists, profiles)


def score_model(model=None, *, revision=None, stats="all", draws=None, alpha=0.05,
                allow_pickle=False, progress=True, seed=0, spectrum_draws=200,
                null="gaussian", quantized_null="auto", max_draws=None,
                element_draws=200, circuit="qk") -> xr.Dataset:
    """Score every (layer, head) of ``model`` against the null (module docstring).

    model: hub id, local folder or loaded ``transformers`` model; None = the embedded default
    MiniLM (:func:`rmtbase.models.default_model_path`, no network). stats: "all", "spectral",
    "elementwise" or a list of "<matrix>.<stat>" names. draws: minimum number of null draws per
    table (None = the table default; a larger stored table is used whole) or, under the
    permutation null, spectral permutations per head (default 1000). alpha: BH level for the
    per-head decision (and the descriptive per-statistic q-values). seed: table / permutation
    seed. spectrum_draws: draws for the null band of the spectrum figure (0 = none). null:
    "gaussian" or "permutation". quantized_null: "auto", "none" or a block format of
    :data:`rmtbase.stats.precision.QUANT_FORMATS` ("auto": the GGUF file's tensor type, or the
    format a dequantised folder's lattice is detected as).
    max_draws: None (default) extends the spectral null only while some head's decision could
    change (:mod:`rmtbase.scoring.stopping`, cap 100,000); a number extends it up to that
    number wherever a head near a flag lies beyond all but 10 draws (deeper p). element_draws:
    permutations per head for the product's element statistics (permutation null). circuit:
    "qk" (W_QK = W_Q^T W_K) or "ov" (W_OV = W_O,h W_V,h, :mod:`rmtbase.scoring.ov`).
    Returns an ``xr.Dataset`` (see :mod:`rmtbase.decision.verdict`) with ``qk_spectrum``
    (layer, head, rank) normalised x and model/null provenance in attrs.
    """
    from ..models import default_model_path, load_heads, model_info

    if circuit not in ("qk", "ov"):
        raise InputError(f"circuit must be 'qk' or 'ov', got {circuit!r}")
    _, null = _check_options(alpha, draws, null, quantized_null, max_draws, element_draws)
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
    ds = score_heads(info, layers, label=label, stats=stats, draws=draws, alpha=alpha,
                     progress=progress, seed=seed, spectrum_draws=spectrum_draws, null=null,
                     quantized_null=quantized_null, max_draws=max_draws,
                     element_draws=element_draws)
    if circuit == "ov":
        ds.attrs.update(circuit="ov", factors=OV_FACTORS)
    return ds


def score_heads(info, layers, *, label=None, stats="all", draws=None, alpha=0.05,
                progress=True, seed=0, spectrum_draws=200, null="gaussian",
                quantized_null="auto", max_draws=None, element_draws=200,
                unreliable=()) -> xr.Dataset:
    """What :func:`score_model` does once the model is read: score ``layers`` (an iterable of
    :class:`rmtbase.models.LayerHeads`) of a model described by ``info``
    (:class:`rmtbase.models.ModelInfo`). Options as for :func:`score_model`; ``unreliable``
    names statistics to leave out of the decision besides those a detected quantisation
    leaves out (used by :mod:`rmtbase.scoring.delta`).

    Each layer is tested against the null of its own storage (its float precision, or the
    block quantisation it was stored in): one null table per distinct storage among the
    layers, shared by the layers stored alike
    (:func:`rmtbase.decision.verdict.score_values_by_layer`; BH over all heads)."""
    alpha, null = _check_options(alpha, draws, null, quantized_null, max_draws, element_draws)
    kind, names = _stat_kind(stats)
    (per_layer, spectra, layer_ids, storages, detected, null_storages, unmatched, factors,
     hists, profiles) = _read_layers(layers, kind, info, progress, quantized_null, null)
    keys = [k for k in per_layer[0] if names is None or k in names or k in NOT_TESTED]
    if names is not None:
        missing = sorted(set(names) - set(keys))
        if missing:
            raise InputError(f"unknown statistics {missing}")
    values = {k: np.stack([s[k] for s in per_layer]) for k in keys}
    d, d_h = int(info.d), int(info.d_h)
    storage = _coarsest(storages)
    unreliable = tuple(k for k in unreliable if k in keys)
    if unmatched:
        unreliable += tuple(k for k in keys if k.split(".", 1)[1] in HISTOGRAM
                            and not k.startswith("qk."))
    tested = [k for k in keys if k not in NOT_TESTED]
    cells = Cells(d, d_h, kind, tuple(tested), factors=factors,
                  element_draws=int(element_draws))
    refs = _references(null, null_storages, cells, draws=draws, seed=seed, progress=progress)
    how = Decision(null, alpha, info.group_size, unreliable, max_draws, progress)
    ds, tested, values, undefined = decide(refs, values, tested, how)
    attrs = type(refs[0]).attrs(refs, layer_ids, max_draws)
    spike_ref = refs[0].spectral_ref if len(refs) == 1 else \
        [(g.rows, g.spectral_ref) for g in refs]
    ds["qk_spectrum"] = (("layer", "head", "rank"), np.stack(spectra))
    ds["qk_spectrum"].attrs["definition"] = "lambda / (sigma_q^2 sigma_k^2 d^2), descending"
    if spike_ref is not None and has_lambda_max(spike_ref):
        add_spikes(ds, np.stack(spectra), spike_ref, d, d_h)
    if hists:
        add_qk_hist(ds, np.stack(hists))
    ds["sigma_q"] = (("layer", "head"), values["q.rms"])
    ds["sigma_k"] = (("layer", "head"), values["k.rms"])
    perm_profile = refs[0].profile_null()  # None: the Gaussian profile null
    axis_nulls = add_profile(ds, profiles, null_storages, d, d_h, alpha=alpha, seed=seed,
                             permutation=perm_profile, progress=progress)
    if perm_profile is None:  # the head decision sees the factor axes too (decision.combined)
        axis_nulls = [([i for i, s in enumerate(null_storages) if null_storage(s) == k], v)
                      for k, v in axis_nulls.items()]
    add_axes_decision(ds, axis_nulls, alpha=alpha)
    if spectrum_draws:
        band = null_spectrum_band(d, d_h, int(spectrum_draws), seed=seed)
        ds["null_spectrum"] = (("quantile", "rank"), band)
        ds["null_spectrum"].attrs["definition"] = (
            f"quantiles of the sorted normalised null spectrum over {int(spectrum_draws)} draws")
        ds = ds.assign_coords(quantile=list(SPECTRUM_QUANTILES))
    ds = ds.assign_coords(layer=np.array(layer_ids, dtype=np.int64))
    quant = ["none" if q is None else q for q in detected]
    if len(set(null_storages)) > 1 or len(set(quant)) > 1:
        ds["layer_null_storage"] = (("layer",), np.array(null_storages, dtype=str))
        ds["layer_null_storage"].attrs["definition"] = (
            "storage the layer's null draws were put through (its own precision)")
        ds["layer_quantisation"] = (("layer",), np.array(quant, dtype=str))
        ds["layer_quantisation"].attrs["definition"] = (
            "block quantisation the layer's W_Q/W_K were stored in (the file's type, or the "
            "lattice detected), 'none' for a float layer")
    ds.attrs.update(attrs)
    ds.attrs.update(
        model=label or model_label(info.name), model_path=model_label(info.name),
        revision=str(info.revision or ""),
        architecture=str(info.architecture), d=d, d_h=d_h, n_layers=int(info.n_layers),
        n_heads=int(info.n_heads), n_kv_heads=int(info.n_kv_heads),
        storage_dtype=storage, storage_dtypes=",".join(sorted(set(storages))),
        quantisation=by_layers(quant, layer_ids), null_storage=by_layers(null_storages, layer_ids),
        quantized_null=quantized_null,
        null=null_description(null, null_storages, detected, quantized_null, layer_ids),
        rmtbase_version=__version__,
        created=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        conventions=("W_Q, W_K (d_h, d); W_QK = W_Q^T W_K; lambda = squared singular values; "
                     "no scaling factor; RoPE not applied"),
    )
    ds.attrs["baseline_draws_used"] = int(ds["null_draws"].min()) if ds.sizes["stat"] else 0
    if undefined:
        report_undefined(ds, undefined, int(np.prod(values["q.rms"].shape)))
    describe(ds)
    return ds


def _references(null, null_storages, cells, *, draws, seed, progress) -> list:
    """The null's references (:meth:`rmtbase.stats.null_kind.Null.reference`): one per storage
    among the layers, shared by the layers stored alike; a null drawn per head
    (:attr:`~rmtbase.stats.null_kind.Null.per_head`) one for every layer."""
    groups: dict[str, list[int]] = {}
    for i, ns in enumerate(null_storages):
        groups.setdefault(ns, []).append(i)
    if null.per_head:
        return [null.reference(cells, null_storages[0], draws=draws, seed=seed,
                               progress=progress)]
    return [null.reference(cells.at(rows), ns, draws=draws, seed=seed, progress=progress)
            for ns, rows in groups.items()]


def _coarsest(storages) -> str:
    from ..models.weights import coarsest_storage

    return coarsest_storage(storages)


__all__ = ["SPECTRUM_QUANTILES", "null_description", "null_spectrum_band", "score_heads",
           "score_model", "score_values"]
