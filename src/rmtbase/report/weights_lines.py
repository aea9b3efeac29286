"""What was found when no patching ran: the composition screen by weights alone
(:func:`rmtbase.report.circuit_lines.found_lines` without the circuit search), said as not
confirmed."""

from __future__ import annotations

import numpy as np

from . import circuit_text as T


def weights_lines(ds, labels=None) -> list[str]:
    """No patching ran: with behaviour labels each labelled receiver's top source per kind by
    weights; else the strongest pair of each kind. Said as not confirmed."""
    from .composition_standing import standing_rows

    named = sorted(((layer, head), lab) for (layer, head), lab in (labels or {}).items()
                   if lab and str(lab) != "none" and layer > 0)
    if named:
        lines = []
        for (layer, head), lab in named:
            keep = np.zeros(ds["composition"].shape, bool)
            keep[:, :, :, layer, head] = True
            top = {}
            for r in standing_rows(ds, keep=keep):
                top.setdefault(r["kind"], r)
            lines.append(f"L{layer}H{head} ({lab}): top source by weights " + ", ".join(
                f"{k.upper()} {r['from']} ({T.label((labels or {}).get((r['layer_from'], r['head_from'])))}"
                f", rank {r['rank_kind']:,} of the kind)" for k, r in sorted(top.items())))
        return lines + ["labels from the text probe; not confirmed by path patching"]
    n = int(ds.attrs.get("pairs_per_kind", np.isfinite(ds["composition"].isel(kind=0)).sum()))
    best = {}
    for r in standing_rows(ds, top=3 * 4):
        best.setdefault(r["kind"], r)
    lines = [f"strongest {k.upper()}-composition by weights: {r['from']} → {r['to']} (rank 1 of "
             f"{n:,}; effect {r['effect']:.3g}× the null median)" for k, r in sorted(best.items())]
    return lines + ["not confirmed: weights screen, path patching decides (add --probe)"]


__all__ = ["weights_lines"]
