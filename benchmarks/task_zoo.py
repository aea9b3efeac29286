"""Task circuits on a trained induction model beside auto-circuit's EAP, EAP-IG and ACDC, every
ranking scored by one evaluator (auto-circuit's own) on held-out prompts, one run.

Model: :func:`rmtbase.studies._mlp_induction.trained_folder` ``("3x4d64", 0)`` (a 3-layer,
4-head, d = 64 GPT-2 with MLPs trained on repeated segments; trained on first use, then cached;
262 edges). Tasks (:func:`zoo_tasks`), from its training distribution: ``[BOS]``, distinct
filler tokens, a segment ``A`` (length 2-5), a gap (0-3 tokens), then ``A[:j+1]``; the answer
is ``A[j+1]`` (the token after the current token's earlier occurrence), ``wrong`` a token in
neither prompt. ``answer``: the corrupted prompt replaces the first copy's ``A[j+1]`` (the
answer's earlier occurrence) with a token not in the prompt; ``key``: it replaces the first
copy's ``A[j]`` (the token before it: the key path through the previous-token head). Metric:
logit difference (answer - wrong) at the last position. That layout is ``--half 0``; by default
(``--half 4``) the two corruptions are made on ``induction_task``'s prompts ``[BOS] A A[:3]``
(:func:`induction_layout_tasks`: a training chunk of 4 repeated without a gap). Prompts are
split into a fit half and a held-out half (a fixed permutation). ``--behaviour bigram``: a
second behaviour, the bigram lookup of the circuit zoo's ``markov3`` (:func:`bigram_tasks`).
``--seeds 0,1,…``: each seed's prompts and split, and rmtbase's area less each peer's per seed,
their mean ± se over the seeds (:func:`seed_differences`).
``--behaviour tracr``: auto-circuit's compiled ``reverse`` (77 edges) and ``xproportion`` (23),
compiled in the peers' venv (:data:`_TRACR_PEER_SCRIPT`), prompts as ``task_circuits.py
--tracr`` draws them (every 5-token sequence, a random corrupted twin), read at the last
position with auto-circuit's ``avg_diff`` / ``avg_val``; rmtbase ranks the TransformerLens
weights as a no-norm model (:func:`tracr_ranking`); a program whose ``m(E) − m(0)`` is within 3
se over prompts has no curve (``xproportion`` under resample).

Rankings, each from the fit half, each method in a fresh process (its process CPU and peak
RSS): rmtbase's (:func:`rmtbase_ranking`, swap in another algorithm there), and, in the peers'
venv (``--peers PYTHON``: auto-circuit 1.0.1 and TransformerLens, docs/performance.md's set;
rmtbase never imports them), auto-circuit's EAP (``mask_gradient_prune_scores``, logit
gradient at the clean run), EAP-IG (the same with ``--ig-samples`` mask samples) and ACDC
(``acdc_prune_scores``, its default τ grid and KL target, one ranking from the τ at which each
edge is first removed, ties kept as auto-circuit does) under resample ablation (the corrupted
prompt). The model is loaded into TransformerLens as auto-circuit's ``load_tl_model`` does
(fold_ln, centred writing weights and unembedding), its log-probs checked against
transformers'.

Evaluator (one process, auto-circuit's code): ``run_circuits`` (tree patching: the clean run
with every edge outside the top ``k`` given the corrupted run's sender output) and
``measure_answer_diff`` on the held-out half at every ``k = 0 … E``; a ranking with tied
scores is measured where the ties end (auto-circuit's rule). Per ranking: the curve of
normalised faithfulness ``f(k) = (m(k) - m(0)) / (m(E) - m(0))``, its area with
``x = log(1 + k) / log(1 + E)`` (trapezoids; rmtbase's and the issue's measure), auto-circuit's
own ``measurements_auc`` (log10 x from k = 1, the y at k = 0 subtracted) of the logit
difference and of its percentage of the full model's, and the smallest ``k`` with
``f ≥ 0.8``. auto-circuit's area starts at ``k = 1``, so a ranking whose top edges tie (ACDC's
never-removed ones) loses the stretch before its first realised count; the first area is the
one to compare. Also: rmtbase's own scorer against the evaluator on the rmtbase ranking.
``--best-subsets K``: instead, how far any ranking of rmtbase's top ``K`` edges could draw
(:func:`best_subsets`). ``--swaps K``: instead, whether one edge swapped in rmtbase's top ``K``
finds a better circuit of that size (:func:`best_swaps`).

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python \\
        benchmarks/task_zoo.py --peers /work/peers/bin/python [--prompts 64] [--json zoo.json]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from task_circuits import TL_READY, TRACR_MODEL, TRACR_PAIRS, tracr_weights  # noqa: E402

CONFIG, MODEL_SEED = "3x4d64", 0
TASKS = ("answer", "key")
PEER_METHODS = ("EAP", "EAP-IG", "ACDC", "SP")
#: Random orders a ranking with tied |scores| is scored in (each tie broken at random), and
#: their generator's seed.
TIE_ORDERS, TIE_SEED = 5, 12
TARGET = 0.8
#: The children's PYTHONHASHSEED. ACDC visits a layer's edges in the order of a Python set of
#: auto-circuit's frozen-dataclass edges, whose hash mixes strings (the hash seed) and ``None``
#: fields, and ``hash(None)`` is ``None``'s address before Python 3.12: under address-space
#: randomisation the order, and so ACDC's ranking, changes run to run whatever the seed. The
#: peers run with it off (``setarch -R``, :func:`_no_aslr`) where that works, and a run then
#: repeats; ``--acdc-orders N`` runs ACDC under the hash seeds ``0 … N − 1``, N visit orders.
HASH_SEED = 0


# --- the tasks ---------------------------------------------------------------------------------
def zoo_tasks(n: int, length: int, seed: int, vocab: int = 32) -> dict:
    """``{"answer": Task, "key": Task}`` on the same ``n`` clean prompts of ``length`` tokens
    (module docstring); content ids ``1 … vocab``, BOS 0; ``numpy.random.default_rng(seed)``."""
    from rmtbase.circuits.task.taskfile import Task

    rng = np.random.default_rng(seed)
    rows = {k: [] for k in ("clean", "answer", "key", "ans", "wrong")}
    for _ in range(n):
        while True:
            L = int(rng.integers(2, 6))
            g = int(rng.integers(0, 4))
            j = int(rng.integers(0, L - 1))
            p = length - 1 - L - g - (j + 1)
            if p >= 0:
                break
        toks = rng.permutation(vocab)[:p + L + g + 2] + 1
        fill, a, gap = toks[:p], toks[p:p + L], toks[p + L:p + L + g]
        r, w = toks[-2], toks[-1]
        clean = np.concatenate([[0], fill, a, gap, a[:j + 1]])
        first = 1 + p  # the first copy's A[0]
        ans_c, key_c = clean.copy(), clean.copy()
        ans_c[first + j + 1] = r
        key_c[first + j] = r
        rows["clean"].append(clean)
        rows["answer"].append(ans_c)
        rows["key"].append(key_c)
        rows["ans"].append(int(a[j + 1]))
        rows["wrong"].append(int(w))
    clean = np.asarray(rows["clean"], dtype=np.int64)
    ans, wrong = (np.asarray(rows[k], dtype=np.int64) for k in ("ans", "wrong"))
    src = f"task_zoo.zoo_tasks(n={n}, length={length}, seed={seed})"
    return {t: Task(clean, np.asarray(rows[t], dtype=np.int64), ans, wrong, name=t,
                    source=src) for t in TASKS}


def induction_layout_tasks(n: int, half: int, seed: int, prefix: int | None = None,
                           vocab: int = 32, replacement: str = "outside") -> dict:
    """The two corruptions on :func:`rmtbase.circuits.task.taskfile.induction_task`'s clean
    prompts (``[BOS] A A[:prefix]``, ``A`` of ``half`` distinct ids, answer ``A[prefix]``,
    wrong an id outside ``A``): ``answer`` replaces the first copy's ``A[prefix]``, ``key``
    its ``A[prefix − 1]``, both with the same id outside ``A`` and other than ``wrong``
    (``replacement="any"``: each any id but the replaced one and ``wrong``)."""
    from rmtbase.circuits.task.taskfile import Task, induction_task

    base = induction_task(n, half, vocab + 1, seed=seed, prefix=prefix)
    k = half - 1 if prefix is None else int(prefix)
    rng = np.random.default_rng([seed, 3])
    out = {t: base.clean.copy() for t in TASKS}
    for i in range(n):
        c, w = base.clean[i], int(base.wrong[i])
        if replacement == "outside":  # one token for both: the tasks differ only in where
            used = set(c.tolist()) | {w}
            r = int(rng.choice([x for x in range(1, vocab + 1) if x not in used]))
            out["answer"][i, 1 + k] = out["key"][i, k] = r
            continue
        for t, at in (("answer", 1 + k), ("key", k)):
            used = {int(c[at]), w}
            out[t][i, at] = int(rng.choice([x for x in range(1, vocab + 1) if x not in used]))
    src = f"task_zoo.induction_layout_tasks(n={n}, half={half}, seed={seed}, prefix={k})"
    return {t: Task(base.clean, out[t], base.answer, base.wrong, name=t, source=src)
            for t in TASKS}


def bigram_tasks(n: int, length: int, seed: int) -> dict:
    """``{"bigram": Task}``: the second behaviour, on the circuit zoo's ``markov3`` (trained
    on a Markov chain, :func:`rmtbase.studies._circuit_zoo.markov_batch`): ``n`` chains of
    ``length`` tokens (BOS first); the answer is the chain's most likely successor of the
    last token ``a``, the corrupted prompt ends in ``b`` (whose most likely successor
    differs) instead, and ``wrong`` is ``b``'s most likely successor. What carries it: the
    last position's token, through the MLPs and the direct path (no induction)."""
    from rmtbase.circuits.task.taskfile import Task
    from rmtbase.studies._circuit_zoo import RECIPES, markov_batch, markov_matrix

    z = RECIPES["markov3"]
    p = markov_matrix(z)
    best = 1 + p[:, 1:].argmax(1)
    rng = np.random.default_rng([seed, 11])
    clean = markov_batch(rng, n, z)[0][:, :length]
    corrupted = clean.copy()
    answer, wrong = best[clean[:, -1]], np.zeros(n, dtype=np.int64)
    for i in range(n):
        a = int(clean[i, -1])
        b = int(rng.choice([x for x in range(1, z.base.vocab + 1)
                            if x != a and best[x] != best[a]]))
        corrupted[i, -1], wrong[i] = b, best[b]
    src = f"task_zoo.bigram_tasks(n={n}, length={length}, seed={seed})"
    return {"bigram": Task(clean, corrupted, answer, wrong, name="bigram", source=src)}


def halves(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(fit, held-out) indices of ``n`` prompts: the halves of a fixed permutation."""
    perm = np.random.default_rng([seed, 7]).permutation(n)
    return perm[:n // 2], perm[n // 2:]


def split(task, seed: int):
    """(fit, held-out) halves of ``task`` (:func:`halves`)."""
    from rmtbase.circuits.task.taskfile import Task

    return tuple(Task(task.clean[idx], task.corrupted[idx], task.answer[idx], task.wrong[idx],
                      task.name, task.source) for idx in halves(task.n, seed))


# --- rmtbase's ranking -------------------------------------------------------------------------
def rmtbase_ranking(folder, task, prune_budget: int | None = None) -> dict:
    """``{rmtbase edge name: key}`` (larger = more important) of rmtbase's task search on
    ``task`` (the fit half, all of it: ``holdout=0``, the benchmark holds its own half out):
    ``res["ranking"]``. ``prune_budget``: the search's (None: its default; 0: the attribution
    ranking)."""
    from rmtbase.circuits.task.search import find_task_circuit

    kw = {} if prune_budget is None else {"prune_budget": prune_budget}
    res = find_task_circuit(str(folder), task, counterfactual="corrupted", holdout=0, **kw)
    names = res["tm"].graph.edge_names()
    key = np.asarray(res["ranking"], dtype=np.float64)
    return {n: float(k) for n, k in zip(names, key, strict=True)}


def best_subsets(folder, task, seed: int, top: int) -> dict:
    """On ``task``'s held-out half: rmtbase's prefix curve ``f(k)``, ``k = 0 … top`` (its
    ranking from the fit half), and for each ``k < top`` the most any ``k`` of its top ``top``
    edges hold (every subset measured, rmtbase's scorer: equal to the evaluator, module
    docstring); the areas over ``x ∈ [0, x(top)]`` of the prefix, of that envelope (no nested
    ranking of these edges draws more) and of the straight line to ``f(top)`` (what the
    evaluator draws for a ranking whose top ``top`` tie)."""
    from itertools import combinations

    from rmtbase.circuits.core.faithfulness import Scorer, top_k
    from rmtbase.circuits.core.runner import Runner
    from rmtbase.circuits.task.search import find_task_circuit

    fit, held = split(task, seed)
    res = find_task_circuit(str(folder), fit, counterfactual="corrupted", holdout=0)
    g = res["tm"].graph
    order = np.argsort(-np.asarray(res["ranking"]), kind="stable")
    sc = Scorer(Runner(res["tm"], held, counterfactual="corrupted"))
    prefix = sc.faithfulness(sc.means([top_k(order, k, g.n_edges) for k in range(top + 1)],
                                      "prefix"))
    best = [float(prefix[0])]
    for k in range(1, top):
        sets = [top_k(np.asarray(c), k, g.n_edges) for c in combinations(order[:top], k)]
        best.append(float(sc.faithfulness(sc.means(sets, f"every {k} of {top}")).max()))
    best.append(float(prefix[top]))
    x = np.log1p(np.arange(top + 1)) / np.log1p(g.n_edges)
    return {"task": task.name, "top": top, "edges": [g.edge_names()[e] for e in order[:top]],
            "prefix": prefix.tolist(), "best": best,
            "area_prefix": float(np.trapezoid(prefix, x)),
            "area_best": float(np.trapezoid(best, x)),
            "area_tied": float(x[top] * (prefix[0] + prefix[top]) / 2)}


def best_swaps(folder, task, seed: int, k: int, best: int = 5) -> dict:
    """Is rmtbase's top ``k`` a local optimum of pruning's objective? On ``task``'s fit half,
    every set of ``k`` edges one swap away from it (one edge out, one in: ``k (E − k)`` sets)
    scored by rmtbase's scorer; the ``best`` of them and the top ``k`` itself scored again on
    the held-out half."""
    from rmtbase.circuits.core.faithfulness import Scorer, top_k
    from rmtbase.circuits.core.runner import Runner
    from rmtbase.circuits.task.search import find_task_circuit

    fit, held = split(task, seed)
    res = find_task_circuit(str(folder), fit, counterfactual="corrupted", holdout=0)
    n = res["tm"].graph.n_edges
    base = top_k(np.argsort(-np.asarray(res["ranking"]), kind="stable"), k, n)
    sets = []
    for a in np.flatnonzero(base):
        for b in np.flatnonzero(~base):
            s = base.copy()
            s[[a, b]] = False, True
            sets.append(s)
    fs, hs = (Scorer(Runner(res["tm"], t, counterfactual="corrupted")) for t in (fit, held))
    f = fs.faithfulness(fs.means([base, *sets], f"{len(sets)} swaps"))
    top = np.argsort(-f[1:], kind="stable")[:best]
    h = hs.faithfulness(hs.means([base, *(sets[i] for i in top)], "held out"))
    return {"task": task.name, "k": k, "swaps": len(sets), "fit_top_k": float(f[0]),
            "fit_best_swaps": f[1:][top].tolist(), "held_top_k": float(h[0]),
            "held_best_swaps": h[1:].tolist()}


def _task_doc(folder, task) -> dict:
    return {"folder": str(folder), "clean": task.clean.tolist(),
            "corrupted": task.corrupted.tolist(), "answer": task.answer.tolist(),
            "wrong": task.wrong.tolist(), "name": task.name}


def _task_of(doc):
    from rmtbase.circuits.task.taskfile import Task

    return Task(*(np.asarray(doc[k], dtype=np.int64) for k in
                  ("clean", "corrupted", "answer", "wrong")), name=doc["name"])


def _child_rmtbase(task_path: str, out_path: str, prune_budget: str = "") -> int:
    """Run :func:`rmtbase_ranking` on the task file (this script's own JSON) in this process,
    writing its scores in auto-circuit's names, its CPU and this process's peak RSS."""
    from rmtbase.circuits.task.export import auto_circuit_name

    doc = json.loads(Path(task_path).read_text())
    c = time.process_time()
    key = rmtbase_ranking(doc["folder"], _task_of(doc),
                          int(prune_budget) if prune_budget else None)
    cpu = time.process_time() - c
    out = {"cpu_s": cpu, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
           "scores": {auto_circuit_name(n): v for n, v in key.items()}}
    Path(out_path).write_text(json.dumps(out))
    return 0


# --- the peers (auto-circuit 1.0.1) ---------------------------------------------------------------
#: One ranking in the peers' scripts (``method``, ``ig``, ``answer_fn``, ``model``, ``dl`` set):
#: ``ps`` auto-circuit's prune scores, ``out["cpu_s"]`` their CPU.
_PEER_RANK = r'''c0 = time.process_time()
if method == "ACDC":
    from auto_circuit.prune_algos.ACDC import acdc_prune_scores
    ps = acdc_prune_scores(model, dl, None)
elif method == "SP":  # subnetwork probing: a learned mask, auto-circuit's defaults
    import importlib  # auto-circuit 1.0.1 reads t.optim.adam.Adam; torch.optim drops the name
    t.optim.adam = importlib.import_module("torch.optim.adam")
    from auto_circuit.prune_algos.subnetwork_probing import subnetwork_probing_prune_scores
    t.manual_seed(0)
    ps = subnetwork_probing_prune_scores(model, dl, None)
else:
    from auto_circuit.prune_algos.mask_gradient import mask_gradient_prune_scores
    kw = {"mask_val": 0.0} if method == "EAP" else {"integrated_grad_samples": ig}
    ps = mask_gradient_prune_scores(model, dl, None, grad_function="logit",
                                    answer_function=answer_fn,
                                    ablation_type=AblationType.RESAMPLE,
                                    clean_corrupt="corrupt", **kw)
out["cpu_s"] = time.process_time() - c0
'''

#: Run by the peers' python. ``rank METHOD task.json out.json IG``: one method's scores on the
#: task (fit half); ``eval task.json rankings.json out.json``: every ranking scored on the task
#: (held-out half) at every edge count, and the TransformerLens model checked against
#: transformers'.
_PEER_SCRIPT = r'''
import json, resource, sys, time
import numpy as np
import torch as t
t.set_num_threads(1)
c_start = time.process_time()
import transformer_lens as tl
from transformer_lens.pretrained.weight_conversions import convert_gpt2_weights
from transformers import GPT2LMHeadModel
from auto_circuit.data import PromptDataLoader, PromptDataset
from auto_circuit.types import AblationType, PatchType
from auto_circuit.utils.graph_utils import patchable_model

mode = sys.argv[1]
args = sys.argv[2:]
task = json.loads(open(args[1] if mode == "rank" else args[0]).read())
hf = GPT2LMHeadModel.from_pretrained(task["folder"], attn_implementation="eager").eval()
c = hf.config
cfg = tl.HookedTransformerConfig(
    n_layers=c.n_layer, d_model=c.n_embd, n_ctx=c.n_positions, d_head=c.n_embd // c.n_head,
    n_heads=c.n_head, d_mlp=c.n_inner or 4 * c.n_embd, d_vocab=c.vocab_size,
    act_fn=c.activation_function, normalization_type="LN", eps=c.layer_norm_epsilon,
    original_architecture="GPT2LMHeadModel", positional_embedding_type="standard",
    default_prepend_bos=False, device="cpu")
model_tl = tl.HookedTransformer(cfg)
model_tl.load_and_process_state_dict(convert_gpt2_weights(hf, cfg), fold_ln=True,
                                     center_writing_weights=True, center_unembed=True)
''' + TL_READY.replace("{m}", "model_tl") + r'''clean = t.tensor(task["clean"])
corrupt = t.tensor(task["corrupted"])
ds = PromptDataset(clean, corrupt, [t.tensor([a]) for a in task["answer"]],
                   [t.tensor([w]) for w in task["wrong"]])
dl = PromptDataLoader(ds, seq_len=None, diverge_idx=0, batch_size=len(ds), shuffle=False)
model = patchable_model(model_tl, factorized=True, slice_output="last_seq",
                        separate_qkv=True, device=t.device("cpu"))
names = [e.name for e in model.edges]

def to_scores(ps):
    return {e.name: float(ps[e.dest.module_name][e.patch_idx]) for e in model.edges}

def from_scores(d):
    ps = model.new_prune_scores()
    for e in model.edges:
        ps[e.dest.module_name][e.patch_idx] = d[e.name]
    return ps

out = {"edges": len(names)}
if mode == "rank":
    method, ig, answer_fn = args[0], int(args[3]), "avg_diff"
''' + textwrap.indent(_PEER_RANK, "    ") + r'''
    out["scores"] = to_scores(ps)
else:
    from auto_circuit.metrics.area_under_curve import measurements_auc
    from auto_circuit.metrics.prune_metrics.answer_diff import measure_answer_diff
    from auto_circuit.metrics.prune_metrics.answer_diff_percent import answer_diff_percent
    from auto_circuit.prune import run_circuits
    rankings = json.loads(open(args[1]).read())
    with t.no_grad():
        ref = t.log_softmax(hf(clean).logits[:, -1].double(), -1)
        got = t.log_softmax(model_tl(clean)[:, -1].double(), -1)
    out["tl_vs_transformers_logprob_max_abs"] = float((ref - got).abs().max())
    E = len(names)
    out["rankings"] = {}
    for label, scores in rankings.items():
        c0 = time.process_time()
        outs = run_circuits(model, dl, list(range(E + 1)), from_scores(scores),
                            patch_type=PatchType.TREE_PATCH, ablation_type=AblationType.RESAMPLE)
        if 0 not in outs:  # edges tied at the top (ACDC's never-removed ones) are all kept
            empty = run_circuits(model, dl, [0], model.new_prune_scores(init_val=1.0),
                                 patch_type=PatchType.TREE_PATCH,
                                 ablation_type=AblationType.RESAMPLE)
            outs[0] = empty[0]
        diff = measure_answer_diff(model, dl, outs)
        pct = answer_diff_percent(model, dl, outs)[0]
        out["rankings"][label] = {
            "logit_diff": diff, "logit_diff_percent": pct,
            "ac_auc_logit_diff": measurements_auc(diff, log_x=True, log_y=False, y_min=None),
            "ac_auc_logit_diff_percent": measurements_auc(pct, log_x=True, log_y=False,
                                                          y_min=None),
            "eval_cpu_s": time.process_time() - c0}
out["process_cpu_s"] = time.process_time() - c_start
out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
open(args[2], "w").write(json.dumps(out))
'''


@functools.cache
def _no_aslr() -> tuple:
    """``setarch <machine> -R`` where it runs here (address-space randomisation off for the
    peers: :data:`HASH_SEED`), else nothing."""
    cmd = ["setarch", os.uname().machine, "-R"]
    try:
        ok = subprocess.run([*cmd, "true"], capture_output=True, check=False).returncode == 0
    except OSError:
        ok = False
    return tuple(cmd) if ok else ()


def _run(cmd: list, env_python_path: bool, hash_seed: int | None = None) -> float:
    """Run ``cmd`` (a fresh process; a peer's, ``env_python_path`` false, without address-space
    randomisation where :func:`_no_aslr` can, under ``hash_seed``); its process CPU seconds
    (user + system, children of it included)."""
    seed = os.environ.get("PYTHONHASHSEED", str(HASH_SEED)) if hash_seed is None else hash_seed
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
           "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1"),
           "PYTHONHASHSEED": str(seed)}
    if not env_python_path:
        env.pop("PYTHONPATH", None)
        cmd = [*_no_aslr(), *cmd]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd[:3])} failed:\n{done.stderr[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- the curve ---------------------------------------------------------------------------------
def curve_summary(points, n_edges: int) -> dict:
    """From auto-circuit's ``[(k, m(k))]`` (the realised edge counts): the normalised
    faithfulness, its area over ``x = log(1 + k) / log(1 + E)``, the smallest ``k`` reaching
    :data:`TARGET`."""
    pts = sorted((int(k), float(m)) for k, m in points)
    ks = np.array([k for k, _ in pts])
    m = np.array([v for _, v in pts])
    if ks[0] != 0 or ks[-1] != n_edges:
        raise SystemExit(f"the curve lacks k = 0 or k = E: {ks[:3]} … {ks[-3:]}")
    f = (m - m[0]) / (m[-1] - m[0])
    x = np.log1p(ks) / np.log1p(n_edges)
    area = float(np.sum(np.diff(x) * (f[1:] + f[:-1]) / 2))
    hit = np.flatnonzero(f >= TARGET)
    return {"area": area, "smallest_reaching_0.8": int(ks[hit[0]]) if hit.size else None,
            "points": len(ks), "k": ks.tolist(), "faithfulness": [round(v, 5) for v in f],
            "metric_full": float(m[-1]), "metric_empty": float(m[0])}


def common_areas(methods: dict, n_edges: int) -> None:
    """Add ``area_common_k`` to each method: its curve's area over only the ``k`` at which
    every method's curve was measured. A ranking with tied top scores (ACDC's never-removed
    edges) is measured only where its ties end, and the trapezoid from ``k = 0`` to there
    interpolates across sizes whose circuits were never run; on the common ``k`` every
    ranking is read at the same sizes, and ``dominates`` says where one's faithfulness is at
    least another's at every common ``k``."""
    common = set.intersection(*(set(r["curve"]["k"]) for r in methods.values()))
    ks = np.array(sorted(common))
    x = np.log1p(ks) / np.log1p(n_edges)
    f_at = {}
    for m, r in methods.items():
        f = dict(zip(r["curve"]["k"], r["curve"]["faithfulness"], strict=True))
        f_at[m] = np.array([f[int(k)] for k in ks])
        r["area_common_k"] = float(np.sum(np.diff(x) * (f_at[m][1:] + f_at[m][:-1]) / 2))
        r["common_k"] = len(ks)
    for m, r in methods.items():
        r["dominates"] = [o for o in methods if o != m and bool((f_at[m] >= f_at[o]).all())]


def scorer_check(folder, held, scores: dict, ac_points) -> float:
    """The largest ``|m_rmtbase(k) − m_auto-circuit(k)|`` over a log grid of ``k`` for one
    ranking of distinct scores: rmtbase's own scorer (:class:`rmtbase.circuits.task.
    faithfulness.Scorer`) against auto-circuit's evaluator on the same held-out prompts, so
    that the one evaluator is seen to measure what rmtbase's curve measures."""
    from rmtbase.circuits.core.faithfulness import Scorer, log_grid, top_k
    from rmtbase.circuits.core.runner import Runner
    from rmtbase.circuits.task.export import auto_circuit_name
    from rmtbase.circuits.task.search import load

    tm, t, _ = load(str(folder), held)
    n = tm.graph.n_edges
    key = np.array([scores[auto_circuit_name(e)] for e in tm.graph.edge_names()])
    order = np.argsort(-np.abs(key), kind="stable")
    ks = log_grid(n)
    mine = Scorer(Runner(tm, t)).means([top_k(order, int(k), n) for k in ks])
    theirs = dict((int(k), float(m)) for k, m in ac_points)
    return float(max(abs(a - theirs[int(k)]) for k, a in zip(ks, mine, strict=True)))


def run_task(args, folder, task, tmp: Path) -> dict:
    """Every ranking of one task (fit half) and their evaluation (held-out half)."""
    fit, held = split(task, args.seed)
    fit_p, held_p = tmp / f"{task.name}_fit.json", tmp / f"{task.name}_held.json"
    fit_p.write_text(json.dumps(_task_doc(folder, fit)))
    held_p.write_text(json.dumps(_task_doc(folder, held)))
    script = tmp / "peer.py"
    script.write_text(_PEER_SCRIPT)
    methods: dict = {}
    rankings: dict = {}
    out_p = tmp / f"{task.name}_rmtbase.json"
    _log(f"{task.name}: rmtbase")
    budget = "" if args.prune_budget is None else str(args.prune_budget)
    proc = _run([sys.executable, __file__, "--child-rmtbase", str(fit_p), str(out_p), budget],
                True)
    got = json.loads(out_p.read_text())
    rankings["rmtbase"] = got.pop("scores")
    methods["rmtbase"] = {**got, "process_cpu_s": proc}
    if args.peers:
        for m in args.methods.split(","):
            for v in range(args.acdc_orders if m == "ACDC" else 1):
                label = m if v == 0 else f"{m}@{v}"
                _log(f"{task.name}: {label}")
                out_p = tmp / f"{task.name}_{label}.json"
                proc = _run([args.peers, str(script), "rank", m, str(fit_p), str(out_p),
                             str(args.ig_samples)], False, hash_seed=v if v else None)
                got = json.loads(out_p.read_text())
                rankings[label] = got.pop("scores")
                methods.setdefault(m, {"cpu_s": got["cpu_s"], "peak_rss_mb": got["peak_rss_mb"],
                                       "process_cpu_s": proc})
        rk_p, ev_p = tmp / f"{task.name}_rankings.json", tmp / f"{task.name}_eval.json"
        rk_p.write_text(json.dumps({**rankings, **tie_orders(rankings)}))
        _log(f"{task.name}: evaluation")
        proc = _run([args.peers, str(script), "eval", str(held_p), str(rk_p), str(ev_p)], False)
        ev = json.loads(ev_p.read_text())
        if any(sorted(rankings["rmtbase"]) != sorted(v) for v in rankings.values()):
            raise SystemExit("rmtbase's and auto-circuit's edges differ")
        for m in methods:
            row = ev["rankings"][m]
            cur = curve_summary(row["logit_diff"], ev["edges"])
            vals = np.abs(np.array(list(rankings[m].values())))
            methods[m].update({
                "top_tie": int((vals == vals.max()).sum()),
                "tied_edges": int(vals.size - np.unique(vals).size),
                "area_tie_joined": cur["area"],
                "smallest_tie_joined": cur["smallest_reaching_0.8"],
                "ac_auc_logit_diff": row["ac_auc_logit_diff"],
                "ac_auc_logit_diff_percent": row["ac_auc_logit_diff_percent"],
                "curve_tie_joined": cur,
                **broken_ties(m, ev["rankings"], ev["edges"])})
        common_areas(methods, ev["edges"])
        evaluation = {"process_cpu_s": proc, "peak_rss_mb": ev["peak_rss_mb"],
                      "rmtbase_scorer_vs_evaluator_max_abs": scorer_check(
                          folder, held, rankings["rmtbase"],
                          ev["rankings"]["rmtbase"]["logit_diff"]),
                      "tl_vs_transformers_logprob_max_abs":
                          ev["tl_vs_transformers_logprob_max_abs"]}
    else:
        evaluation = None
    return {"task": task.name, "fit_prompts": fit.n, "held_out_prompts": held.n,
            "edges": len(rankings["rmtbase"]), "methods": methods, "evaluation": evaluation}


def tie_orders(rankings: dict, orders: int = TIE_ORDERS, seed: int = TIE_SEED) -> dict:
    """``{"<method>#<r>": scores}``: for each ranking with edges of tied ``|score|``, ``orders``
    strict rankings, each breaking every tie at random (edges of one ``|score|`` in a random
    order, ``numpy.random.default_rng([seed, r])``), scored ``E … 1``; a ranking without ties
    has none (its own order is its only one)."""
    out = {}
    for m, scores in rankings.items():
        names = list(scores)
        vals = np.abs(np.array([scores[n] for n in names]))
        if np.unique(vals).size == vals.size:
            continue
        for r in range(orders):
            jitter = np.random.default_rng([seed, r]).permutation(vals.size)
            order = np.lexsort((jitter, -vals))  # by |score| descending, ties by the draw
            key = np.empty(vals.size)
            key[order] = np.arange(vals.size, 0, -1, dtype=np.float64)
            out[f"{m}#{r}"] = {n: float(k) for n, k in zip(names, key, strict=True)}
    return out


def broken_ties(m: str, evaluated: dict, n_edges: int) -> dict:
    """The curve of ranking ``m`` with its ties broken at random (:func:`tie_orders`): the
    faithfulness at every ``k`` (mean and sd over the orders), the area of each order (mean,
    sd), the smallest ``k`` reaching :data:`TARGET` of each order; a ranking without ties is
    its own one order. ACDC's visit orders (``ACDC@v``, ``--acdc-orders``) pool their orders."""
    labels = []
    for v in (k for k in evaluated if "#" not in k and k.split("@")[0] == m):
        labels += [k for k in evaluated if k.split("#")[0] == v and "#" in k] or [v]
    curves = [curve_summary(evaluated[k]["logit_diff"], n_edges) for k in labels]
    f = np.array([c["faithfulness"] for c in curves])
    areas = np.array([c["area"] for c in curves])
    smallest = [c["smallest_reaching_0.8"] for c in curves]
    visits = sorted({k.split("#")[0] for k in labels})
    by_visit = {v: [i for i, k in enumerate(labels) if k.split("#")[0] == v] for v in visits}
    return {"orders": len(labels), "visit_orders": len(visits), "area": float(areas.mean()),
            "area_by_visit": [float(areas[i].mean()) for i in by_visit.values()],
            "smallest_by_visit": [None if any(smallest[j] is None for j in i) else
                                  float(np.mean([smallest[j] for j in i]))
                                  for i in by_visit.values()],
            "area_sd": float(areas.std(ddof=1)) if len(labels) > 1 else 0.0,
            "smallest_reaching_0.8": None if None in smallest else float(np.mean(smallest)),
            "smallest_by_order": smallest,
            "curve": {"k": curves[0]["k"], "faithfulness": f.mean(0).round(5).tolist(),
                      "faithfulness_sd": f.std(0).round(5).tolist()}}


def _areas(r: dict) -> tuple[str, str]:
    """A ranking's own-points and common-``k`` areas as its table row prints them."""
    return tuple(f"{r[k]:.3f}" if k in r else "-" for k in ("area", "area_common_k"))


def _table(doc) -> str:
    lines = [f"{'task':16s} {'ranking':8s} {'area':>6s} {'sd':>6s} {'joined':>6s} "
             f"{'k>=0.8':>7s} {'CPU-s':>7s} {'proc CPU-s':>10s} {'peak MB':>8s}"]
    for row in doc["tasks"]:
        for m, r in row["methods"].items():
            area = f"{r['area']:.3f}" if "area" in r else "-"
            sd = f"{r['area_sd']:.3f}" if "area_sd" in r else "-"
            joined = f"{r['area_tie_joined']:.3f}" if "area_tie_joined" in r else "-"
            lines.append(f"{row['task']:16s} {m:8s} {area:>6s} {sd:>6s} {joined:>6s} "
                         f"{r.get('smallest_reaching_0.8')!s:>7s} {r['cpu_s']:7.1f} "
                         f"{r['process_cpu_s']:10.1f} {r['peak_rss_mb']:8.0f}")
    return "\n".join(lines)


# --- tracr: auto-circuit's compiled programs (--behaviour tracr) ----------------------------
TRACR_PROGRAMS = ("reverse", "xproportion")

#: Run by the peers' python. ``prepare PROG out SEED``: the compiled program's weights (.npz)
#: and prompts (.json); ``rank PROG task.json METHOD IG out.json``: one method's scores on the
#: task; ``eval PROG task.json rankings.json out.json``: every ranking at every ``k``.
_TRACR_PEER_SCRIPT = r'''
import json, random, resource, sys, time
from itertools import product
import numpy as np
import torch as t
t.set_num_threads(1)
from auto_circuit.data import PromptDataLoader, PromptDataset
from auto_circuit.model_utils.tracr_model_utils import (BOS, MAX_SEQ_LEN, REVERSE_VOCAB,
    XPROPORTION_VOCAB, get_tracr_model)
from auto_circuit.types import AblationType, PatchType
from auto_circuit.utils.graph_utils import patchable_model

mode, prog = sys.argv[1], sys.argv[2]
''' + TRACR_MODEL + r'''# each mode compiles the program again: the fingerprint shows it compiled the same weights
fingerprint = float(sum(v.double().abs().sum() * (i + 1) for i, (k, v) in
                        enumerate(sorted(tl.state_dict().items()))
                        if not k.endswith(("IGNORE", "mask"))))
if mode == "prepare":
    out, seed = sys.argv[3], int(sys.argv[4])
''' + textwrap.indent(TRACR_PAIRS, "    ") + r'''
    ans, wrong = [a[-1] for a in ans], [w[-1] for w in wrong]  # read at the last position
    with t.no_grad():
        last = tl(t.tensor(clean))[:, -1]
    np.savez(out + ".npz", **{k: v.numpy() for k, v in tl.state_dict().items()
                             if not k.endswith(("IGNORE", "mask"))})
    json.dump({"clean": clean, "corrupted": corrupt, "answer": ans, "wrong": wrong,
               "causal": tl.cfg.attention_dir == "causal", "fingerprint": fingerprint,
               "tl_last_logits": last.tolist()},
              open(out + ".json", "w"))
    sys.exit(0)
task = json.load(open(sys.argv[3]))
ds = PromptDataset(t.tensor(task["clean"]), t.tensor(task["corrupted"]),
                   [t.tensor([a]) for a in task["answer"]], [t.tensor([w]) for w in task["wrong"]])
dl = PromptDataLoader(ds, seq_len=None, diverge_idx=0, batch_size=len(ds), shuffle=False)
model = patchable_model(tl, factorized=True, slice_output="last_seq", separate_qkv=True,
                        device=t.device("cpu"))
answer_fn = "avg_diff" if prog == "reverse" else "avg_val"
out = {"fingerprint": fingerprint}
if mode == "rank":
    method, ig, path = sys.argv[4], int(sys.argv[5]), sys.argv[6]
''' + textwrap.indent(_PEER_RANK, "    ") + r'''
    out["scores"] = {e.name: float(ps[e.dest.module_name][e.patch_idx]) for e in model.edges}
else:
    from auto_circuit.metrics.prune_metrics.answer_diff import measure_answer_diff
    from auto_circuit.metrics.prune_metrics.answer_value import measure_answer_val
    from auto_circuit.prune import run_circuits
    rankings, path = json.load(open(sys.argv[4])), sys.argv[5]
    E = len(model.edges)
    measure = measure_answer_diff if prog == "reverse" else measure_answer_val
    out["edges"], out["rankings"] = E, {}
    for label, scores in rankings.items():
        ps = model.new_prune_scores()
        for e in model.edges:
            ps[e.dest.module_name][e.patch_idx] = scores[e.name]
        outs = run_circuits(model, dl, list(range(E + 1)), ps, patch_type=PatchType.TREE_PATCH,
                            ablation_type=AblationType.RESAMPLE)
        if 0 not in outs:  # edges tied at the top (ACDC's never-removed ones) are all kept
            outs[0] = run_circuits(model, dl, [0], model.new_prune_scores(init_val=1.0),
                                   patch_type=PatchType.TREE_PATCH,
                                   ablation_type=AblationType.RESAMPLE)[0]
        out["rankings"][label] = measure(model, dl, outs)
    # the per-prompt metric of the full and the empty graph: is there a curve to draw?
    batch = next(iter(dl))
    per = []
    for k in (0, E):
        logits = outs[k][batch.key].double()
        v = logits.gather(-1, batch.answers)[:, 0]
        if prog == "reverse":
            v = v - logits.gather(-1, batch.wrong_answers)[:, 0]
        per.append(v)
    d = per[1] - per[0]
    out["full_minus_empty"] = [float(d.mean()), float(d.std() / len(d) ** 0.5)]
out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
json.dump(out, open(path, "w"))
'''


def _tracr_peer(python: str, script: Path, *args) -> float:
    """Run the peers' tracr script (:func:`_run`); its process CPU seconds."""
    return _run([python, str(script), *map(str, args)], False)


def tracr_halves(doc: dict, seed: int) -> tuple[dict, dict]:
    """(fit, held-out) halves of the prompts (:func:`halves`)."""
    return tuple({k: [doc[k][i] for i in idx] for k in ("clean", "corrupted", "answer", "wrong")}
                 for idx in halves(len(doc["clean"]), seed))


def tracr_ranking(sd: dict, doc: dict, fit: dict) -> tuple[dict, float, float]:
    """({auto-circuit edge name: key}, CPU-s, the largest |logit − TransformerLens's| at the
    last position over every prompt of ``doc``) of rmtbase's search ranking on the fit half:
    the no-norm model of the TransformerLens weights ``sd``, pruning in context under the
    corrupted counterfactual (a one-logit program gets a zero second logit: ``wrong`` = 1)."""
    from rmtbase.circuits.core.runner import Runner
    from rmtbase.circuits.task.export import auto_circuit_name
    from rmtbase.circuits.task.nonorm import NoNormModel
    from rmtbase.circuits.task.prune import fits, prune
    from rmtbase.circuits.task.taskfile import Task

    w, wrong = tracr_weights(sd, doc["causal"], fit["wrong"])
    tm = NoNormModel(w)
    tl = np.asarray(doc["tl_last_logits"])
    mine = tm.run(tm.embed(np.asarray(doc["clean"])))["logits"].numpy()
    mine = (mine[:, -1] if mine.ndim == 3 else mine)[:, :tl.shape[-1]]
    task = Task(np.asarray(fit["clean"]), np.asarray(fit["corrupted"]),
                np.asarray(fit["answer"]), wrong, name="tracr")
    if not fits(tm.graph.n_edges, task.n):
        raise SystemExit("the graph is beyond the pruning's budget")
    c = time.process_time()
    key = prune(Runner(tm, task, counterfactual="corrupted"))["key"]
    cpu = time.process_time() - c
    names = [auto_circuit_name(n) for n in tm.graph.edge_names()]
    return dict(zip(names, map(float, key), strict=True)), cpu, float(np.abs(mine - tl).max())


def run_tracr(args, prog: str, tmp: Path) -> dict:
    script = tmp / "peer.py"
    script.write_text(_TRACR_PEER_SCRIPT)
    base = tmp / prog
    _tracr_peer(args.peers, script, "prepare", prog, base, args.seed)
    doc = json.loads(base.with_suffix(".json").read_text())
    sd = dict(np.load(base.with_suffix(".npz")))
    fit, held = tracr_halves(doc, args.seed)
    fit_p, held_p = tmp / f"{prog}_fit.json", tmp / f"{prog}_held.json"
    fit_p.write_text(json.dumps(fit))
    held_p.write_text(json.dumps(held))
    rankings, methods = {}, {}
    rankings["rmtbase"], cpu, vs_tl = tracr_ranking(sd, doc, fit)
    methods["rmtbase"] = {"cpu_s": cpu}
    for m in PEER_METHODS:
        out_p = tmp / f"{prog}_{m}.json"
        proc = _tracr_peer(args.peers, script, "rank", prog, fit_p, m, args.ig_samples, out_p)
        got = json.loads(out_p.read_text())
        if got["fingerprint"] != doc["fingerprint"]:
            raise SystemExit(f"{prog}: the program compiled to other weights for {m}")
        if sorted(got["scores"]) != sorted(rankings["rmtbase"]):
            raise SystemExit(f"{prog}: rmtbase's and auto-circuit's edges differ")
        rankings[m] = got["scores"]
        methods[m] = {"cpu_s": got["cpu_s"], "process_cpu_s": proc}
    rk_p, ev_p = tmp / f"{prog}_rankings.json", tmp / f"{prog}_eval.json"
    rk_p.write_text(json.dumps(rankings))
    proc = _tracr_peer(args.peers, script, "eval", prog, held_p, rk_p, ev_p)
    ev = json.loads(ev_p.read_text())
    if ev["fingerprint"] != doc["fingerprint"]:
        raise SystemExit(f"{prog}: the program compiled to other weights for the evaluation")
    d, d_se = ev["full_minus_empty"]
    defined = abs(d) > 3 * d_se
    for m, points in ev["rankings"].items():
        vals = np.abs(np.array(list(rankings[m].values())))
        methods[m]["top_tie"] = int((vals == vals.max()).sum())
        if defined:
            cur = curve_summary(points, ev["edges"])
            methods[m].update({"area": cur["area"], "curve": cur,
                               "smallest_reaching_0.8": cur["smallest_reaching_0.8"]})
    if defined:
        common_areas(methods, ev["edges"])
    return {"program": prog, "edges": ev["edges"], "graph_vs_transformerlens_max_abs": vs_tl, "fit_prompts": len(fit["clean"]),
            "held_out_prompts": len(held["clean"]), "full_minus_empty": [d, d_se],
            "curve_defined": bool(defined), "evaluation_cpu_s": proc, "methods": methods}


def _tracr_table(rows) -> str:
    lines = [f"{'program':12s} {'ranking':8s} {'area':>6s} {'common':>6s} {'k>=0.8':>7s} "
             f"{'tie':>4s} {'CPU-s':>7s}"]
    for row in rows:
        if not row["curve_defined"]:
            d, se = row["full_minus_empty"]
            lines.append(f"{row['program']:12s} m(E) - m(0) = {d:.4g} +- {se:.2g}: no curve")
        for m, r in row["methods"].items():
            area, common = _areas(r)
            lines.append(f"{row['program']:12s} {m:8s} {area:>6s} {common:>6s} "
                         f"{r.get('smallest_reaching_0.8')!s:>7s} {r['top_tie']:4d} "
                         f"{r['cpu_s']:7.2f}")
    return "\n".join(lines)


def tracr_main(args) -> int:
    """``--behaviour tracr``: every program of :data:`TRACR_PROGRAMS`, one JSON document."""
    if not args.peers:
        raise SystemExit("--behaviour tracr needs --peers PYTHON (auto-circuit, tracr-pypi)")
    with tempfile.TemporaryDirectory(prefix="rmtbase-tracr-curves-") as tmp:
        rows = [run_tracr(args, prog, Path(tmp)) for prog in TRACR_PROGRAMS]
    print(_tracr_table(rows), file=sys.stderr)
    text = json.dumps({"benchmark": "task_zoo tracr", "seed": args.seed,
                       "ig_samples": args.ig_samples, "ablation": "resample (the twin)",
                       "metric": "logit_diff (reverse), avg_val (xproportion)",
                       "programs": rows}, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0


#: ``--suite``: (label, zoo, recipe or config, seed, tasks). ``mlp``: :mod:`rmtbase.studies.
#: _mlp_induction`'s configurations; ``zoo``: :mod:`rmtbase.studies._circuit_zoo`'s recipes,
#: ``mlp3s`` (the key path through MLP0) this benchmark's own. Prompts as :func:`induction_layout_tasks` draws them, ids within each
#: model's vocabulary.
SUITE = (("3x4d64 s0", "mlp", "3x4d64", 0, ("answer", "key")),
         ("3x4d64 s1", "mlp", "3x4d64", 1, ("key",)),
         ("short3", "zoo", "short3", 0, ("key",)),
         ("mlp2s", "zoo", "mlp2s", 0, ("key",)),
         ("3x4d64 s2", "mlp", "3x4d64", 2, ("key",)),
         ("mlp3s", "zoo", "mlp3s", 0, ("key",)))


def suite_folder(zoo: str, name: str, seed: int) -> Path:
    """The trained folder of one :data:`SUITE` row (trained on first use, then cached)."""
    if zoo == "mlp":
        from rmtbase.studies._mlp_induction import trained_folder
    else:
        from rmtbase.studies._circuit_zoo import trained_folder
    return Path(trained_folder(name, seed))


def _emit(doc: dict, path) -> int:
    """The table on stderr, the JSON document on stdout and in ``path`` (if given)."""
    print(_table(doc), file=sys.stderr)
    text = json.dumps(doc, indent=1)
    print(text)
    if path:
        Path(path).write_text(text + "\n")
    return 0


def suite_main(args) -> int:
    """``--suite``: :func:`run_task` on every row of :data:`SUITE` (``--rows``: those named,
    e.g. ``"mlp3s key"``), one JSON document, rewritten after each row (``complete`` false
    until the last)."""
    rows, wanted = [], None if args.rows is None else set(args.rows.split(","))
    doc = {"benchmark": "task_zoo suite", "prompts": args.prompts, "half": args.half,
           "seed": args.seed, "ig_samples": args.ig_samples, "methods": args.methods,
           "metric": "logit_diff", "ablation": "resample (the corrupted prompt)",
           "target": TARGET, "tie_orders": TIE_ORDERS, "tasks": rows, "complete": False}
    with tempfile.TemporaryDirectory(prefix="rmtbase-zoo-") as tmp:
        for label, zoo, name, seed, names in SUITE:
            names = [t for t in names if wanted is None or f"{label} {t}" in wanted]
            if not names:
                continue
            folder = suite_folder(zoo, name, seed)
            vocab = json.loads((folder / "config.json").read_text())["vocab_size"] - 1
            tasks = induction_layout_tasks(args.prompts, args.half, args.seed, args.prefix,
                                           vocab=vocab, replacement=args.replacement)
            for t in names:
                _log(f"{label}")
                row = run_task(args, folder, tasks[t], Path(tmp))
                rows.append({**row, "model": label, "task": f"{label} {t}"})
                if args.json:
                    Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
    doc["complete"] = True
    return _emit(doc, args.json)


def seed_differences(rows: list) -> dict:
    """``{task: {method: {...}}}`` over ``--seeds``' rows (``seed``, ``task``, ``methods``):
    rmtbase's area less each peer's, per seed, their mean and its se over seeds (``nan``
    with one seed), and on how many seeds rmtbase's is at least the peer's."""
    out: dict = {}
    for name in dict.fromkeys(r["task"] for r in rows):
        mine = [r for r in rows if r["task"] == name]
        peers = [m for m in mine[0]["methods"] if m != "rmtbase"]
        out[name] = {}
        for m in peers:
            d = np.array([r["methods"]["rmtbase"]["area"] - r["methods"][m]["area"]
                          for r in mine])
            out[name][m] = {"seeds": [r["seed"] for r in mine], "difference": d.tolist(),
                            "mean": float(d.mean()), "se": float(d.std(ddof=1) / np.sqrt(
                                d.size)) if d.size > 1 else float("nan"),
                            "at_least": int((d >= 0).sum())}
    return out


def seeds_main(args, folder) -> int:
    """``--seeds``: every task on each seed's prompts and split (:func:`run_task`), one JSON
    document, rewritten after each seed, and :func:`seed_differences`."""
    rows: list = []
    doc = {"benchmark": "task_zoo seeds", "model": _model_name(args), "prompts": args.prompts,
           "ig_samples": args.ig_samples, "methods": args.methods, "metric": "logit_diff",
           "ablation": "resample (the corrupted prompt)", "target": TARGET, "tasks": rows,
           "complete": False}
    seeds = [int(x) for x in args.seeds.split(",")]
    with tempfile.TemporaryDirectory(prefix="rmtbase-zoo-") as tmp:
        for seed in seeds:
            one = argparse.Namespace(**{**vars(args), "seed": seed})
            tasks = _tasks_of(args, seed)
            for name in args.tasks.split(","):
                _log(f"seed {seed}")
                rows.append({**run_task(one, folder, tasks[name], Path(tmp)), "seed": seed})
            doc["differences"] = seed_differences(rows) if args.peers else {}
            if args.json:
                Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
    doc["complete"] = True
    for name, by in doc["differences"].items():
        for m, d in by.items():
            _log(f"{name}: rmtbase - {m} area {d['mean']:+.5f} +- {d['se']:.5f} over "
                 f"{len(seeds)} seeds, at least on {d['at_least']}")
    return _emit(doc, args.json)


def _tasks_of(args, seed: int) -> dict:
    """The behaviour's tasks on ``seed``'s prompts."""
    if args.behaviour == "bigram":
        return bigram_tasks(args.prompts, args.length, seed)
    if args.half:
        return induction_layout_tasks(args.prompts, args.half, seed, args.prefix,
                                      replacement=args.replacement)
    return zoo_tasks(args.prompts, args.length, seed)


def _model_name(args) -> str:
    return args.folder or (f"_circuit_zoo markov3 seed {MODEL_SEED}" if args.behaviour ==
                           "bigram" else f"_mlp_induction {CONFIG} seed {MODEL_SEED}")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child-rmtbase"]:
        return _child_rmtbase(*argv[1:4])
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--peers", metavar="PYTHON", default=None,
                   help="the peers' interpreter (auto-circuit 1.0.1); without it rmtbase only")
    p.add_argument("--prompts", type=int, default=64, help="prompt pairs, split in halves")
    p.add_argument("--length", type=int, default=16,
                   help="tokens a prompt, BOS included (with --half 0)")
    p.add_argument("--seed", type=int, default=0, help="the prompts' and the split's seed")
    p.add_argument("--half", type=int, default=4,
                   help="induction_task's layout with segments of this length; 0: the "
                        "zoo_tasks layout of --length tokens")
    p.add_argument("--prefix", type=int, default=None, help="its repeated prefix (half - 1)")
    p.add_argument("--replacement", choices=("outside", "any"), default="outside",
                   help="the corruption's token: outside the prompt, or any other")
    p.add_argument("--ig-samples", type=int, default=50, help="EAP-IG's mask samples")
    p.add_argument("--acdc-orders", type=int, default=1, metavar="N",
                   help="ACDC under N hash seeds: N orders of visiting a layer's edges")
    p.add_argument("--behaviour", choices=("induction", "bigram", "tracr"),
                   default="induction",
                   help="induction on _mlp_induction 3x4d64 (tasks answer, key), the bigram "
                        "lookup on the circuit zoo's markov3 (task bigram), or auto-circuit's "
                        "tracr programs (with --peers)")
    p.add_argument("--tasks", default=None, help="default: the behaviour's tasks")
    p.add_argument("--methods", default=",".join(PEER_METHODS), help="the peers' methods")
    p.add_argument("--folder", default=None, help="another GPT-2 folder (a smoke test)")
    p.add_argument("--prune-budget", type=int, default=None,
                   help="rmtbase's prune_budget (0: pruning on integrated gradients)")
    p.add_argument("--best-subsets", type=int, default=0, metavar="K",
                   help="instead: on the held-out half, every subset of rmtbase's top K "
                        "edges (best_subsets)")
    p.add_argument("--swaps", type=int, default=0, metavar="K",
                   help="instead: every one-edge swap of rmtbase's top K (best_swaps)")
    p.add_argument("--suite", action="store_true",
                   help="every model and task of SUITE in one run, one table")
    p.add_argument("--rows", default=None, help="with --suite: the rows to run, comma-separated "
                   "(\"3x4d64 s0 key\"; default all)")
    p.add_argument("--seeds", default=None, metavar="S,S,...",
                   help="instead of --seed: each seed's prompts and split, and rmtbase's "
                        "area less each peer's over the seeds")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    bad = [m for m in args.methods.split(",") if m not in PEER_METHODS]
    if bad:
        p.error(f"--methods takes {', '.join(PEER_METHODS)}, not {', '.join(bad)}")
    if args.seeds is not None:
        if not all(x.strip().isdigit() for x in args.seeds.split(",")):
            p.error(f"--seeds takes seeds separated by commas (0,1,2), not {args.seeds!r}")
        if args.suite or args.best_subsets or args.swaps or args.behaviour == "tracr":
            p.error("--seeds runs one behaviour's tasks, without --suite, --best-subsets, "
                    "--swaps or --behaviour tracr")
    if args.behaviour == "tracr":
        return tracr_main(args)
    from rmtbase.studies._mlp_induction import trained_folder

    c = time.process_time()
    if args.behaviour == "bigram":
        from rmtbase.studies._circuit_zoo import trained_folder as zoo_folder

        folder = args.folder or zoo_folder("markov3", MODEL_SEED)
    else:
        folder = args.folder or trained_folder(CONFIG, MODEL_SEED)
    train_cpu = time.process_time() - c
    args.tasks = args.tasks or ("bigram" if args.behaviour == "bigram" else ",".join(TASKS))
    if args.seeds:
        return seeds_main(args, folder)
    tasks = _tasks_of(args, args.seed)
    if args.half and args.behaviour != "bigram":
        args.length = int(tasks["answer"].length)
    if args.best_subsets or args.swaps:
        rows = [best_subsets(folder, tasks[t], args.seed, args.best_subsets)
                if args.best_subsets else best_swaps(folder, tasks[t], args.seed, args.swaps)
                for t in args.tasks.split(",")]
        print(json.dumps(rows, indent=1))
        return 0
    if args.suite:
        return suite_main(args)
    docs = []
    with tempfile.TemporaryDirectory(prefix="rmtbase-zoo-") as tmp:
        for name in args.tasks.split(","):
            docs.append(run_task(args, folder, tasks[name], Path(tmp)))
    doc = {"benchmark": "task_zoo", "model": _model_name(args),
           "folder_cpu_s": train_cpu, "prompts": args.prompts, "length": args.length,
           "layout": "bigram" if args.behaviour == "bigram" else
                     f"induction_task half {args.half} prefix {args.prefix} replacement "
                     f"{args.replacement}" if args.half else "zoo",
           "seed": args.seed, "ig_samples": args.ig_samples, "metric": "logit_diff",
           "ablation": "resample (the corrupted prompt)", "target": TARGET, "tasks": docs}
    return _emit(doc, args.json)


if __name__ == "__main__":
    sys.exit(main())
