"""What a composition score's presentation reads, decided once for every output.

The composition Dataset, the circuit rows (``circuits.nc``) when path patching ran, each head's
behaviour label (``circuits.nc``'s ``label``, else the joined text probe's ``behaviour_*`` by
:func:`rmtbase.circuits.label_heads`' rule), its primary kind, and the found lines
(:func:`rmtbase.report.circuit_lines.found_lines`)."""

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


def head_kinds(score) -> dict:
    """{(layer, head): primary kind} (``head_kind``, :mod:`rmtbase.decision.kinds`: how the
    head's weights differ from random); {} without a score or kinds."""
    if score is None or "head_kind" not in score or "layer" not in score.dims:
        return {}
    kind = score["head_kind"].transpose("layer", "head").values
    return {(int(li), int(hi)): str(kind[i, j]) for i, li in enumerate(score["layer"].values)
            for j, hi in enumerate(score["head"].values)}


def context(score, extras) -> dict | None:
    """None without ``composition.nc`` in ``extras``; else {"composition", "circuits" (or None),
    "labels", "kinds" ({(layer, head): ...}, maybe empty), "found", "patched", "meta" (the
    circuits Dataset's attrs, {} without one)}."""
    from .circuit_lines import found_lines

    if not extras or "composition.nc" not in extras:
        return None
    comp, cds = extras["composition.nc"], extras.get("circuits.nc")
    circuits = labels = None
    meta = dict(cds.attrs) if cds is not None else {}
    if cds is not None:
        from ..circuits import circuit_list

        circuits = circuit_list(cds)
        labels = labels_of(cds) if "label" in cds else {}
    else:
        labels = probe_labels(score)
    return {"composition": comp, "circuits": circuits, "labels": labels or {},
            "kinds": head_kinds(score),
            "patched": cds is not None, "meta": meta,
            "found": found_lines(comp, circuits, patched=cds is not None, labels=labels,
                                 meta=meta)}


__all__ = ["context", "head_kinds", "labels_of", "probe_labels"]
