"""Each head's behaviour label, from the circuit search or the text probe, and the score with
it (``head_label`` beside ``head_kind``).

With the circuit search's rows (``circuits.nc``) the label is theirs (``label``, over (layer,
head)); without them, the joined text probe's ``behaviour_*`` by
:func:`rmtbase.circuits.label_heads`' rule."""

from __future__ import annotations


def labels_of(ds) -> dict:
    """{(layer, head): label} of a Dataset with ``label`` over (layer, head)."""
    lab = ds["label"].transpose("layer", "head").values
    return {(int(li), int(hi)): str(lab[i, j]) for i, li in enumerate(ds["layer"].values)
            for j, hi in enumerate(ds["head"].values)}


def probe_labels(score) -> dict:
    """{(layer, head): label} from a score with the text probe joined; {} without it."""
    import xarray as xr

    from ..circuits import label_heads
    from ..probe.behaviour import BEHAVIOURS

    if score is None or not all(f"behaviour_{b}" in score for b in BEHAVIOURS):
        return {}
    probe = xr.Dataset({b: score[f"behaviour_{b}"] for b in BEHAVIOURS})
    return labels_of(label_heads(probe))


def head_labels(score, circuits) -> dict:
    """{(layer, head): label}: the circuit search's (``circuits``, a ``circuits.nc`` Dataset;
    {} where it has none), else the text probe's joined to ``score``."""
    if circuits is not None:
        return labels_of(circuits) if "label" in circuits else {}
    return probe_labels(score)


def with_labels(ds, labels: dict | None):
    """``ds`` with ``head_label`` (layer, head), each head's behaviour label from ``labels``
    ({(layer, head): label}; "none" where absent); ``ds`` itself without labels."""
    if not labels:
        return ds
    import numpy as np

    lab = np.array([[labels.get((int(li), int(hi)), "none") for hi in ds["head"].values]
                    for li in ds["layer"].values], dtype=str)
    out = ds.copy()
    out["head_label"] = (("layer", "head"), lab, {
        "long_name": "behaviour label", "units": "1",
        "definition": "what the head does on the probe's sequences (rmtbase.circuits.labels: "
                      "induction, previous-token, duplicate-token, self/local, first-token, "
                      "none); head_kind says how its weights differ from random"})
    return out


__all__ = ["head_labels", "labels_of", "probe_labels", "with_labels"]
