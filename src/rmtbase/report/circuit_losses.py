"""Each induction circuit's output loss as the head search says it: a line, a table row and
the legend's line, of ``circuits.nc``'s variables along ``circuit``
(:mod:`rmtbase.circuits.head.output_loss`)."""

from __future__ import annotations

import numpy as np

from . import circuit_text as T
from .line_width import listed

#: ``circuits.nc``'s loss variables (each with its ``_se``) and how a line names them.
LOSSES = {"loss_clean": "nats clean", "loss_circuit_ablated": "without its edges",
          "loss_receivers_ablated": "without its receivers"}


def loss_rows(cds) -> list[dict]:
    """One dict per behaviour circuit of the circuits Dataset ``cds`` (label, receivers, repeat
    length, each loss and its se); [] where none was measured (no ``circuit`` dimension)."""
    if cds is None or "loss_clean" not in cds:
        return []
    out = []
    for i in range(cds.sizes["circuit"]):
        row = {"label": str(cds["circuit_label"].values[i]),
               "receivers": str(cds["circuit_receivers"].values[i]).split(","),
               "length": int(cds["circuit_length"].values[i])}
        for k in LOSSES:
            row[k] = float(cds[k].values[i])
            row[k + "_se"] = float(cds[k + "_se"].values[i])
        out.append(row)
    return out


def _nats(x, se) -> str:
    if not T.finite(x):
        return "?"
    return f"{float(x):.3g}" + (f"±{float(se):.1g}" if T.finite(se) else "")


def loss_lines(cds) -> list[str]:
    """``induction circuit at repeat 50 (L17H3, L17H4 +5 more): next-token loss 3.05±0.2 nats
    clean, 11.7±0.2 without its edges, 11.5±0.2 without its receivers``, one per circuit
    (the loss where a copy predicts the next token; edges and receivers replaced by their
    counterfactual); a circuit whose model gives no logits says so."""
    lines = []
    for r in loss_rows(cds):
        head = listed(f"{r['label']} circuit at repeat {r['length']} (", r["receivers"],
                      sep=", ", width=40) + ")"
        if not T.finite(r["loss_clean"]):
            lines.append(f"{head}: no output loss (the model gives no logits, or no position "
                         "is predictable by a copy)")
            continue
        lines.append(f"{head}: next-token loss "
                     + ", ".join(f"{_nats(r[k], r[k + '_se'])} {said}"
                                 for k, said in LOSSES.items()))
    return lines


def loss_table(cds):
    """The circuits' losses as a DataFrame (one row per circuit, receivers joined by commas)."""
    import pandas as pd

    rows = loss_rows(cds)
    cols = ["label", "length", "receivers", *[c for k in LOSSES for c in (k, k + "_se")]]
    return pd.DataFrame([{**r, "receivers": ", ".join(r["receivers"])} for r in rows],
                        columns=cols)


def loss_legend(ablation: str) -> str:
    """The legend's line of the loss lines."""
    return ("next-token loss: for each induction circuit (its receivers with a confirmed edge "
            "on one repeat length's sequences) the mean of -log p(next token) at the positions "
            "whose next token a copy predicts, in nats ± se over the sequences: clean; "
            f"without its edges (each confirmed edge {ablation}-ablated in its receiver's "
            f"input); without its receivers (their outputs {ablation}-ablated); a circuit "
            "that carries the copying raises it about as much as removing its receivers does")


def has_losses(cds) -> bool:
    """Whether ``cds`` holds at least one finite clean loss."""
    return cds is not None and "loss_clean" in cds and bool(
        np.isfinite(cds["loss_clean"].values).any())


__all__ = ["LOSSES", "has_losses", "loss_legend", "loss_lines", "loss_rows", "loss_table"]
