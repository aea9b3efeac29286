"""The causal truth of a GPT-2's circuits, computed independently of rmtbase (no rmtbase code,
no transformers forward): plain torch from the state dict, float64.

- :func:`run`: the forward (pre-LN GPT-2: LayerNorm ε 1e-5, causal softmax, GELU tanh), keeping
  each layer's residual input, per-head direct outputs ``z_S W_O[S]`` (no bias), attention
  output, MLP output and pattern.
- Sequences (:func:`repeated_distinct`): BOS (id 0), ``n`` tokens distinct within the half
  from ``1 … V``, the same ``n`` again; positions ``0 … 2n``.
- Scores per sequence on those sequences (queries as in ``rmtbase.probe.behaviour``'s
  definitions, written out here for this one layout): induction = mean over ``i = n+1 … 2n``
  of ``A[i, i−n+1]``; previous-token = mean over ``i = 2 … 2n`` of ``A[i, i−1]``;
  duplicate-token = mean ``A[i, i−n]`` over ``i = n+1 … 2n``; self = mean ``A[i, i]``,
  first-token = mean ``A[i, 0]`` over ``i = 1 … 2n``.
- Patched residual for a receiver in layer ``l`` and a set of sources (:func:`patched_input`):
  ``direct``: the clean ``resid[l]`` minus the sources' direct outputs; ``via_mlp``: the
  sources removed from their layers' attention outputs, the MLPs of the layers from the
  earliest source's to ``l − 1`` recomputed on the changed residual, every other attention
  output held at its clean value, and the receiver reads ``resid[l] + Σ_k (MLP'_k − MLP_k)``
  (the direct part kept, only the MLP-mediated change removed); ``total``: both.
- Effect (:func:`effect`): only the receiver's ``q``, ``k`` or ``v`` reads the patched residual
  (LayerNorm recomputed), the others the clean one; per sequence, q/k: the drop of the
  receiver's score (clean − patched); v: ``‖z' − z‖_F / ‖z‖_F`` of the head's ``A v`` over
  queries ``1 … 2n``; q/k without a statistic: the attention's total variation, the mean
  over queries ``1 … 2n`` of ``½ Σ_j |A'[i, j] − A[i, j]|``. Mean and se (sd ddof 1 / √N)
  over sequences.

Counterfactuals (the contract of the search's ``ablation``; zero is the case above): a
removed source S's direct output ``o_S`` ``(N, T, d)`` is replaced by ``o_cf``
(:func:`counterfactuals`), so the residual changes by ``−(o_S − o_cf)``:

- ``zero``: ``o_cf = 0``;
- ``mean``: ``o_cf[n, t] = (1/N) Σ_n' o_S[n', t]``, per position over the run's sequences;
- ``resample``: ``P = min(RESAMPLE_PAIRINGS, N − 1)`` pairings, pairing ``p = 1 … P`` takes
  ``o_S[(n + p) mod N, t]``; a per-sequence effect is the mean over the pairings of the
  per-sequence effects (:func:`effect_cf`).

The direct, via-MLP and total patches take the counterfactual through ``cf``
(:func:`patched_input`); the joint patch is every earlier head at once.

Faithfulness (:func:`faithfulness`) of a circuit C for receiver R (layer ``l``) and input κ:
a forward from layer 0 in which every head of layers ``< l`` not in C has its output replaced
by ``o_cf`` (layer ``j``'s attention output ``clean_j − Σ_{S ∉ C} (o_S − o_cf,S)``), the MLPs
recomputed on the changed residual, attention outputs otherwise clean (:func:`kept_input`); R's
κ input reads the residual reached at ``l``. q/k: ``f = mean(score_C) / mean(score)``, se by
the delta method ``sd(score_C − f score) / √N / |mean(score)|``; v: ``f = 1 − mean(change_C)``,
se ``sd(change_C) / √N``. ``faithfulness_empty``: C = ∅; C = every earlier head gives 1.
:func:`idle`: a member whose removal changes f by less than se(C).

Output level (:func:`repeat_loss`, :func:`loss_with`): the next-token cross-entropy at the
positions whose next token is a repeat (``i = n … 2n − 1``; from ``n + 1`` on request: those a
copy predicts), mean over them per sequence,
of a full forward in which given heads' outputs are replaced: by their counterfactual
(:func:`loss_receivers_ablated`) or by the receiver's output with its circuit's edges ablated
(:func:`loss_circuit_ablated`; the patched output computed from the clean run).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import torch

KINDS = ("q", "k", "v")
PATHS = ("direct", "via_mlp")
#: Label threshold (mean attention) and the specific labels in tie order.
THRESHOLD = 0.4
SPECIFIC = (("induction", "induction"), ("previous-token", "prev_token"),
            ("duplicate-token", "duplicate_token"), ("self/local", "self"))
#: The rule a single effect must pass to be called real: ≥ 3 se and ≥ 10 % of the
#: receiver's score (q, k) or ≥ 0.1 (v's relative output change).
RULE_SE, RULE_FRACTION = 3.0, 0.10


def _ln(x, w, b):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5)


def _layer(sd, i):
    p = f"transformer.h.{i}."
    return {k[len(p):]: v for k, v in sd.items() if k.startswith(p)}


def _qkv(w, x, n_head):
    """(q, k, v) each (B, H, T, d_h) of Conv1D ``c_attn`` (x @ W + b) on LayerNorm'd x."""
    y = x @ w["attn.c_attn.weight"] + w["attn.c_attn.bias"]
    b, t, d3 = y.shape
    d = d3 // 3
    return [z.reshape(b, t, n_head, d // n_head).transpose(1, 2) for z in y.split(d, dim=-1)]


def _pattern(q, k):
    """Causal softmax attention (B, H, T, T) of queries q and keys k."""
    t = q.shape[-2]
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    s = s.masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(), float("-inf"))
    return s.softmax(-1)


def _mlp(w, x):
    h = _ln(x, w["ln_2.weight"], w["ln_2.bias"]) @ w["mlp.c_fc.weight"] + w["mlp.c_fc.bias"]
    return torch.nn.functional.gelu(h, approximate="tanh") @ w["mlp.c_proj.weight"] + \
        w["mlp.c_proj.bias"]


def n_layers(sd) -> int:
    return 1 + max(int(k.split(".")[2]) for k in sd if k.startswith("transformer.h."))


def run(sd, ids, pos, n_head, replace: dict | None = None) -> dict:
    """The forward (module docstring): ``resid`` (L + 1 residuals: layer l's input, then the
    final one), ``heads`` (B, H, T, d) per layer, ``attn`` (heads summed + bias), ``mlp``,
    ``pats`` (B, H, T, T), ``z`` (B, H, T, d_h), ``logits``. ``replace`` {(layer, head): (B,
    T, d)}: those heads' outputs set to the given tensors, every later layer recomputed."""
    x = sd["transformer.wte.weight"][ids] + sd["transformer.wpe.weight"][pos]
    out = {k: [] for k in ("resid", "heads", "attn", "mlp", "pats", "z")}
    for i in range(n_layers(sd)):
        w = _layer(sd, i)
        out["resid"].append(x)
        q, k, v = _qkv(w, _ln(x, w["ln_1.weight"], w["ln_1.bias"]), n_head)
        a = _pattern(q, k)
        z = a @ v
        wo = w["attn.c_proj.weight"].reshape(n_head, z.shape[-1], -1)  # Conv1D rows per head
        heads = torch.einsum("bhtk,hkd->bhtd", z, wo)
        for (li, hi), o in (replace or {}).items():
            if li == i:
                heads = torch.cat([heads[:, :hi], o[:, None], heads[:, hi + 1:]], 1)
        attn = heads.sum(1) + w["attn.c_proj.bias"]
        m = _mlp(w, x + attn)
        x = x + attn + m
        for key, val in zip(("heads", "attn", "mlp", "pats", "z"), (heads, attn, m, a, z),
                            strict=True):
            out[key].append(val)
    out["resid"].append(x)
    xf = _ln(x, sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"])
    out["logits"] = xf @ sd["lm_head.weight"].T
    return out


def forward(sd, ids, pos, n_head):
    """(logits, layer inputs, per-head direct outputs, patterns) of :func:`run`."""
    r = run(sd, ids, pos, n_head)
    return r["logits"], r["resid"][:-1], r["heads"], r["pats"]


def repeated_distinct(vocab: int, length: int, n_seq: int, seed: int):
    """(ids, pos) of ``n_seq`` sequences BOS (0) + ``length`` tokens distinct within the half,
    drawn from ``1 … vocab``, repeated once; positions ``0 … 2 length``."""
    assert length <= vocab, (length, vocab)
    rng = np.random.default_rng(seed)
    seg = np.argsort(rng.random((n_seq, vocab)), axis=1)[:, :length] + 1
    ids = np.concatenate([np.zeros((n_seq, 1), np.int64), seg, seg], axis=1).astype(np.int64)
    pos = np.broadcast_to(np.arange(ids.shape[1]), ids.shape).copy()
    return torch.from_numpy(ids), torch.from_numpy(pos)


def scores(a, n: int) -> dict:
    """Per-sequence statistics {name: (B, H)} of patterns ``a`` (B, H, T, T), T = 2n + 1
    (module docstring)."""
    i2 = torch.arange(n + 1, 2 * n + 1)
    ip = torch.arange(2, 2 * n + 1)
    iq = torch.arange(1, 2 * n + 1)
    return {"induction": a[:, :, i2, i2 - n + 1].mean(-1),
            "prev_token": a[:, :, ip, ip - 1].mean(-1),
            "duplicate_token": a[:, :, i2, i2 - n].mean(-1),
            "self": a[:, :, iq, iq].mean(-1),
            "first_token": a[:, :, iq, 0].mean(-1)}


def label(stats_by_length: dict) -> tuple:
    """(label, statistic, length, score) of one head from {length: {statistic: mean}}: the
    (specific label, length) pair with the largest score ≥ :data:`THRESHOLD`, ties to the
    earlier label and the shorter length; else ``first-token`` at its best length when it
    reaches the threshold; else ``none``."""
    best = ("none", "", None, float("nan"))
    for name, stat in SPECIFIC:
        for n in sorted(stats_by_length):
            s = stats_by_length[n][stat]
            if s >= THRESHOLD and not s <= best[3]:
                best = (name, stat, n, s)
    if best[0] != "none":
        return best
    for n in sorted(stats_by_length):
        s = stats_by_length[n]["first_token"]
        if s >= THRESHOLD and not s <= best[3]:
            best = ("first-token", "first_token", n, s)
    return best


def _delta(r: dict, cf, m: int, h: int):
    """``o_S − o_cf,S`` of head (m, h): its output for ``cf`` None (zero), else less
    ``cf[m][:, h]`` (one entry of :func:`counterfactuals`)."""
    return r["heads"][m][:, h] if cf is None else r["heads"][m][:, h] - cf[m][:, h]


def patched_input(sd, r: dict, layer: int, sources, path: str, cf=None):
    """The receiver layer's patched residual input (module docstring) for ``sources``
    [(layer, head), …] all before ``layer``, ``path`` one of direct, via_mlp, total; ``cf``:
    the counterfactual outputs of one pairing (:func:`counterfactuals`), None for zero."""
    clean = r["resid"][layer]
    if path == "direct":
        return clean - sum(_delta(r, cf, m, h) for m, h in sources)
    first = min(m for m, _ in sources)
    x = r["resid"][first]
    dmlp = torch.zeros_like(clean)
    for k in range(first, layer):
        mid = x + r["attn"][k] - sum((_delta(r, cf, m, h) for m, h in sources if m == k),
                                     torch.zeros_like(clean))
        m_new = _mlp(_layer(sd, k), mid)
        dmlp = dmlp + (m_new - r["mlp"][k])
        x = mid + m_new
    if path == "via_mlp":
        return clean + dmlp
    assert path == "total", path
    return x


def effect(sd, r: dict, receiver, x_patched, kinds, statistic: str | None, n: int,
           n_head: int):
    """(B,) per-sequence effect on ``receiver`` (layer, head) when its ``kinds`` inputs read
    ``x_patched`` (module docstring): the drop of ``statistic`` for q/k (its total variation
    for ``statistic`` None), the relative output change for ``kinds == ("v",)``."""
    lr, hr = receiver
    w = _layer(sd, lr)
    sl = slice(hr, hr + 1)
    clean = [t[:, sl] for t in _qkv(w, _ln(r["resid"][lr], w["ln_1.weight"], w["ln_1.bias"]),
                                    n_head)]
    new = [t[:, sl] for t in _qkv(w, _ln(x_patched, w["ln_1.weight"], w["ln_1.bias"]), n_head)]
    q, k, v = (new[j] if name in kinds else clean[j] for j, name in enumerate(KINDS))
    if tuple(kinds) == ("v",):
        a = _pattern(clean[0], clean[1])
        z0, z1 = (a @ clean[2])[:, 0, 1:], (a @ v)[:, 0, 1:]
        return (z1 - z0).pow(2).sum((-1, -2)).sqrt() / z0.pow(2).sum((-1, -2)).sqrt()
    a0, a1 = _pattern(clean[0], clean[1]), _pattern(q, k)
    if statistic is None:  # total variation over queries 1 … T − 1
        return 0.5 * (a1 - a0)[:, 0, 1:].abs().sum(-1).mean(-1)
    return scores(a0, n)[statistic][:, 0] - scores(a1, n)[statistic][:, 0]


ABLATIONS = ("zero", "mean", "resample")
#: Resample pairings (fewer when there are fewer other sequences).
RESAMPLE_PAIRINGS = 4


def pairings(n_seq: int, ablation: str) -> int:
    """Patches an effect under ``ablation`` averages: ``min(RESAMPLE_PAIRINGS, N − 1)`` for
    resample, else 1."""
    return max(1, min(RESAMPLE_PAIRINGS, n_seq - 1)) if ablation == "resample" else 1


def tool_sequences(n: int) -> int:
    """The sequences the tool draws at repeat length ``n``, as docs/path-patching.md states
    them: ``max(16, ⌈200 / n⌉)`` (checked against the tool in tests/test_circuits_zoo.py)."""
    return max(16, -(-200 // int(n)))


def leave_one_out(h, pool=None):
    """Each sequence's mean over the other sequences of its pool (consecutive groups of
    ``pool``; all sequences for None): the mean counterfactual drawn from ``pool``
    sequences, as the tool draws it, on as many sequences as the truth runs."""
    n = h.shape[0]
    pool = n if pool is None else int(pool)
    out = torch.empty_like(h)
    for lo in range(0, n, pool):
        g = h[lo:lo + pool]
        out[lo:lo + pool] = (g.sum(0, keepdim=True) - g) / (g.shape[0] - 1)
    return out


def counterfactuals(r: dict, ablation: str, pool=None) -> list:
    """One entry per pairing, each the per-layer counterfactual head outputs ``o_cf`` (B, H,
    T, d) of the run ``r`` (module docstring): ``[None]`` for zero (the patches then remove
    the outputs), ``[mean over the other sequences at each position]`` for mean, ``P`` entries
    ``o[(n + p) mod N]`` (p = 1 … P) for resample."""
    assert ablation in ABLATIONS, ablation
    if ablation == "zero":
        return [None]
    if ablation == "mean":
        # leave-one-out: each sequence's own output is not part of what replaces it
        return [[leave_one_out(h, pool) for h in r["heads"]]]
    n = r["heads"][0].shape[0]
    return [[torch.roll(h, shifts=-p, dims=0) for h in r["heads"]]
            for p in range(1, pairings(n, ablation) + 1)]


def _cfs(r: dict, cfs):
    return counterfactuals(r, cfs) if isinstance(cfs, str) else cfs


def effect_over(sd, r: dict, receiver, xs, kinds, statistic, n: int, n_head: int):
    """(B,) the mean over the pairings' patched residuals ``xs`` of :func:`effect`."""
    e = [effect(sd, r, receiver, x, kinds, statistic, n, n_head) for x in xs]
    return e[0] if len(e) == 1 else torch.stack(e).mean(0)


def effect_cf(sd, r: dict, receiver, sources, path: str, kinds, statistic, n: int,
              n_head: int, cfs="zero"):
    """(B,) per-sequence effect on ``receiver`` of replacing ``sources`` by their
    counterfactual along ``path`` (direct, via_mlp, total): the mean over the pairings of
    :func:`effect`; ``cfs``: an ablation name or :func:`counterfactuals`' list."""
    xs = [patched_input(sd, r, receiver[0], sources, path, cf) for cf in _cfs(r, cfs)]
    return effect_over(sd, r, receiver, xs, kinds, statistic, n, n_head)


def kept_input(sd, r: dict, layer: int, keep, cf=None):
    """The residual entering ``layer`` when every head of layers ``< layer`` not in ``keep``
    has its output replaced by ``cf`` (None: zero), the MLPs recomputed, the attention outputs
    otherwise clean (module docstring)."""
    keep = set(keep)
    x = r["resid"][0]
    for k in range(layer):
        out = [h for h in range(r["heads"][k].shape[1]) if (k, h) not in keep]
        mid = x + r["attn"][k] - sum((_delta(r, cf, k, h) for h in out),
                                     torch.zeros_like(x))
        x = mid + _mlp(_layer(sd, k), mid)
    return x


def faithfulness(sd, r: dict, receiver, kind: str, statistic, n: int, n_head: int, circuit,
                 cfs="zero") -> tuple[float, float]:
    """(faithfulness, se) of ``circuit`` [(layer, head), …] for ``receiver``'s ``kind`` input
    (module docstring; ``statistic`` for q/k)."""
    cfs = _cfs(r, cfs)
    xs = [kept_input(sd, r, receiver[0], circuit, cf) for cf in cfs]
    d = effect_over(sd, r, receiver, xs, (kind,), statistic, n, n_head).numpy()
    nn = d.size
    if kind == "v":
        return 1.0 - float(d.mean()), float(d.std(ddof=1) / np.sqrt(nn))
    base = scores(r["pats"][receiver[0]], n)[statistic][:, receiver[1]].numpy()
    kept = base - d
    f = float(kept.mean() / base.mean())
    return f, float((kept - f * base).std(ddof=1) / np.sqrt(nn) / abs(base.mean()))


def idle(sd, r: dict, receiver, kind: str, statistic, n: int, n_head: int, circuit,
         cfs="zero") -> dict:
    """{member: bool} of ``circuit``: idle when removing it from the circuit changes the
    faithfulness by less than the circuit's se."""
    cfs = _cfs(r, cfs)
    f, se = faithfulness(sd, r, receiver, kind, statistic, n, n_head, circuit, cfs)
    return {c: abs(f - faithfulness(sd, r, receiver, kind, statistic, n, n_head,
                                    [s for s in circuit if s != c], cfs)[0]) < se
            for c in circuit}


def loss_with(sd, ids, pos, n_head: int, replace: dict | None = None):
    """Logits of :func:`run` with ``replace`` {(layer, head): (B, T, d)}."""
    return run(sd, ids, pos, n_head, replace)["logits"]


def repeat_loss(logits, ids, n: int, first: int | None = None):
    """(B,) per-sequence mean next-token cross-entropy at positions ``first … 2n − 1``
    (default ``n``: every position whose next token is a repeat; ``n + 1``: those whose next
    token a copy predicts), for sequences BOS + ``n`` tokens + the same ``n``."""
    i = torch.arange(n if first is None else first, 2 * n)
    lp = torch.log_softmax(logits[:, i], -1)
    return -lp.gather(-1, ids[:, i + 1, None])[..., 0].mean(-1)


def loss_receivers_ablated(sd, ids, pos, n_head: int, n: int, receivers, ablation: str,
                           first: int | None = None):
    """(B,) :func:`repeat_loss` with every receiver's output set to its counterfactual (its
    clean run's output replaced as :func:`counterfactuals` says) in one full forward, the mean
    over the pairings."""
    r = run(sd, ids, pos, n_head)
    out = []
    for cf in counterfactuals(r, ablation):
        rep = {(li, hi): (torch.zeros_like(r["heads"][li][:, hi]) if cf is None
                          else cf[li][:, hi]) for li, hi in receivers}
        out.append(repeat_loss(loss_with(sd, ids, pos, n_head, rep), ids, n, first))
    return torch.stack(out).mean(0)


def patched_output(sd, r: dict, receiver, inputs: dict, n_head: int):
    """(B, T, d) receiver's direct output ``z' W_O`` when its inputs ``inputs`` {kind:
    residual} read the given residuals (LayerNorm recomputed), the others the clean one."""
    lr, hr = receiver
    w = _layer(sd, lr)
    sl = slice(hr, hr + 1)
    qkv = []
    for j, kind in enumerate(KINDS):
        x = inputs.get(kind, r["resid"][lr])
        qkv.append(_qkv(w, _ln(x, w["ln_1.weight"], w["ln_1.bias"]), n_head)[j][:, sl])
    z = _pattern(qkv[0], qkv[1]) @ qkv[2]
    dh = z.shape[-1]
    return z[:, 0] @ w["attn.c_proj.weight"][hr * dh:(hr + 1) * dh]


def circuit_input(sd, r: dict, layer: int, edges, cf=None):
    """The residual a receiver's input reads with ``edges`` [(source, path), …] ablated, path
    direct, via_mlp or total: the ``total`` sources' patch (:func:`patched_input`), less the
    direct sources' deltas, plus the via-MLP sources' joint MLP change."""
    clean = r["resid"][layer]
    by = {p: [s for s, q in edges if q == p] for p in PATHS + ("total",)}
    x = patched_input(sd, r, layer, by["total"], "total", cf) if by["total"] else clean
    if by["direct"]:
        x = x + (patched_input(sd, r, layer, by["direct"], "direct", cf) - clean)
    if by["via_mlp"]:
        x = x + (patched_input(sd, r, layer, by["via_mlp"], "via_mlp", cf) - clean)
    return x


def loss_circuit_ablated(sd, ids, pos, n_head: int, n: int, circuits: dict, ablation: str,
                         first: int | None = None):
    """(B,) :func:`repeat_loss` with each receiver's output replaced by its output when its
    circuit's edges are ablated (``circuits`` {receiver: {kind: [(source, path), …]}};
    :func:`circuit_input`, the patched output computed on the clean run) in one full forward,
    the mean over the pairings."""
    r = run(sd, ids, pos, n_head)
    out = []
    for cf in counterfactuals(r, ablation):
        rep = {rec: patched_output(sd, r, rec, {k: circuit_input(sd, r, rec[0], e, cf)
                                                for k, e in kinds.items() if e}, n_head)
               for rec, kinds in circuits.items()}
        out.append(repeat_loss(loss_with(sd, ids, pos, n_head, rep), ids, n, first))
    return torch.stack(out).mean(0)


def effect_se(sd, r: dict, receiver, sources, path: str, kind: str, statistic, n: int,
              n_head: int, ablation: str) -> float:
    """The se the tool reports for :func:`effect_cf` under ``ablation``: ``sd / √N`` of the
    per-sequence effects, except under mean for q or k with a statistic: the influence-function
    se ``sd(e_n − ⟨ḡ, Δ_n⟩) / √(N − 1)``, ``ḡ`` the mean over sequences of the statistic's
    gradient (autograd, float64) at the clean residual entering the receiver's layer, ``Δ_n``
    the residual change of the direct patch."""
    e = effect_cf(sd, r, receiver, sources, path, (kind,), statistic, n, n_head, ablation)
    if ablation != "mean" or kind == "v" or statistic is None or path != "direct":
        return mean_se(e)[1]
    lr, hr = receiver
    w = _layer(sd, lr)
    x = r["resid"][lr].detach().clone().requires_grad_(True)
    with torch.enable_grad():
        clean = [t[:, hr:hr + 1].detach() for t in
                 _qkv(w, _ln(r["resid"][lr], w["ln_1.weight"], w["ln_1.bias"]), n_head)]
        new = [t[:, hr:hr + 1] for t in _qkv(w, _ln(x, w["ln_1.weight"], w["ln_1.bias"]),
                                                n_head)]
        q, k = (new[0], clean[1]) if kind == "q" else (clean[0], new[1])
        (g,) = torch.autograd.grad(scores(_pattern(q, k), n)[statistic][:, 0].sum(), x)
    (cf,) = counterfactuals(r, "mean")
    delta = sum(_delta(r, cf, m, h) for m, h in sources)
    psi = e.detach().double() - (g.mean(0) * delta).sum((-1, -2))
    return float(psi.std(correction=1) / math.sqrt(psi.numel() - 1))


def mean_se(d) -> tuple[float, float]:
    d = np.asarray(d, dtype=np.float64)
    return float(d.mean()), float(d.std(ddof=1) / np.sqrt(d.size))


def passes(eff: float, se: float, base: float | None) -> bool:
    """:data:`RULE_SE`, :data:`RULE_FRACTION` (``base`` None: v's absolute 0.1)."""
    floor = RULE_FRACTION * (1.0 if base is None else base)
    return eff > 0 and eff >= RULE_SE * se and eff >= floor


def load(folder):
    """(state dict float64 with ``lm_head.weight``, config dict) of a GPT-2 folder (read by
    safetensors; a tied head reads ``wte``)."""
    from safetensors.torch import load_file

    folder = Path(folder)
    sd = {k: v.double() for k, v in load_file(folder / "model.safetensors").items()}
    sd = {(k if k.startswith(("transformer.", "lm_head.")) else f"transformer.{k}"): v
          for k, v in sd.items()}
    sd.setdefault("lm_head.weight", sd["transformer.wte.weight"])
    return sd, json.loads((folder / "config.json").read_text())


def default_lengths(cfg: dict, content_vocab: int) -> list[int]:
    """Repeat lengths 5, 10, 20, 50 up to the longest that fits (2n + 1 positions, n distinct
    content tokens), that longest one added when below 50 (the search's ``"auto"``)."""
    top = min(content_vocab, (cfg["n_positions"] - 1) // 2)
    out = [n for n in (5, 10, 20, 50) if n <= top]
    return out + [top] if top < 50 and (not out or out[-1] < top) else out


def head_labels(sd, cfg, lengths, n_seq=128, seed=0) -> dict:
    """{(layer, head): {"stats": {length: {statistic: mean}}, "label", "statistic",
    "length", "score"}} of every head."""
    n_head, v = cfg["n_head"], cfg["vocab_size"] - 1
    out = {}
    with torch.no_grad():
        per = {}
        for n in lengths:
            ids, pos = repeated_distinct(v, n, n_seq, seed)
            r = run(sd, ids, pos, n_head)
            per[n] = [{k: s.mean(0).numpy() for k, s in scores(a, n).items()} for a in r["pats"]]
    for li in range(n_layers(sd)):
        for hi in range(n_head):
            st = {n: {k: float(per[n][li][k][hi]) for k in per[n][li]} for n in lengths}
            lab, stat, ln, sc = label(st)
            out[(li, hi)] = {"stats": st, "label": lab, "statistic": stat, "length": ln,
                             "score": sc}
    return out


def receiver_table(sd, cfg, receiver, statistic: str, n: int, n_seq=128, seed=0,
                   ablation: str = "zero") -> dict:
    """Every earlier source's effect on ``receiver`` at repeat length ``n`` under
    ``ablation`` (:data:`ABLATIONS`): {"base": (mean, se) of its statistic, "single": {(kind,
    path, source): (effect, se)}, "joint": {(kind, path): (effect, se)} of all earlier heads
    together (path also ``total``)}."""
    n_head, v = cfg["n_head"], cfg["vocab_size"] - 1
    lr = receiver[0]
    srcs = [(m, h) for m in range(lr) for h in range(n_head)]
    # the mean over as many other sequences as the tool draws at n (a nonlinear statistic's
    # mean-ablation effect depends on it: E|u - mean of the others|^2 = s^2 N/(N - 1))
    pool = tool_sequences(n) if ablation == "mean" else None
    n_seq = n_seq if pool is None else -(-n_seq // pool) * pool
    ids, pos = repeated_distinct(v, n, n_seq, seed)
    out = {"single": {}, "joint": {}}
    with torch.no_grad():
        r = run(sd, ids, pos, n_head)
        cfs = counterfactuals(r, ablation, pool)
        out["base"] = mean_se(scores(r["pats"][lr], n)[statistic][:, receiver[1]])
        for path in PATHS + ("total",):
            sets = [[s] for s in srcs] if path != "total" else []
            for src in sets + [srcs]:
                xs = [patched_input(sd, r, lr, src, path, cf) for cf in cfs]
                for kind in KINDS:
                    e = mean_se(effect_over(sd, r, receiver, xs, (kind,), statistic, n,
                                            n_head))
                    if len(src) == 1:
                        out["single"][(kind, path, src[0])] = e
                    else:
                        out["joint"][(kind, path)] = e
    return out


def truth(folder, lengths=None, n_seq=128, seed=0,
          receivers_labels=tuple(lab for lab, _ in SPECIFIC), ablation: str = "zero"):
    """The truth table of a trained folder: labels of every head (:func:`head_labels`) and,
    per receiver after layer 0 whose label is in ``receivers_labels`` (default: the specific
    labels), :func:`receiver_table` under ``ablation`` at its label length (other sequences
    than the labels': seed + 1)."""
    sd, cfg = load(folder)
    v = cfg["vocab_size"] - 1
    lengths = default_lengths(cfg, v) if lengths is None else list(lengths)
    labels = head_labels(sd, cfg, lengths, n_seq, seed)
    recs = {}
    for (li, hi), lab in labels.items():
        if li >= 1 and lab["label"] in receivers_labels:
            recs[(li, hi)] = receiver_table(sd, cfg, (li, hi), lab["statistic"], lab["length"],
                                            n_seq, seed + 1, ablation)
    return {"labels": labels, "receivers": recs, "lengths": lengths}


def name(lh) -> str:
    return f"L{lh[0]}H{lh[1]}"


def real_sources(rec_table: dict) -> list[tuple]:
    """[(kind, path, source, effect, se), …] of the single effects that pass the rule
    (:func:`passes`; q/k against the receiver's base score), largest first."""
    base = rec_table["base"][0]
    out = [(kind, path, src, e, se) for (kind, path, src), (e, se)
           in rec_table["single"].items()
           if passes(e, se, None if kind == "v" else base)]
    return sorted(out, key=lambda t: -t[3])


def to_json(t: dict) -> dict:
    """The truth as JSON-able dicts with head names."""
    labels = {name(k): {"label": v["label"], "length": v["length"],
                        "score": None if v["score"] != v["score"] else round(v["score"], 4),
                        "by_length": {str(n): {s: round(x, 4) for s, x in d.items()}
                                      for n, d in v["stats"].items()}}
              for k, v in t["labels"].items()}
    recs = {}
    for rec, tab in t["receivers"].items():
        lab = t["labels"][rec]
        recs[name(rec)] = {
            "label": lab["label"], "length": lab["length"],
            "base": [round(x, 4) for x in tab["base"]],
            "single": [{"kind": k, "path": p, "from": name(s), "effect": round(e, 4),
                        "se": round(se, 4)} for (k, p, s), (e, se) in tab["single"].items()],
            "joint": [{"kind": k, "path": p, "effect": round(e, 4), "se": round(se, 4)}
                      for (k, p), (e, se) in tab["joint"].items()],
            "real": [{"kind": k, "path": p, "from": name(s), "effect": round(e, 4),
                      "se": round(se, 4)} for k, p, s, e, se in real_sources(tab)]}
    return {"lengths": t["lengths"], "labels": labels, "receivers": recs}
