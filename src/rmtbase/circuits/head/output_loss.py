"""What a behaviour circuit does for the model's output: the next-token loss where induction
can predict, clean, with the circuit's edges replaced by their counterfactual, and with its
receivers' outputs replaced.

Logits: :mod:`..core.readout` (NaN where the model gives none). Positions: query
``i`` whose next token is predictable by copying, i.e. some ``j < i`` has ``ids[j] = ids[i]``
and ``ids[j + 1] = ids[i + 1]``. Loss: the mean over those positions of ``−log p(ids[i + 1])``
(nats), per sequence, then mean and se over sequences.

A **behaviour circuit** is the induction heads of one run's sequences with at least one
confirmed edge, and those edges: the loss where a copy predicts the next token is what
induction is for (Olsson et al. 2022); the other labels' test is their faithfulness
(:mod:`.faithfulness`). Three full forward passes (each averaged over the counterfactual's
pairings, :mod:`..core.counterfactual`):

- ``loss_clean``: the model as it is;
- ``loss_circuit_ablated``: each receiver R's output recomputed with its ``κ`` input (q, k, v)
  read from the clean residual in which the sources confirmed for (R, κ), on any path, are
  counterfactual (as in :mod:`.faithfulness`);
- ``loss_receivers_ablated``: every receiver's output set to its counterfactual.

Outputs are set where the layer's output projection reads them (:mod:`..core.readout`). A
circuit that carries the behaviour raises the loss about as much as removing its receivers does;
an idle one leaves it at ``loss_clean``.
"""

from __future__ import annotations

import numpy as np

from ..core.readout import HEAD_NAMES, OUTPUT_HEAD, attach_output_head, head_forward
from ..core.se import finite_mean_se

#: The labels whose receivers form a behaviour circuit measured on the output.
LABELS = ("induction",)


def predictable(ids) -> np.ndarray:
    """``(N, T)`` bool: query positions whose next token a copy predicts (module docstring)."""
    ids = np.asarray(ids)
    n, t = ids.shape
    out = np.zeros((n, t), dtype=bool)
    for s in range(n):
        seen = set()
        row = ids[s]
        for i in range(t - 1):
            pair = (int(row[i]), int(row[i + 1]))
            if pair in seen:
                out[s, i] = True
            seen.add(pair)
    return out


def _loss(rows, ids, mask) -> np.ndarray | None:
    """Per sequence mean ``−log p(ids[i + 1])`` (:func:`..core.metric.metric`'s ``logprob``)
    over the positions ``mask`` of ``rows``; None where the model gives no logits."""
    import torch

    from ..core.metric import metric

    x = torch.from_numpy(np.ascontiguousarray(ids))
    m = np.asarray(mask[:, :-1], dtype=bool)
    nll = np.full(m.shape, np.nan)
    with torch.inference_mode():
        for n in range(m.shape[0]):  # one sequence's predicted positions at a time
            at = np.flatnonzero(m[n])
            if not at.size:
                continue
            logits = rows(n, torch.from_numpy(at))
            if logits is None:
                return None
            nxt = x[n, at + 1]
            nll[n, at] = -metric("logprob", logits, nxt, nxt).numpy()
    with np.errstate(invalid="ignore"):
        return np.where(m.any(1), np.where(m, nll, 0.0).sum(1) / np.maximum(m.sum(1), 1),
                        np.nan)


def _patched_output(run, rec, edges, how):
    """``z'`` of receiver ``rec`` with each input reading its edges' counterfactual residual."""
    import torch

    from .faithfulness import residual_removing

    li, hi = rec
    hm = run.hm
    c = run.pt.clean(li, hi)
    inputs = {}
    with torch.inference_mode():
        for kind in ("q", "k", "v"):
            srcs = edges.get(kind)
            if not srcs:
                inputs[kind] = c[kind]
                continue
            x = residual_removing(run, li, srcs, how, run.mlps)
            fn = {"q": hm.query, "k": hm.key, "v": hm.value}[kind]
            inputs[kind] = fn(li, hi, hm.norm(li)(x))
        a = hm.pattern(li, inputs["q"], inputs["k"], head=hi)
        return a @ inputs["v"]


def losses(run, circuit: dict) -> dict:
    """``{loss_clean, loss_circuit_ablated, loss_receivers_ablated}`` each ``(mean, se)`` for
    ``circuit`` {(layer, head): {kind: {(m, s), …}}} on ``run``'s sequences (module
    docstring); NaN where the model gives no logits or no position is predictable."""
    import torch

    pt, seqs = run.pt, run.seqs
    mask = predictable(seqs.ids)
    nan = (np.nan, np.nan)
    out = {"loss_clean": nan, "loss_circuit_ablated": nan, "loss_receivers_ablated": nan}
    if not mask[:, :-1].any():
        return out
    loss = head_forward(run.task_model(), seqs.ids)
    clean = _loss(loss({}), seqs.ids, mask)
    if clean is None:
        return out
    cut, gone = [], []
    for how in pt.hows():
        edge, recv = {}, {}
        for (li, hi), edges in circuit.items():
            z = run.cap.z[li][:, :, hi, :].float()
            with torch.inference_mode():
                edge.setdefault(li, {})[hi] = _patched_output(run, (li, hi), edges, how)
                recv.setdefault(li, {})[hi] = (torch.zeros_like(z) if how is None
                                               else z - how[0].delta(z, how[1]))
        cut.append(_loss(loss(edge), seqs.ids, mask))
        gone.append(_loss(loss(recv), seqs.ids, mask))

    def stat(x):
        return finite_mean_se(x, least=2)

    out["loss_clean"] = stat(clean)
    out["loss_circuit_ablated"] = stat(np.mean(cut, axis=0))
    out["loss_receivers_ablated"] = stat(np.mean(gone, axis=0))
    return out


def add_circuit_losses(ds, rows, labels, runs, length_of, progress) -> None:
    """Per behaviour circuit (the receivers of :data:`LABELS` with confirmed edges on one run's
    sequences: ``runs`` {length: run}, ``length_of`` (layer, head) → length), :func:`losses`
    added to the circuits Dataset ``ds`` as variables along ``circuit``."""
    from ...progress import stage
    from .labels import head_name

    lab = labels["label"].transpose("layer", "head").values
    groups: dict = {}
    for r in rows:
        rec = (r["layer_to"], r["head_to"])
        if not r["confirmed"] or str(lab[rec]) not in LABELS:
            continue
        n = int(length_of[rec]) if len(runs) > 1 else next(iter(runs))
        g = groups.setdefault((str(lab[rec]), n), {})
        g.setdefault(rec, {}).setdefault(r["kind"], set()).add((r["layer_from"], r["head_from"]))
    if not groups:
        return
    stage("rmtbase circuits", f"output loss of {len(groups)} induction circuit(s)",
          enabled=progress)
    names = ("loss_clean", "loss_circuit_ablated", "loss_receivers_ablated")
    cols: dict = {k: [] for k in ("circuit_label", "circuit_receivers", "circuit_length")}
    for k in names:
        cols[k], cols[k + "_se"] = [], []
    for (label, n), circuit in sorted(groups.items()):
        got = losses(runs[n], circuit)
        cols["circuit_label"].append(label)
        cols["circuit_receivers"].append(",".join(head_name(*rec) for rec in sorted(circuit)))
        cols["circuit_length"].append(int(n))
        for k in names:
            cols[k].append(got[k][0])
            cols[k + "_se"].append(got[k][1])
    meaning = {
        "loss_clean": "next-token loss where a copy predicts the next token (nats)",
        "loss_circuit_ablated": "that loss with the circuit's confirmed edges replaced by their "
                                "counterfactual (each receiver's inputs)",
        "loss_receivers_ablated": "that loss with the circuit's receivers' outputs replaced by "
                                  "their counterfactual"}
    for k, v in cols.items():
        base = k[:-3] if k.endswith("_se") else k
        ln = (("standard error over sequences of " if k.endswith("_se") else "")
              + meaning.get(base, k.replace("_", " ")))
        arr = np.array(v, dtype=str if k in ("circuit_label", "circuit_receivers") else
                       (np.int64 if k == "circuit_length" else np.float64))
        ds[k] = ("circuit", arr, {"long_name": ln, "units": "nats" if "loss" in k else "1"})


__all__ = ["HEAD_NAMES", "LABELS", "OUTPUT_HEAD", "add_circuit_losses", "attach_output_head",
           "losses", "predictable"]
