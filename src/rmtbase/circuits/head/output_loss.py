"""What a behaviour circuit does for the model's output: the next-token loss where induction
can predict, clean, with the circuit's edges replaced by their counterfactual, and with its
receivers' outputs replaced.

Logits: the model's own, or for a base model as rmtbase loads it the final hidden state times
its output head (the input embedding where tied, else the head's weight read from the
safetensors or GGUF file, without a final soft-cap); NaN where none is found. Positions: query
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

Outputs are set at the input of the layer's output projection, so a later receiver gets the set
value whatever the earlier ones changed. A circuit that carries the behaviour raises the loss
about as much as removing its receivers does; an idle one leaves it at ``loss_clean``.
"""

from __future__ import annotations

import numpy as np

from ..core.hooks import forward, hooked
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


def _loss(hm, ids, mask, replace) -> np.ndarray | None:
    """Per sequence mean next-token loss at ``mask`` with the heads in ``replace`` {layer:
    {head: z (N, T, d_h)}} set to those outputs (a pre-hook on the layer's output projection,
    whose input is the heads' outputs side by side); None where the model gives no logits."""
    import torch

    def hook(j):
        def run(_mod, args):
            z = args[0]
            zz = z.reshape(*z.shape[:-1], hm.n_heads, hm.head_dim).clone()
            for h, new in replace[j].items():
                zz[..., h, :] = new.to(zz.dtype)
            return (zz.reshape(z.shape), *args[1:])
        return run

    x = torch.from_numpy(np.ascontiguousarray(ids))
    with hooked([(hm.output_projection(j), hook(j), "pre") for j in replace]), \
            torch.inference_mode():
        out = forward(hm.net, ids)
    m = np.asarray(mask[:, :-1], dtype=bool)
    nll = np.full(m.shape, np.nan)
    with torch.inference_mode():
        for n in range(m.shape[0]):  # one sequence's predicted positions at a time
            at = np.flatnonzero(m[n])
            if not at.size:
                continue
            logits = _logits(hm.net, out, n, torch.from_numpy(at))
            if logits is None:
                return None
            lp = torch.log_softmax(logits.double(), -1)
            nll[n, at] = -lp.gather(-1, x[n, at + 1, None]).squeeze(-1).numpy()
    with np.errstate(invalid="ignore"):
        return np.where(m.any(1), np.where(m, nll, 0.0).sum(1) / np.maximum(m.sum(1), 1),
                        np.nan)


def _logits(net, out, n: int, at):
    """Sequence ``n``'s logits ``(len(at), V)`` at positions ``at``: the model's own, or for a
    base model (rmtbase loads GGUF files and folders as base models) the final hidden state
    times its output head (:data:`OUTPUT_HEAD`) or the input embedding where the head is tied to
    it (``tie_word_embeddings``); None for an untied head that was not loaded. Only the
    positions asked for are unembedded, one sequence at a time (the full ``(N, T, V)`` would be
    gigabytes at a 50k vocabulary)."""
    logits = getattr(out, "logits", None)
    if logits is not None:
        return logits[n, at].float()
    hidden = getattr(out, "last_hidden_state", None)
    if hidden is None:
        return None
    head = getattr(net, OUTPUT_HEAD, None)
    if head is None:
        cfg = getattr(net, "config", None)
        text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
        if not getattr(text, "tie_word_embeddings", False):
            return None
        head = net.get_input_embeddings().weight
    return hidden[n, at].float() @ head.float().T


#: Attribute of a base model holding its untied output head's weight ``(V, d)``, read from
#: its files (:func:`attach_output_head`; the GGUF reader sets it too).
OUTPUT_HEAD = "rmtbase_output_head"
#: Names of an untied output head's weight in a folder's safetensors.
HEAD_NAMES = ("lm_head.weight", "embed_out.weight")


def attach_output_head(net, model) -> None:
    """Give a base model loaded from the folder ``model`` its untied output head's weight
    (:data:`HEAD_NAMES` in its safetensors files) as :data:`OUTPUT_HEAD`; nothing where the
    model has logits, a tied head, the attribute already, or no such tensor."""
    from pathlib import Path

    if hasattr(net, "lm_head") or getattr(net, OUTPUT_HEAD, None) is not None:
        return
    cfg = getattr(net, "config", None)
    text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    if getattr(text, "tie_word_embeddings", False) or not isinstance(model, (str, Path)):
        return
    folder = Path(model).expanduser()
    if not folder.is_dir():
        return
    from safetensors import safe_open

    for f in sorted(folder.glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as st:
            for name in HEAD_NAMES:
                if name in st.keys():
                    setattr(net, OUTPUT_HEAD, st.get_tensor(name).float())
                    return


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

    hm, pt, seqs = run.hm, run.pt, run.seqs
    mask = predictable(seqs.ids)
    nan = (np.nan, np.nan)
    out = {"loss_clean": nan, "loss_circuit_ablated": nan, "loss_receivers_ablated": nan}
    if not mask[:, :-1].any():
        return out
    clean = _loss(hm, seqs.ids, mask, {})
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
        cut.append(_loss(hm, seqs.ids, mask, edge))
        gone.append(_loss(hm, seqs.ids, mask, recv))

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
