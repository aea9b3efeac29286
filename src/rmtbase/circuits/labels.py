"""One behaviour label per head, from the probe's per-head statistics
(:mod:`rmtbase.probe.behaviour`; one implementation of each statistic, read here, never
recomputed).

Rule (:func:`label_heads`). Each label is earned by one statistic reaching :data:`THRESHOLD`:

=================  =================  ===================================================
label              statistic          meaning
=================  =================  ===================================================
``induction``      ``induction``      attention on the token after an earlier occurrence
``previous-token`` ``prev_token``     attention on ``i − 1``
``duplicate-token`` ``duplicate_token`` attention on earlier occurrences of the query's token
``self/local``     ``self``           attention on the query's own position
``first-token``    ``first_token``    attention on position 0 (BOS / ``[CLS]``): a sink
``none``           (none)             no statistic reaches the threshold
=================  =================  ===================================================

The threshold 0.4 (mean attention, units 1) is the one of ARENA's head detectors
(``current_attn_detector``, ``prev_attn_detector``, ``first_attn_detector``,
``induction_attn_detector``: "score > 0.4", ARENA 3.0 chapter 1.2, "Finding induction heads",
written for TransformerLens' attention patterns). The statistics here average over content
queries (those with a target, for induction and duplicate-token), see
:mod:`rmtbase.probe.behaviour`.

Ties and several passes: the four specific labels (induction, previous-token, duplicate-token,
self/local) come before the sink: a head that passes one of them gets the one whose score is
largest, however much it attends to BOS; exactly equal scores go to the earlier label of
:data:`LABELS`. ``first-token`` is given only when no specific label passes. ``label_score``
is the statistic that earned the label (NaN for ``none``), ``label_statistic`` its name ("" for
``none``).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from ..errors import InputError

#: Labels in tie order (the sink and ``none`` last).
LABELS = ("induction", "previous-token", "duplicate-token", "self/local", "first-token", "none")
#: The probe statistic behind each label.
STATISTIC = {"induction": "induction", "previous-token": "prev_token",
             "duplicate-token": "duplicate_token", "self/local": "self",
             "first-token": "first_token"}
#: Mean attention a statistic must reach (ARENA's detectors, module docstring).
THRESHOLD = 0.4
_SPECIFIC = LABELS[:4]


def head_name(layer: int, head: int) -> str:
    """``"L16H0"``: layer and head, 0-based."""
    return f"L{int(layer)}H{int(head)}"


def _label_one(scores: dict[str, float], threshold: float) -> tuple[str, float]:
    best, best_score = "none", np.nan
    for group in (_SPECIFIC, ("first-token",)):
        for lab in group:
            s = scores[lab]
            if np.isfinite(s) and s >= threshold and not (s <= best_score):
                best, best_score = lab, s
        if best != "none":
            break
    return best, best_score


def label_heads(probe: xr.Dataset, *, threshold: float = THRESHOLD) -> xr.Dataset:
    """A (layer, head) Dataset: ``label`` (str, one of :data:`LABELS`), ``label_score`` (the
    statistic that earned it, units 1; NaN for ``none``) and ``label_statistic`` (its name)
    from a probe Dataset (:func:`rmtbase.probe.probe_model` or
    :func:`rmtbase.circuits.probe_heads`) by the rule of the module docstring. A statistic the
    probe lacks (NaN: no token ids) cannot earn its label. The probe's ``probe_source`` attr
    is kept."""
    missing = [s for s in STATISTIC.values() if s not in probe]
    if missing:
        raise InputError(f"the probe lacks {', '.join(missing)}: cannot label its heads")
    if not 0.0 < float(threshold) <= 1.0:
        raise InputError(f"threshold must be in (0, 1], got {threshold!r}")
    stats = {lab: np.asarray(probe[s].transpose("layer", "head").values, dtype=np.float64)
             for lab, s in STATISTIC.items()}
    n_l, n_h = stats["induction"].shape
    label = np.empty((n_l, n_h), dtype=object)
    score = np.full((n_l, n_h), np.nan)
    for li in range(n_l):
        for hi in range(n_h):
            label[li, hi], score[li, hi] = _label_one(
                {lab: v[li, hi] for lab, v in stats.items()}, float(threshold))
    statistic = np.array([[STATISTIC.get(x, "") for x in row] for row in label], dtype=object)
    out = xr.Dataset(coords={"layer": probe["layer"].values, "head": probe["head"].values})
    out["label"] = (("layer", "head"), label.astype(str), {
        "long_name": "behaviour label of the head", "units": "1",
        "definition": f"first of {', '.join(LABELS)} whose statistic reaches {threshold} "
                      "(rmtbase.circuits.labels)"})
    out["label_score"] = (("layer", "head"), score, {
        "long_name": "the statistic that earned the label", "units": "1"})
    out["label_statistic"] = (("layer", "head"), statistic.astype(str), {
        "long_name": "name of the probe statistic behind the label", "units": "1"})
    out.attrs.update(label_threshold=float(threshold),
                     label_rule="ARENA 1.2 head detectors' 0.4; specific labels before the "
                                "first-token sink; largest score, ties in label order")
    if "probe_source" in probe.attrs:
        out.attrs["probe_source"] = probe.attrs["probe_source"]
    return out


__all__ = ["LABELS", "STATISTIC", "THRESHOLD", "head_name", "label_heads"]
