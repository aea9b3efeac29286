"""The circuit search's Dataset and its JSON list.

:func:`candidate_dataset`: one row per patched (source, receiver, kind, path) along
``candidate`` (:data:`VARIABLES`, with ``long_name`` and ``units``); the labels along (layer,
head); the attribution of every source as ``screen_attribution`` (receiver, kind, path,
layer_from, head_from); attrs: the sequences, the rule's constants. Strings are ``str``,
booleans int8 0/1. :func:`circuit_list`: the JSON objects ``{kind, path, from, to,
label_from, label_to, label_length, rank_weights, rank_attribution, attribution,
ablation, effect_causal, effect_se, effect_zero, effect_mean, effect_resample, depends, role,
confirmed, dominant, redundant, idle, faithfulness, faithfulness_se, faithfulness_empty,
joint_effect, joint_contradicts, dependency, metric}``."""

from __future__ import annotations

import numpy as np
import xarray as xr

from ...probe import behaviour as bh
from .labels import head_name
from .sequences import Sequences

#: Candidate variables: (long_name, units).
VARIABLES = {
    "kind": ("path: the receiver's input the source is removed from (q, k or v)", "1"),
    "path": ("direct (the source's output removed from the receiver's input) or via_mlp (only "
             "its change carried through the MLPs in between)", "1"),
    "from": ("source head, L<layer>H<head>", "1"),
    "to": ("receiver head, L<layer>H<head>", "1"),
    "layer_from": ("source layer", "1"), "head_from": ("source head", "1"),
    "layer_to": ("receiver layer", "1"), "head_to": ("receiver head", "1"),
    "label_from": ("behaviour label of the source", "1"),
    "label_to": ("behaviour label of the receiver", "1"),
    "length_to": ("repeat length the receiver was labelled and patched on (its label_length; "
                  "tokens per half; 0: text)", "tokens"),
    "n_sequences": ("sequences the effect is averaged over", "1"),
    "rank_weights": ("rank of the source among the receiver's earlier sources by this kind's "
                     "composition score (1 = top)", "1"),
    "rank_attribution": ("rank of the source among the receiver's earlier sources by "
                         "|attribution| on this path (1 = top; 0: no estimate)", "1"),
    "n_sources": ("number of the receiver's earlier sources", "1"),
    "composition": ("composition score of the pair for this kind", "1"),
    "attribution": ("first-order estimate of effect_causal (one backward pass; for v the "
                    "shrink of the output along its clean direction)", "1"),
    "metric": ("what effect_causal measures: the receiver's behaviour statistic, "
               "output_change (v) or attention_tv (no label)", "1"),
    "score_to": ("receiver's unpatched behaviour statistic (0 for the change metrics)", "1"),
    "ablation": ("the counterfactual of effect_causal: the source's output replaced by its "
                 "mean over the other sequences at each position (mean), by its output on another "
                 "sequence (resample, averaged over pairings) or by zero", "1"),
    "effect_causal": ("drop of the receiver's statistic (negative: a rise), or its change, "
                      "when the source's output is replaced by its counterfactual (ablation) "
                      "in this input on this path", "1"),
    "effect_se": ("standard error of effect_causal over sequences", "1"),
    "effect_zero": ("effect_causal with the source's output set to zero (NaN: not measured)",
                    "1"),
    "effect_mean": ("effect_causal under mean ablation (NaN: not measured)", "1"),
    "effect_resample": ("effect_causal under resample ablation (NaN: not measured)", "1"),
    "depends": ("why a row that passes one counterfactual is not confirmed: zero (it passes "
                "only with the output set to zero, both non-zero counterfactuals measured under "
                "the floor) or counterfactual (the non-zero counterfactuals disagree: one "
                "keeps under half of the other's effect); empty otherwise", "1"),
    "role": ("supports (the behaviour drops without the source), suppresses (it rises) or "
             "changes (change metrics)", "1"),
    "confirmed": ("receiver labelled, |effect| >= 3 se and >= 10 % of score_to (0.1 for "
                  "change metrics), >= 8 sequences, under the ablation, and the other non-zero "
                  "counterfactual keeps >= half of the effect with the same sign and the "
                  "10 % floor", "1"),
    "dependency": ("the rule passes on a receiver without a behaviour label (not a circuit)",
                   "1"),
    "dominant": ("the supporting confirmed row with the largest effect of its receiver and "
                 "kind", "1"),
    "joint_effect": ("effect of removing every earlier source at once on this path", "1"),
    "joint_se": ("standard error of joint_effect over sequences", "1"),
    "faithfulness": ("the receiver's behaviour with only its confirmed sources on this input "
                     "kept and every other earlier head counterfactual (MLPs recomputed), over "
                     "the clean behaviour; v: 1 - the output change; no source confirmed: the floor; "
                     "NaN: unlabelled", "1"),
    "faithfulness_se": ("standard error of faithfulness over sequences (delta method)", "1"),
    "faithfulness_empty": ("faithfulness with no source kept: the floor", "1"),
    "idle": ("confirmed, but removing it from its circuit changes faithfulness by less than "
             "faithfulness_se", "1"),
    "redundant": ("no single row confirmed but the joint removal passes the rule", "1"),
    "joint_contradicts": ("the confirmed singles' sum and a joint effect >= 3 se have opposite "
                          "signs", "1"),
}
_BOOL = ("confirmed", "dominant", "redundant", "dependency", "joint_contradicts", "idle")
_STR = ("kind", "path", "from", "to", "label_from", "label_to", "metric", "role", "ablation",
        "depends")
_FLOAT = ("composition", "attribution", "score_to", "effect_causal", "effect_se",
          "effect_zero", "effect_mean", "effect_resample", "joint_effect", "joint_se",
          "faithfulness", "faithfulness_se", "faithfulness_empty")


def _columns(rows: list[dict], labels: xr.Dataset) -> dict[str, np.ndarray]:
    lab = labels["label"].transpose("layer", "head").values
    cols: dict[str, list] = {k: [] for k in VARIABLES}
    for r in rows:
        r = dict(r, **{"from": head_name(r["layer_from"], r["head_from"]),
                       "to": head_name(r["layer_to"], r["head_to"]),
                       "label_from": lab[r["layer_from"], r["head_from"]],
                       "label_to": lab[r["layer_to"], r["head_to"]]})
        for k in VARIABLES:
            cols[k].append(r[k])
    out = {}
    for k, v in cols.items():
        if k in _STR:
            out[k] = np.array(v, dtype=str) if v else np.array([], dtype=str)
        elif k in _BOOL:
            out[k] = np.array(v, dtype=np.int8)
        elif k in _FLOAT:
            out[k] = np.array(v, dtype=np.float64)
        else:
            out[k] = np.array(v, dtype=np.int64)
    return out


def candidate_dataset(rows: list[dict], labels: xr.Dataset, probes: dict,
                      seqs: Sequences | None, *, k: int, screens: dict | None = None) -> xr.Dataset:
    """The Dataset of the module docstring from the driver's rows; ``probes`` {repeat
    length: probe Dataset}; ``screens`` {(layer, head): {(kind, path): (layer, H)}}."""
    from ..._version import __version__
    from . import find as F

    ds = xr.Dataset(coords={"candidate": np.arange(len(rows)),
                            "layer": labels["layer"].values, "head": labels["head"].values})
    for name, arr in _columns(rows, labels).items():
        ln, units = VARIABLES[name]
        ds[name] = ("candidate", arr, {"long_name": ln, "units": units})
    for name in ("label", "label_score", "label_statistic", "label_length",
                 "statistic_by_length", "chance_by_length"):
        if name in labels:
            ds[name] = labels[name]
    if probes:
        length = labels["label_length"].transpose("layer", "head").values
        for name in bh.BEHAVIOURS:
            v = np.stack([np.asarray(probes[n][name].transpose("layer", "head").values)
                          for n in sorted(probes)])
            idx = np.searchsorted(np.array(sorted(probes)), length)
            idx = np.clip(idx, 0, len(probes) - 1)
            pick = np.take_along_axis(v, idx[None], axis=0)[0]
            ds["behaviour_" + name] = (("layer", "head"), pick,
                                       dict(probes[sorted(probes)[0]][name].attrs))
    _screen(ds, screens or {}, labels)
    ds.attrs.update(
        Conventions="CF-1.8", title="rmtbase circuits: every source screened, path patching "
                                    "confirms",
        source=f"rmtbase {__version__}",
        probe_source=seqs.source if seqs is not None else "repeated_random_tokens",
        sequences="; ".join(p.attrs.get("sequences", "") for _, p in sorted(probes.items())),
        k=int(k), confirm_se=F.CONFIRM_SE, confirm_fraction=F.CONFIRM_FRACTION,
        min_sequences=F.MIN_SEQUENCES,
        confirm_rule=f"|effect| >= {F.CONFIRM_SE} se and >= {F.CONFIRM_FRACTION} x the "
                     "receiver's score (0.1 for change metrics), receiver labelled, >= "
                     f"{F.MIN_SEQUENCES} sequences; two-sided t test on a row's sequences",
        patching="direct: the source's output (z W_O slice, no bias) replaced by its "
                 "counterfactual (ablation) in the receiver's q, k or v input only, norm "
                 "re-applied; via_mlp: the source's output replaced in the residual, MLPs in "
                 "between recomputed, attention held clean, only the MLP-mediated change fed "
                 "to the input; effect mean over sequences, se = sd/sqrt(n)",
        v_path="effect is the relative change of the receiver's output |dz|/|z| (its "
               "pattern does not depend on its values)",
        label_threshold=labels.attrs.get("label_threshold", np.nan))
    return ds


def _screen(ds, screens: dict, labels) -> None:
    if not screens:
        return
    n_l, n_h = labels.sizes["layer"], labels.sizes["head"]
    recs = sorted(screens)
    keys = [(kd, p) for kd in ("q", "k", "v") for p in ("direct", "via_mlp")]
    arr = np.full((len(recs), 3, 2, n_l, n_h), np.nan)
    for i, r in enumerate(recs):
        for (kd, p), a in screens[r].items():
            j = keys.index((kd, p))
            arr[i, j // 2, j % 2, :a.shape[0]] = a
    ds.coords["receiver"] = np.array([head_name(*r) for r in recs], dtype=str)
    ds.coords["screen_kind"] = np.array(["q", "k", "v"], dtype=str)
    ds.coords["screen_path"] = np.array(["direct", "via_mlp"], dtype=str)
    ds["screen_attribution"] = (("receiver", "screen_kind", "screen_path", "layer", "head"),
                                arr, {"long_name": "attribution estimate of every earlier "
                                                   "source (layer, head) of each receiver",
                                      "units": "1"})


def circuit_list(ds: xr.Dataset) -> list[dict]:
    """One JSON-ready dict per candidate (module docstring), in the Dataset's order; floats
    NaN become None."""
    def num(x):
        x = float(x)
        return x if np.isfinite(x) else None

    cols = {k: ds[k].values for k in VARIABLES if k in ds}
    out = []
    for i in range(ds.sizes.get("candidate", 0)):
        g = {k: v[i] for k, v in cols.items()}
        item = {"kind": str(g["kind"]), "path": str(g.get("path", "direct")),
                "from": str(g["from"]), "to": str(g["to"]),
                "label_from": str(g["label_from"]), "label_to": str(g["label_to"])}
        if "length_to" in g:
            item["label_length"] = int(g["length_to"])
        for k in ("rank_weights", "rank_attribution", "n_sequences"):
            if k in g:
                item[k] = int(g[k])
        for k in ("attribution", "effect_causal", "effect_se", "effect_zero", "effect_mean",
                  "effect_resample", "score_to", "joint_effect", "joint_se", "faithfulness",
                  "faithfulness_se", "faithfulness_empty"):
            if k in g:
                item[k] = num(g[k])
        for k in _BOOL:
            if k in g:
                item[k] = bool(g[k])
        item["role"] = str(g.get("role", ""))
        item["ablation"] = str(g.get("ablation", ""))
        item["depends"] = str(g.get("depends", ""))
        item["metric"] = str(g["metric"])
        out.append(item)
    return out


__all__ = ["VARIABLES", "candidate_dataset", "circuit_list"]
