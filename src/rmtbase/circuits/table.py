"""The circuit search's Dataset and its JSON list.

:func:`candidate_dataset`: one row per candidate pair along dimension ``candidate`` (variables
below, each with ``long_name`` and ``units``), the heads' labels and probe statistics along
(layer, head) (``label``, ``label_score``, ``label_statistic``, ``behaviour_<name>`` as
:func:`rmtbase.probe.join` names them), and attrs saying the sequences (``probe_source``:
``"text"`` or ``"repeated_random_tokens"``), the rule and its constants. Strings are plain
``str`` variables; booleans are stored as int8 0/1 (netCDF has no bool). Write it with
:meth:`rmtbase.files.output.OutputFolder.write_netcdf`.

:func:`circuit_list`: the JSON objects ``{kind, from, to, label_from, label_to,
rank_weights, effect_causal, effect_se, confirmed, dominant, redundant, metric}``.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from ..probe import behaviour as bh
from .labels import head_name
from .sequences import Sequences

#: Candidate variables: (long_name, units).
VARIABLES = {
    "kind": ("path: the receiver's input the source is removed from (q, k or v)", "1"),
    "from": ("source head, L<layer>H<head>", "1"),
    "to": ("receiver head, L<layer>H<head>", "1"),
    "layer_from": ("source layer", "1"), "head_from": ("source head", "1"),
    "layer_to": ("receiver layer", "1"), "head_to": ("receiver head", "1"),
    "label_from": ("behaviour label of the source", "1"),
    "label_to": ("behaviour label of the receiver", "1"),
    "rank_weights": ("rank of the source among the receiver's earlier sources by this kind's "
                     "composition score (1 = top)", "1"),
    "n_sources": ("number of the receiver's earlier sources", "1"),
    "composition": ("composition score of the pair for this kind", "1"),
    "metric": ("what effect_causal measures: the receiver's behaviour statistic, "
               "output_change (v) or attention_tv (no label)", "1"),
    "score_to": ("receiver's unpatched behaviour statistic (0 for the change metrics)", "1"),
    "effect_causal": ("drop of the receiver's statistic (or its change) when the source's "
                      "direct output is removed from this input", "1"),
    "effect_se": ("standard error of effect_causal over sequences", "1"),
    "confirmed": ("effect >= 3 se and >= 10 % of score_to (0.1 for change metrics)", "1"),
    "dominant": ("confirmed and the largest effect of the receiver's candidates of the kind",
                 "1"),
    "joint_effect": ("effect of removing all the receiver's candidates of the kind at once",
                     "1"),
    "joint_se": ("standard error of joint_effect over sequences", "1"),
    "redundant": ("no single candidate confirmed but the joint removal passes the rule", "1"),
}
_BOOL = ("confirmed", "dominant", "redundant")
_STR = ("kind", "from", "to", "label_from", "label_to", "metric")


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
        elif k in ("composition", "score_to", "effect_causal", "effect_se", "joint_effect",
                   "joint_se"):
            out[k] = np.array(v, dtype=np.float64)
        else:
            out[k] = np.array(v, dtype=np.int64)
    return out


def candidate_dataset(rows: list[dict], labels: xr.Dataset, probe: xr.Dataset,
                      seqs: Sequences, *, k: int) -> xr.Dataset:
    """The Dataset of the module docstring from the driver's rows."""
    from .._version import __version__
    from . import find as F

    ds = xr.Dataset(coords={"candidate": np.arange(len(rows)),
                            "layer": labels["layer"].values, "head": labels["head"].values})
    for name, arr in _columns(rows, labels).items():
        ln, units = VARIABLES[name]
        ds[name] = ("candidate", arr, {"long_name": ln, "units": units})
    for name in ("label", "label_score", "label_statistic"):
        ds[name] = labels[name]
    for name in bh.BEHAVIOURS:
        ds["behaviour_" + name] = probe[name]
    ds.attrs.update(
        Conventions="CF-1.8", title="rmtbase circuits: weights screen, path patching confirms",
        source=f"rmtbase {__version__}", probe_source=seqs.source, sequences=seqs.description,
        n_sequences=seqs.n, sequence_length=seqs.length, k=int(k),
        confirm_se=F.CONFIRM_SE, confirm_fraction=F.CONFIRM_FRACTION,
        patching="direct path of the source (z W_O slice, no bias) removed from the "
                 "receiver's q, k or v input only; layer norm re-applied; effect mean over "
                 "sequences, se = sd/sqrt(n)",
        v_path="effect is the relative change of the receiver's output |dz|/|z| (its "
               "pattern does not depend on its values)",
        label_threshold=labels.attrs.get("label_threshold", np.nan))
    return ds


def circuit_list(ds: xr.Dataset) -> list[dict]:
    """One JSON-ready dict per candidate (module docstring), in the Dataset's order; floats
    NaN become None."""
    def num(x):
        x = float(x)
        return x if np.isfinite(x) else None

    out = []
    for i in range(ds.sizes.get("candidate", 0)):
        row = ds.isel(candidate=i)
        out.append({"kind": str(row["kind"].values), "from": str(row["from"].values),
                    "to": str(row["to"].values), "label_from": str(row["label_from"].values),
                    "label_to": str(row["label_to"].values),
                    "rank_weights": int(row["rank_weights"].values),
                    "effect_causal": num(row["effect_causal"].values),
                    "effect_se": num(row["effect_se"].values),
                    "confirmed": bool(row["confirmed"].values),
                    "dominant": bool(row["dominant"].values),
                    "redundant": bool(row["redundant"].values),
                    "metric": str(row["metric"].values)})
    return out


__all__ = ["VARIABLES", "candidate_dataset", "circuit_list"]
