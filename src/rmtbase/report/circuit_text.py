"""The pieces of a circuit finding's line: heads ordered as numbers, rows read the same way
whether from ``circuits.nc`` (:func:`rmtbase.circuits.circuit_list`) or from the search.

A row is a dict with ``kind``, ``path``, ``from``/``to`` (or ``layer_from`` … ``head_to``),
``effect_causal``/``effect_se``, and optionally the other fields of ``docs/json.md``. A missing
or NaN number is left out of the text, never shown as 0."""

from __future__ import annotations

import re

import numpy as np

_HEAD = re.compile(r"^L(\d+)H(\d+)$")
#: Metrics that measure a change rather than a behaviour statistic (no sign, no score).
CHANGE_METRICS = ("output_change", "attention_tv")
#: What each counterfactual puts in place of a source's output (``ablation``).
COUNTERFACTUALS = {
    "zero": "set to zero",
    "mean": "replaced by its mean over the run's other sequences at the same position",
    "resample": "replaced by its output on another sequence at the same position (the effect "
                "averaged over several pairings)",
}


def finite(x) -> bool:
    """Whether ``x`` is a finite number (None, NaN and text are not)."""
    try:
        return x is not None and bool(np.isfinite(float(x)))
    except (TypeError, ValueError):
        return False


def head_order(name) -> tuple:
    """Sort key of a head name ``L<layer>H<head>`` by layer, then head, as numbers (a name of
    another form after every head, by its text)."""
    m = _HEAD.match(str(name))
    return (0, int(m.group(1)), int(m.group(2)), "") if m else (1, 0, 0, str(name))


def _name(layer, head) -> str:
    return f"L{int(layer)}H{int(head)}"


def _label_of_metric(metric) -> str:
    from ..circuits.head.labels import STATISTIC

    back = {v: k for k, v in STATISTIC.items()}
    return back.get(str(metric), "")


def normalised(row: dict) -> dict:
    """``row`` with ``from``, ``to``, ``path``, ``label_to`` and ``kind`` present: names from
    the layer and head numbers where missing; the label from the metric where the row has none
    (a q/k row's metric is its receiver's behaviour statistic)."""
    r = dict(row)
    if "from" not in r and "layer_from" in r:
        r["from"] = _name(r["layer_from"], r["head_from"])
    if "to" not in r and "layer_to" in r:
        r["to"] = _name(r["layer_to"], r["head_to"])
    r["path"] = str(r.get("path") or "direct")
    r["kind"] = str(r.get("kind", "?"))
    if not r.get("label_to"):
        r["label_to"] = ("none" if r.get("dependency") else
                         _label_of_metric(r.get("metric")) or "none")
    return r


def label(text) -> str:
    """A behaviour label as said (``none`` and empty: ``unlabelled``)."""
    return "unlabelled" if not text or str(text) == "none" else str(text)


def is_change(row: dict) -> bool:
    """Whether the row's effect is a change (V, or a receiver without a label): unsigned."""
    return row.get("metric") in CHANGE_METRICS or row.get("kind") == "v"


def num(x, signed: bool = True) -> str:
    """Two significant digits, signed unless asked not to; ``?`` where not finite."""
    if not finite(x):
        return "?"
    return f"{float(x):+.2g}" if signed else f"{float(x):.2g}"


def with_se(x, se, signed: bool = True) -> str:
    """``+0.42±0.03`` (the se to one significant digit; left out where not finite)."""
    return num(x, signed) + (f"±{float(se):.1g}" if finite(se) else "")


def effect(row: dict) -> str:
    """The row's effect under its counterfactual, with its se."""
    return with_se(row.get("effect_causal"), row.get("effect_se"), not is_change(row))


def span(rows: list[dict], key: str, se_key: str | None, signed: bool) -> str:
    """One receiver's ``key`` with its se (``+0.42±0.03``), or the range ``lo..hi`` of several
    receivers' with the largest se (``+0.2..+0.51 (se ≤ 0.03)``); "" when none is finite."""
    vals, ses = _values(rows, key, se_key)
    if not vals:
        return ""
    if len(vals) == 1:
        return with_se(vals[0], ses[0] if ses else None, signed)
    return _range(vals, signed) + (f" (se ≤ {max(ses):.1g})" if ses else "")


def _values(rows, key, se_key) -> tuple[list[float], list[float]]:
    vals = [float(r[key]) for r in rows if finite(r.get(key))]
    ses = [float(r[se_key]) for r in rows if se_key and finite(r.get(se_key))]
    return vals, ses


def _range(vals: list[float], signed: bool) -> str:
    lo, hi = num(min(vals), signed), num(max(vals), signed)
    return lo if lo == hi else f"{lo}..{hi}"


def path(row_or_path) -> str:
    """``direct`` or ``via MLP``."""
    p = row_or_path.get("path") if isinstance(row_or_path, dict) else row_or_path
    return "via MLP" if p == "via_mlp" else "direct"


def faithfulness(rows: list[dict]) -> str:
    """``faithful 0.91±0.04 (empty 0.12)`` of one receiver and kind; of several receivers the
    range, the largest se and the largest empty (``faithful 0.85..0.93 (se ≤ 0.04, empty ≤
    0.15)``); "" where not measured."""
    vals, ses = _values(rows, "faithfulness", "faithfulness_se")
    if not vals:
        return ""
    empty = [float(r["faithfulness_empty"]) for r in rows if finite(r.get("faithfulness_empty"))]
    if len(vals) == 1:
        text = with_se(vals[0], ses[0] if ses else None, signed=False)
        return f"faithful {text}" + (f" (empty {num(empty[0], False)})" if empty else "")
    notes = ([f"se ≤ {max(ses):.1g}"] if ses else []) + (
        [f"empty ≤ {num(max(empty), False)}"] if empty else [])
    return f"faithful {_range(vals, False)}" + (f" ({', '.join(notes)})" if notes else "")


def ablation_of(meta: dict | None, rows=()) -> str:
    """The counterfactual the effects were measured under: the Dataset's ``counterfactual``
    or ``ablation`` attr, else the rows' ``ablation``, else ``zero`` (files written before the
    choice existed set sources to zero)."""
    got = (meta or {}).get("counterfactual") or (meta or {}).get("ablation")
    if not got:
        got = next((r.get("ablation") for r in rows if r.get("ablation")), None)
    return str(got or "zero")


def counterfactual_effects(rows, ablation: str) -> str:
    """``zero +0.14, mean +0.014``: the effect of a row (or the range over rows) under each
    counterfactual measured, the chosen one last."""
    rows = [rows] if isinstance(rows, dict) else list(rows)
    order = [a for a in ("zero", "mean", "resample") if a != ablation] + [ablation]
    signed = not any(is_change(r) for r in rows)
    got = []
    for a in order:
        vals = [float(x) for r in rows if finite(x := (
            r.get("effect_causal") if a == ablation and not finite(r.get(f"effect_{a}"))
            else r.get(f"effect_{a}")))]
        if vals:
            got.append(f"{a} {_range(vals, signed)}")
    return ", ".join(got)


__all__ = ["CHANGE_METRICS", "COUNTERFACTUALS", "ablation_of", "counterfactual_effects",
           "effect", "faithfulness", "finite", "head_order", "is_change", "label", "normalised",
           "num", "path", "span", "with_se"]
