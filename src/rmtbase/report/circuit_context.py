"""What a composition score's presentation reads, decided once for every output.

The composition Dataset, the circuit rows (``circuits.nc``) when path patching ran, each head's
behaviour label (:func:`rmtbase.pipeline.labels.head_labels`), its primary kind, and the found lines
(:func:`rmtbase.report.circuit_lines.found_lines`, each induction circuit's output loss among
them)."""

from __future__ import annotations

from ..pipeline.labels import head_labels, labels_of, probe_labels  # noqa: F401 - re-exported


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
    circuits Dataset's attrs, {} without one), "losses" (the output loss lines)}."""
    from .circuit_lines import found_lines
    from .circuit_losses import loss_lines

    if not extras or "composition.nc" not in extras:
        return None
    comp, cds = extras["composition.nc"], extras.get("circuits.nc")
    circuits = None
    meta = dict(cds.attrs) if cds is not None else {}
    if cds is not None:
        from ..circuits import circuit_list

        circuits = circuit_list(cds)
    labels = head_labels(score, cds)
    return {"composition": comp, "circuits": circuits, "labels": labels or {},
            "kinds": head_kinds(score),
            "patched": cds is not None, "meta": meta,
            "losses": (losses := loss_lines(cds)),
            "found": found_lines(comp, circuits, patched=cds is not None, labels=labels,
                                 meta=meta, losses=losses)}


__all__ = ["context", "head_kinds", "labels_of", "probe_labels"]
