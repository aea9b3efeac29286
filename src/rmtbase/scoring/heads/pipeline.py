"""The scoring pipeline as one function of records: read → null → decide → profile → describe.

Every stage reads the one checked :class:`~rmtbase.scoring.settings.ScoreSettings` it is given;
the nulls' growth stays within the growth budget (:mod:`rmtbase.scoring.stopping.budget`), and
heads still open where it stopped are marked undecided (:mod:`rmtbase.decision.undecided`)."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field

import numpy as np

from ..._version import __version__
from ...decision.combined import add_axes_decision
from ...decision.family import HISTOGRAM
from ...decision.spikes import add_spikes
from ...decision.undecided import mark_undecided
from ...decision.verdict import NOT_TESTED
from ...errors import InputError, ModelError
from ...stats.storage import storage_record
from ...stats.unaligned import symmetry_unaligned
from ..description import by_layers, describe, model_label, null_description
from ..measures.layer_stats import RawUnits, layer_stats, safe_factors
from ..measures.qk_histogram import add_qk_hist
from ..measures.spectrum_band import SPECTRUM_QUANTILES, null_spectrum_band
from ..measures.verdict import Decision
from ..nulls.checks import report_undefined
from ..nulls.layer_null import has_lambda_max, layer_null, layer_quantisation
from ..profile.axes import add_profile, factor_profile, null_storage
from ..settings import ScoreSettings
from ..stopping.budget import GrowthBudget, budget_seconds
from .read_ahead import read_ahead
from .reference import GAUSSIAN_AXES, GAUSSIAN_BAND, Cells, drawn_reference
from .sequential import decide

CONVENTIONS = ("W_Q, W_K (d_h, d); W_QK = W_Q^T W_K; lambda = squared singular values; "
               "no scaling factor; RoPE not applied")


@dataclass
class Layers:
    """What :func:`read_layers` measured per layer: statistics, spectra, ids, storage records,
    profile, factors (for a per-head null), W_QK histograms, and whether histograms lack a null."""

    per_layer: list = field(default_factory=list)
    spectra: list = field(default_factory=list)
    layer_ids: list = field(default_factory=list)
    storages: list = field(default_factory=list)
    detected: list = field(default_factory=list)
    null_records: list = field(default_factory=list)
    #: per layer the storage the null declares its draws are at (Null.draws_storage)
    drawn_at: list = field(default_factory=list)
    profiles: list = field(default_factory=list)
    factors: list = field(default_factory=list)
    hists: list = field(default_factory=list)
    unmatched: bool = False
    #: the plugins' axes the score names (:attr:`ScoreSettings.axes`), the only ones that join
    named_axes: frozenset = frozenset()

    @property
    def quantisation_names(self) -> list[str]:
        """Per layer the name of the quantisation detected ("none" where none), as the files
        spell it."""
        return ["none" if q is None else q.name for q in self.detected]

    @property
    def null_storages(self) -> list[str]:
        """Per layer the name of its null storage, as the files spell it (what is written:
        ``layer_null_storage``, ``null_storage``, the null's description; the code keys by
        :attr:`null_records`): the storage the null declares its draws are at
        (:meth:`~rmtbase.stats.null_protocol.Null.draws_storage`)."""
        return [s.name for s in (self.drawn_at or self.null_records)]


def check_heads(layer: int, wq, wk, name: str,
                factors: str = "W_Q or W_K; with --ov W_O or W_V") -> None:
    """One-line ModelError naming heads (``L<layer>H<h>``) of ``wq``, ``wk`` (n_heads, d_h, d) with
    a non-finite entry or an all-zero factor; ``factors`` names the two in the message."""
    finite = np.isfinite(wq).all(axis=(1, 2)) & np.isfinite(wk).all(axis=(1, 2))
    for bad, what in ((~finite, "non-finite (NaN/inf) weights"),
                      (finite & ~(wq.any(axis=(1, 2)) & wk.any(axis=(1, 2))),
                       "a factor that is all zero")):
        heads = [f"L{layer}H{h}" for h in np.flatnonzero(bad)]
        if heads:
            more = f" and {len(heads) - 3} more" if len(heads) > 3 else ""
            one = len(heads) == 1
            raise ModelError(f"{'head' if one else 'heads'} {', '.join(heads[:3])}{more} of "
                             f"{name} {'has' if one else 'have'} {what} ({factors}); cannot "
                             f"score {'it' if one else 'them'}")


def _one_layer(lh, info, s: ScoreSettings, out: Layers, quantized_null) -> None:
    """Measure layer ``lh`` into ``out`` (``quantized_null``: the option, its format a
    record)."""
    wq, wk = np.asarray(lh.wq), np.asarray(lh.wk)
    check_heads(lh.layer, wq, wk, info.name)
    storage = storage_record(getattr(lh, "storage", "float32"))  # the reader's name, here
    # a GGUF file names its block type; a dequantised folder is recognised by its lattice
    quant = layer_quantisation(lh, wq, wk, storage, info.group_size)
    est, null_st, bad = layer_null(storage, quant, quantized_null)
    # a head far outside float32's comfortable range is divided by a power of two first
    wq, wk, cq, ck = safe_factors(wq, wk)
    # the statistics take the storage's name (their compiled programs are keyed by it)
    st, x, h = layer_stats(wq, wk, s.kind, est.name, info.group_size,
                           entry_law=s.null.tests_entry_law,
                           raw=RawUnits(cq, ck, where=f"layer {lh.layer} of {info.name}, "),
                           statistics=s.plugins)
    out.per_layer.append(st)
    out.profiles.append({**factor_profile(wq, wk),  # + the symmetric kind's test (decision.kinds)
                         "symmetry_unaligned": np.asarray(symmetry_unaligned(wq, wk), np.float64)})
    if h is not None:
        out.hists.append(h)
    out.spectra.append(x)
    out.layer_ids.append(int(lh.layer))
    out.storages.append(storage)
    out.detected.append(quant)
    out.null_records.append(null_st)
    out.drawn_at.append(s.null.draws_storage(null_st))
    out.unmatched |= bad
    if s.null.needs_factors:
        out.factors.append((wq, wk))


#: read the next layer in a thread while one is scored (:mod:`.read_ahead`; same bytes)
READ_AHEAD = True


def read_layers(layers, info, s: ScoreSettings, progress: bool = True) -> Layers:
    """Statistics of every layer (:class:`Layers`); the next layer is read while one is scored
    (:data:`READ_AHEAD`), so at most two layers' weights are alive at a time."""
    out = Layers(named_axes=s.axes)
    qn = s.quantized_null  # "auto", "none" or a block format's name, looked up once here
    qn = qn if qn in ("auto", "none") else storage_record(qn)
    bar = None
    if progress:  # a bar updated by hand: iterating through tqdm would hold the last layer
        from ...progress import progress_bar

        bar = progress_bar(info.n_layers, desc="scoring layers", unit="layer")
    for lh in (read_ahead(layers) if READ_AHEAD else layers):  # the next layer read meanwhile
        _one_layer(lh, info, s, out, qn)
        del lh  # else this layer's weights stay alive while the next two are read
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    if not out.per_layer:
        raise ModelError(f"{info.name} has no attention layers to score")
    return out


def _values(read: Layers, names, unreliable: tuple):
    """(values {stat: (layer, head)}, statistics tested, statistics kept out); ``names``: the
    statistics asked for one by one (None: all measured)."""
    keys = [k for k in read.per_layer[0] if names is None or k in names or k in NOT_TESTED]
    if names is not None:
        missing = sorted(set(names) - set(keys))
        if missing:
            raise InputError(f"unknown statistics {missing}")
    values = {k: np.stack([s[k] for s in read.per_layer]) for k in keys}
    unreliable = tuple(k for k in unreliable if k in keys)
    if read.unmatched:
        unreliable += tuple(k for k in keys if k.split(".", 1)[1] in HISTOGRAM
                            and not k.startswith("qk."))
    return values, [k for k in keys if k not in NOT_TESTED], unreliable


def references(null, null_storages, cells: Cells, s: ScoreSettings, progress: bool = True) -> list:
    """The null's references: one per storage among the layers (``null_storages``), or one for every
    layer for a null drawn per head."""
    kw = dict(draws=s.draws, seed=s.seed, progress=progress)
    if null.draws_per_head:
        return [drawn_reference(null, cells, null_storages[0], **kw)]
    groups: dict = {}
    for i, ns in enumerate(null_storages):
        groups.setdefault(ns, []).append(i)
    return [drawn_reference(null, cells.at(rows), ns, **kw) for ns, rows in groups.items()]


def _add_spectra(ds, read: Layers, refs, values, d: int, d_h: int) -> None:
    """Normalised spectra, spikes, W_QK histograms and the heads' σ."""
    spike_ref = refs[0].spectral_ref if len(refs) == 1 else \
        [(g.rows, g.spectral_ref) for g in refs]
    ds["qk_spectrum"] = (("layer", "head", "rank"), np.stack(read.spectra))
    ds["qk_spectrum"].attrs["definition"] = "lambda / (sigma_q^2 sigma_k^2 d^2), descending"
    if has_lambda_max(spike_ref):
        add_spikes(ds, np.stack(read.spectra), spike_ref, d, d_h)
    if read.hists:
        add_qk_hist(ds, np.stack(read.hists))
    ds["sigma_q"] = (("layer", "head"), values["q.rms"])
    ds["sigma_k"] = (("layer", "head"), values["k.rms"])


def _add_profile(ds, read: Layers, refs, s: ScoreSettings, d: int, d_h: int,
                 progress: bool = True) -> None:
    """The profile axes and their part in the head decision (decision.combined)."""
    own = refs[0].profile_null()  # the reference says which (no Gaussian default)
    own = None if own is GAUSSIAN_AXES else own
    axis_nulls = add_profile(ds, read, d, d_h, alpha=s.alpha, seed=s.seed,
                             permutation=own, progress=progress,
                             start=dict(s.null_start.profile))
    if own is None:  # the Gaussian axes' draws per null storage enter the head decision
        axis_nulls = [([i for i, s in enumerate(read.null_records) if null_storage(s) == k], v)
                      for k, v in axis_nulls.items()]
    else:  # the reference names its own draws (add_profile's text names permutations)
        ds.attrs["profile"] = ("per-head axes (rmtbase.scoring.profile.axes); new axes against "
                               f"{next(iter(own.values())).shape[-1]} {refs[0].profile_draws}")
    add_axes_decision(ds, axis_nulls, alpha=s.alpha)


def _add_layers(ds, read: Layers, s: ScoreSettings, d: int, d_h: int, refs=()):
    """The spectrum band (the references' own, :meth:`~.reference.Reference.spectrum_band`;
    the Gaussian band where none is given), the layer coordinate, per-layer null storage and
    quantisation."""
    band = None
    if s.spectrum_draws:
        n = int(s.spectrum_draws)
        band = refs[0].spectrum_band(n, seed=s.seed) if refs else GAUSSIAN_BAND
    if band is GAUSSIAN_BAND:
        # the float32 spectral table's program is shared where a layer's null is a float
        # storage; a score with only block-quantised nulls compiles the band's leaner one
        band = null_spectrum_band(d, d_h, n, seed=s.seed,
                                  share_table=any(s.is_float for s in read.null_records))
    if band is not None:
        ds["null_spectrum"] = (("quantile", "rank"), band)
        ds["null_spectrum"].attrs["definition"] = (
            f"quantiles of the sorted normalised null spectrum over {int(s.spectrum_draws)} "
            "draws")
        ds = ds.assign_coords(quantile=list(SPECTRUM_QUANTILES))
    ds = ds.assign_coords(layer=np.array(read.layer_ids, dtype=np.int64))
    quant = read.quantisation_names
    if len(set(read.null_storages)) > 1 or len(set(quant)) > 1:
        ds["layer_null_storage"] = (("layer",), np.array(read.null_storages, dtype=str))
        ds["layer_null_storage"].attrs["definition"] = (
            "storage the layer's null draws were put through (its own precision)")
        ds["layer_quantisation"] = (("layer",), np.array(quant, dtype=str))
        ds["layer_quantisation"].attrs["definition"] = (
            "block quantisation the layer's W_Q/W_K were stored in (the file's type, or the "
            "lattice detected), 'none' for a float layer")
    return ds


def _provenance(ds, info, read: Layers, s: ScoreSettings, label) -> None:
    """The model's and the null's attributes."""
    from ...models._reader import coarsest_storage

    quant = read.quantisation_names
    ids, ns = read.layer_ids, read.null_storages
    ds.attrs.update(
        model=label or model_label(info.name), model_path=model_label(info.name),
        revision=str(info.revision or ""),
        architecture=str(info.architecture), d=int(info.d), d_h=int(info.d_h),
        n_layers=int(info.n_layers), n_heads=int(info.n_heads),
        n_kv_heads=int(info.n_kv_heads), storage_dtype=coarsest_storage(s.name for s in read.storages),
        storage_dtypes=",".join(sorted({s.name for s in read.storages})),
        quantisation=by_layers(quant, ids), null_storage=by_layers(ns, ids),
        quantized_null=s.quantized_null,
        null=null_description(s.null, ns, read.detected, s.quantized_null, ids),
        rmtbase_version=__version__,
        created=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        conventions=CONVENTIONS)
    ds.attrs["baseline_draws_used"] = int(ds["null_draws"].min()) if ds.sizes["stat"] else 0


def score(info, layers, s: ScoreSettings, label=None, *, progress: bool = True,
          unreliable: tuple = ()):
    """Score ``layers`` of the model ``info`` under the checked settings ``s`` (module
    docstring); ``unreliable``: statistics kept out of the decision."""
    read = read_layers(layers, info, s, progress)
    values, tested, unreliable = _values(read, s.names, unreliable)
    d, d_h = int(info.d), int(info.d_h)
    cells = Cells(d, d_h, s.kind, tuple(tested), factors=read.factors,
                  element_draws=int(s.element_draws), start=s.null_start,
                  heads=tuple(int(n) for n in values["q.rms"].shape))
    refs = references(s.null, read.null_records, cells, s, progress)
    budget = GrowthBudget(budget_seconds(s.growth_budget, d, d_h, s.kind,
                                         int(values["q.rms"].size)))
    out = decide(refs, values, tested, Decision(s.null, s.alpha, info.group_size,
                                                unreliable, s.max_draws, progress, budget))
    ds = out.ds
    attrs = type(refs[0]).attrs(refs, read.layer_ids, s.max_draws)
    _add_spectra(ds, read, refs, out.values, d, d_h)
    _add_profile(ds, read, refs, s, d, d_h, progress)
    ds.attrs.update(budget.attrs(), undecided_heads=0)
    if out.bracket is not None:  # the budget stopped a table: open heads are undecided
        mark_undecided(ds, *out.bracket, alpha=s.alpha)
    ds = _add_layers(ds, read, s, d, d_h, refs)
    ds.attrs.update(attrs)
    _provenance(ds, info, read, s, label)
    if out.undefined:
        report_undefined(ds, out.undefined, int(np.prod(out.values["q.rms"].shape)))
    describe(ds)
    return ds


__all__ = ["CONVENTIONS", "Layers", "read_layers", "references", "score"]
