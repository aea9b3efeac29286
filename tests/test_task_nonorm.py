"""The no-norm model on the task graph (rmtbase.circuits.task.nonorm), the edge names of
auto-circuit's graph, and the AUROC the tracr benchmark reports, against independent
computations:

- the graph forward and the plain forward equal a numpy forward of the same weights written
  here (causal and bidirectional attention, float64), at the last position or every position
  after the first;
- one edge carrying the zero or corrupted counterfactual equals that numpy forward with the
  receiver's input shifted by the sender's change, and its attribution the derivative along
  that shift (central differences); at one position, the shift at that position alone;
- TransformerLens state dicts are read field by field, and bad ones refused in one line;
- every edge of a 2-layer, 1-head graph maps onto auto-circuit's names for the tracr
  ``xproportion`` model (the list printed by auto-circuit 1.0.1's ``model.edges``);
- the Mann–Whitney AUC equals scikit-learn's ``roc_auc_score`` (ties included) and a hand
  count; the metrics over several positions are the mean of each position's;
- the tracr benchmark's scoring (benchmarks/task_circuits.py) on a made-up peers' run, on
  edges and by position, without tracr or auto-circuit."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from rmtbase.circuits.core.attribution import attribute  # noqa: E402
from rmtbase.circuits.core.exact import patch_edges  # noqa: E402
from rmtbase.circuits.core.graph import Graph  # noqa: E402
from rmtbase.circuits.core.runner import Runner  # noqa: E402
from rmtbase.circuits.task.export import auto_circuit_name  # noqa: E402
from rmtbase.circuits.task.nonorm import NoNormModel, NoNormWeights  # noqa: E402
from rmtbase.circuits.task.taskfile import Task  # noqa: E402
from rmtbase.errors import InputError  # noqa: E402
from rmtbase.studies._circuit_measures import auc  # noqa: E402

L, H, D, DH, M, V, CTX = 2, 2, 12, 4, 10, 7, 8


def _state_dict(seed=0):
    rng = np.random.default_rng(seed)

    def r(*shape):
        return rng.normal(0, 0.6, shape)

    sd = {"embed.W_E": r(V, D), "pos_embed.W_pos": r(CTX, D), "unembed.W_U": r(D, V),
          "unembed.b_U": r(V)}
    for li in range(L):
        b = f"blocks.{li}."
        sd |= {b + "attn.W_Q": r(H, D, DH), b + "attn.b_Q": r(H, DH),
               b + "attn.W_K": r(H, D, DH), b + "attn.b_K": r(H, DH),
               b + "attn.W_V": r(H, D, DH), b + "attn.b_V": r(H, DH),
               b + "attn.W_O": r(H, DH, D), b + "attn.b_O": r(D),
               b + "mlp.W_in": r(D, M), b + "mlp.b_in": r(M),
               b + "mlp.W_out": r(M, D), b + "mlp.b_out": r(D)}
    return sd


def _numpy_forward(sd, ids, causal, shift=None, read_from=None):
    """Logits ``(n, V)`` at the last position (``(n, T − s, V)`` at positions ``s …`` for
    ``read_from`` ``s``), by the weights' names alone; ``shift``
    ``{(layer, head, "q"|"k"|"v" or "mlp" or "logits"): (n, T, D)}`` is added to that
    receiver's input."""
    shift = shift or {}
    ids = np.asarray(ids)
    t = ids.shape[1]
    x = sd["embed.W_E"][ids] + sd["pos_embed.W_pos"][:t]
    for li in range(L):
        b = f"blocks.{li}."
        attn = np.zeros_like(x) + sd[b + "attn.b_O"]
        for h in range(sd[b + "attn.W_Q"].shape[0]):
            xs = {c: x + shift.get((li, h, c), 0) for c in "qkv"}
            q = xs["q"] @ sd[b + "attn.W_Q"][h] + sd[b + "attn.b_Q"][h]
            k = xs["k"] @ sd[b + "attn.W_K"][h] + sd[b + "attn.b_K"][h]
            v = xs["v"] @ sd[b + "attn.W_V"][h] + sd[b + "attn.b_V"][h]
            s = q @ k.transpose(0, 2, 1) / np.sqrt(DH)
            if causal:
                s = np.where(np.triu(np.ones((t, t), bool), 1), -np.inf, s)
            p = np.exp(s - s.max(-1, keepdims=True))
            p /= p.sum(-1, keepdims=True)
            attn = attn + (p @ v) @ sd[b + "attn.W_O"][h]
        x = x + attn
        xm = x + shift.get((li, "mlp"), 0)
        hid = np.maximum(xm @ sd[b + "mlp.W_in"] + sd[b + "mlp.b_in"], 0)
        x = x + hid @ sd[b + "mlp.W_out"] + sd[b + "mlp.b_out"]
    x = x + shift.get("logits", 0)
    x = x[:, -1] if read_from is None else x[:, read_from:]
    return x @ sd["unembed.W_U"] + sd["unembed.b_U"]


def _ids(n=5, t=6, seed=1):
    return np.random.default_rng(seed).integers(0, V, (n, t))


@pytest.mark.parametrize("causal", [False, True])
def test_graph_and_plain_forwards_equal_a_numpy_forward(causal):
    sd = _state_dict()
    tm = NoNormModel(NoNormWeights.from_state_dict(sd, causal=causal), dtype=torch.float64)
    ids = _ids()
    want = _numpy_forward(sd, ids, causal)
    np.testing.assert_allclose(tm.run(tm.embed(ids))["logits"].numpy(), want, rtol=1e-10,
                               atol=1e-10)
    np.testing.assert_allclose(tm.model_logits(ids).numpy(), want, rtol=1e-10, atol=1e-10)
    assert tm.check(ids) < 1e-12
    every = NoNormModel(NoNormWeights.from_state_dict(sd, causal=causal), dtype=torch.float64,
                        read_from=1)
    want_all = _numpy_forward(sd, ids, causal, read_from=1)
    assert want_all.shape == (5, 5, V)
    np.testing.assert_allclose(every.run(every.embed(ids))["logits"].numpy(), want_all,
                               rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(want_all[:, -1], want, rtol=1e-12)
    # a causal model's last logits differ from a bidirectional one's (the mask is used)
    other = _numpy_forward(sd, ids, not causal)
    assert np.abs(other - want).max() > 1e-3


@pytest.mark.parametrize("counterfactual, read_from", [("zero", None), ("corrupted", None),
                                                       ("corrupted", 1)])
def test_one_edge_patched_and_attributed_by_a_shifted_numpy_forward(counterfactual,
                                                                     read_from):
    """Edge s → r carrying the counterfactual shifts r's input by ``c_s − o_s``: senders
    ``input`` (the embeddings) and ``a0.h1`` (its ``z W_O`` alone, no bias), receivers a
    head's key, an MLP and the logits; with ``read_from`` the logit difference is averaged
    over positions 1 … T − 1, each with its own answer."""
    sd = _state_dict(2)
    causal = True
    tm = NoNormModel(NoNormWeights.from_state_dict(sd, causal=causal), dtype=torch.float64,
                     read_from=read_from)
    clean, corrupted = _ids(6, 5, 3), _ids(6, 5, 4)
    answer = np.arange(6) % V if read_from is None else _ids(6, 4, 5)
    wrong = (answer + 1) % V
    task = Task(clean, corrupted, answer, wrong)
    r = Runner(tm, task, counterfactual=counterfactual, batch=4)

    def emb(ids):
        return sd["embed.W_E"][ids] + sd["pos_embed.W_pos"][:ids.shape[1]]

    def head_out(ids, h):  # a0.h<h>'s output z W_O on the plain forward
        x = emb(ids)
        b = "blocks.0."
        q = x @ sd[b + "attn.W_Q"][h] + sd[b + "attn.b_Q"][h]
        k = x @ sd[b + "attn.W_K"][h] + sd[b + "attn.b_K"][h]
        v = x @ sd[b + "attn.W_V"][h] + sd[b + "attn.b_V"][h]
        s = q @ k.transpose(0, 2, 1) / np.sqrt(DH)
        s = np.where(np.triu(np.ones((5, 5), bool), 1), -np.inf, s)
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        return (p @ v) @ sd[b + "attn.W_O"][h]

    def cf(fn):
        return np.zeros_like(fn(clean)) if counterfactual == "zero" else fn(corrupted)

    d_in = cf(emb) - emb(clean)
    d_head = cf(lambda i: head_out(i, 1)) - head_out(clean, 1)
    cases = {"input->a1.h0<k>": {(1, 0, "k"): d_in}, "input->m0": {(0, "mlp"): d_in},
             "a0.h1->m1": {(1, "mlp"): d_head}, "a0.h1->logits": {"logits": d_head},
             "a0.h1->a1.h1<q>": {(1, 1, "q"): d_head}}

    def ld(logits):
        if read_from is None:
            rows = np.arange(len(answer))
            return logits[rows, answer] - logits[rows, wrong]
        a = np.take_along_axis(logits, answer[..., None], -1)[..., 0]
        w = np.take_along_axis(logits, wrong[..., None], -1)[..., 0]
        return (a - w).mean(1)

    def fwd(shift=None):
        return _numpy_forward(sd, clean, causal, shift, read_from=read_from)

    base = ld(fwd())
    edges = [tm.graph.index(n) for n in cases]
    eff, se = patch_edges(r, edges)
    for (name, shift), e, s in zip(cases.items(), eff, se, strict=True):
        per = base - ld(fwd(shift))  # what the edge carries
        np.testing.assert_allclose(e, per.mean(), rtol=1e-9, atol=1e-10, err_msg=name)
        np.testing.assert_allclose(s, per.std(ddof=1) / np.sqrt(len(per)), rtol=1e-7,
                                   atol=1e-10, err_msg=name)
        assert abs(e) > 1e-6, name  # each case moves the metric
    # attribution: the directional derivative of that forward along the shift (central
    # differences, float64), mean over prompts
    att, _ = attribute(r)
    h = 1e-5
    for name, shift in cases.items():
        up = ld(fwd({k: h * v for k, v in shift.items()}))
        dn = ld(fwd({k: -h * v for k, v in shift.items()}))
        np.testing.assert_allclose(att[tm.graph.index(name)], ((dn - up) / (2 * h)).mean(),
                                   rtol=1e-6, atol=1e-8, err_msg=name)
    # the same edges at one position: the shift at that position alone, zero elsewhere
    positions = [0, 2, 4]
    eff_t, se_t = patch_edges(r, edges, positions=positions)
    att_t, _ = attribute(r, by_position=True)
    assert eff_t.shape == se_t.shape == (len(edges), 3) and att_t.shape == (tm.graph.n_edges, 5)
    moved = 0
    for (name, shift), row, srow in zip(cases.items(), eff_t, se_t, strict=True):
        for j, t in enumerate(positions):
            at_t = {}
            for k, v in shift.items():
                at_t[k] = np.zeros_like(v)
                at_t[k][:, t] = v[:, t]
            per = base - ld(fwd(at_t))
            np.testing.assert_allclose(row[j], per.mean(), rtol=1e-9, atol=1e-10,
                                       err_msg=f"{name} at {t}")
            np.testing.assert_allclose(srow[j], per.std(ddof=1) / np.sqrt(len(per)),
                                       rtol=1e-7, atol=1e-10, err_msg=f"{name} at {t}")
            moved += abs(row[j]) > 1e-6
            up = ld(fwd({k: h * v for k, v in at_t.items()}))
            dn = ld(fwd({k: -h * v for k, v in at_t.items()}))
            np.testing.assert_allclose(att_t[tm.graph.index(name), t],
                                       ((dn - up) / (2 * h)).mean(), rtol=1e-6, atol=1e-8,
                                       err_msg=f"{name} at {t}")
    assert moved >= len(cases)  # not every position is silent
    np.testing.assert_allclose(att_t.sum(1), att, rtol=1e-10, atol=1e-12)  # linear in Δ
    with pytest.raises(InputError, match="positions lie in"):
        patch_edges(r, edges, positions=[5])


@pytest.mark.parametrize("removed", [0.2, 0.8])
def test_a_per_position_set_equal_at_every_position_is_the_edge_set(removed):
    """Either side of the forward's sparse sum (fewer kept or fewer removed), against a
    counterfactual run: an ``(E, T)`` set with every position alike gives the ``(E,)`` set's
    logits, an edge into the logits counts at the position they read alone; a set of other
    positions is refused."""
    sd = _state_dict(4)
    tm = NoNormModel(NoNormWeights.from_state_dict(sd, causal=True), dtype=torch.float64)
    clean, corrupted = _ids(4, 5, 6), _ids(4, 5, 7)
    cf = tm.run(tm.embed(corrupted))["outs"]
    kept = np.random.default_rng(8).random(tm.graph.n_edges) > removed
    want = tm.run(tm.embed(clean), cf=cf, kept=kept)["logits"]
    wide = np.repeat(kept[:, None], 5, 1)
    got = tm.run(tm.embed(clean), cf=cf, kept=wide)["logits"]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)
    # the logits read the last position: an edge into them flipped at every other position
    # changes nothing, flipped at the last alone it is the edge set with that edge flipped
    e = tm.graph.index("input->logits")
    wide[e, :-1] = ~wide[e, :-1]
    got = tm.run(tm.embed(clean), cf=cf, kept=wide)["logits"]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)
    wide[e] = kept[e]
    wide[e, -1] = not kept[e]
    flipped = kept.copy()
    flipped[e] = not kept[e]
    want = tm.run(tm.embed(clean), cf=cf, kept=flipped)["logits"]
    got = tm.run(tm.embed(clean), cf=cf, kept=wide)["logits"]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)
    assert (got - tm.run(tm.embed(clean), cf=cf, kept=kept)["logits"]).abs().max() > 1e-6
    with pytest.raises(InputError, match="6 positions"):
        tm.run(tm.embed(clean), cf=cf, kept=np.ones((tm.graph.n_edges, 6), bool))


def test_state_dict_fields_and_refusals():
    sd = _state_dict()
    w = NoNormWeights.from_state_dict(sd, causal=False)
    assert (w.n_layers, w.n_heads) == (L, H)
    # exact: copies of the stored arrays
    np.testing.assert_array_equal(w.w_k[1, 0], sd["blocks.1.attn.W_K"][0])
    np.testing.assert_array_equal(w.b_out[0], sd["blocks.0.mlp.b_out"])  # exact: a copy
    no_bias = {k: v for k, v in sd.items() if k != "unembed.b_U"}
    assert not NoNormWeights.from_state_dict(no_bias, causal=False).b_u.any()
    with pytest.raises(InputError, match="lacks blocks.1.mlp.W_in"):
        NoNormWeights.from_state_dict({k: v for k, v in sd.items()
                                       if k != "blocks.1.mlp.W_in"}, causal=False)
    with pytest.raises(InputError, match="norm weights"):
        NoNormWeights.from_state_dict({**sd, "blocks.0.ln1.w": np.ones(D)}, causal=False)
    with pytest.raises(InputError, match=r"w_o is \(2, 2, 4, 11\)"):
        NoNormWeights.from_state_dict({**sd, "blocks.0.attn.W_O": np.zeros((H, DH, D - 1)),
                                       "blocks.1.attn.W_O": np.zeros((H, DH, D - 1))},
                                      causal=False)
    tm = NoNormModel(w)
    with pytest.raises(InputError, match="0 … 6"):
        tm.embed([[0, V]])
    with pytest.raises(InputError, match="the model takes 8"):
        tm.embed(np.zeros((1, CTX + 1), int))


#: auto-circuit 1.0.1's ``[e.name for e in model.edges]`` on tracr ``xproportion`` (2 layers,
#: 1 head; patchable_model(factorized=True, separate_qkv=True)).
XPROPORTION_EDGES = [
    "MLP 1->Resid End", "A0.0->A1.0.Q", "MLP 0->Resid End", "Resid Start->A1.0.K",
    "A1.0->Resid End", "Resid Start->A1.0.Q", "MLP 0->A1.0.K", "Resid Start->A0.0.V",
    "Resid Start->MLP 0", "MLP 0->MLP 1", "Resid Start->A0.0.Q", "MLP 0->A1.0.Q",
    "A1.0->MLP 1", "A0.0->Resid End", "Resid Start->MLP 1", "A0.0->A1.0.V",
    "Resid Start->A1.0.V", "Resid Start->A0.0.K", "MLP 0->A1.0.V", "A0.0->MLP 0",
    "A0.0->MLP 1", "A0.0->A1.0.K", "Resid Start->Resid End"]


def test_edge_names_map_onto_auto_circuits():
    names = [auto_circuit_name(n) for n in Graph(2, 1).edge_names()]
    assert sorted(names) == sorted(XPROPORTION_EDGES)
    assert auto_circuit_name("input->a3.h0<v>") == "Resid Start->A3.0.V"
    assert auto_circuit_name("a10.h11->a12.h3<k>") == "A10.11->A12.3.K"
    assert auto_circuit_name("m2->logits") == "MLP 2->Resid End"
    big = [auto_circuit_name(n) for n in Graph(3, 4).edge_names()]
    assert len(set(big)) == len(big)
    with pytest.raises(InputError, match="sender->receiver"):
        auto_circuit_name("input")
    with pytest.raises(InputError, match="not a node"):
        auto_circuit_name("x1->logits")


def test_auc_is_roc_auc():
    # by hand: positives 3, 1; negatives 1, 0 -> pairs (3>1, 3>0, 1=1 half, 1>0) = 3.5 / 4
    assert auc(np.array([3, 1, 1, 0]), np.array([1, 1, 0, 0], bool)) == 0.875
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(5)
    for _ in range(5):
        s = rng.integers(0, 4, 40).astype(float)  # many ties
        y = rng.random(40) < 0.3
        assert auc(s, y) == pytest.approx(metrics.roc_auc_score(y, s), abs=1e-12)


@pytest.mark.parametrize("name", ["logit_diff", "logprob", "kl"])
def test_metric_over_positions_is_the_mean_of_each_positions(name):
    from rmtbase.circuits.core.metric import metric

    rng = np.random.default_rng(7)
    n, p = 4, 3
    logits = rng.normal(0, 2, (n, p, V))
    ref = rng.normal(0, 2, (n, p, V))
    ref = ref - np.log(np.exp(ref).sum(-1, keepdims=True))
    a, w = rng.integers(0, V, (n, p)), rng.integers(0, V, (n, p))
    lp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    rows = np.arange(n)[:, None], np.arange(p)[None, :]
    want = {"logit_diff": logits[rows + (a,)] - logits[rows + (w,)],
            "logprob": lp[rows + (a,)],
            "kl": (np.exp(ref) * (ref - lp)).sum(-1)}[name].mean(1)
    got = metric(name, torch.as_tensor(logits), torch.as_tensor(a), torch.as_tensor(w),
                 torch.as_tensor(ref))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10)


def test_the_tracr_benchmarks_scoring_on_a_made_up_peer_run():
    """benchmarks/task_circuits.py's ``tracr_scores`` on what the peers' script would write,
    made up here for a random 2-layer 1-head model: the logits check, every protocol, and
    the peers' scores matched to rmtbase's edges by name (a score of 1 on the circuit and 0
    elsewhere has AUROC 1, its reverse 0)."""
    from _scripts import load

    bench = load("benchmarks/task_circuits.py", "task_circuits_bench")
    sd = _state_dict(3)
    for k in list(sd):  # one head per layer, as auto-circuit's tracr models
        if k.startswith("blocks.") and ".attn." in k and not k.endswith("b_O"):
            sd[k] = sd[k][:1]
    clean, corrupted = _ids(8, 6, 8), _ids(8, 6, 9)
    answer, wrong = _ids(8, 5, 10), _ids(8, 5, 11)
    official = ["A1.0->Resid End", "MLP 0->A1.0.V"]
    acdc = ["Resid Start->A1.0.K", "A0.0->MLP 0", "MLP 1->Resid End"]
    methods = {}
    for readout in ("last", "after_bos"):
        for abl, circuit in (("RESAMPLE", official), ("ZERO", acdc)):
            methods[f"EAP/{abl}/{readout}"] = {"cpu_s": 0.1, "scores": {
                n: float(n in circuit) for n in XPROPORTION_EDGES}}
            methods[f"EAP-IG/{abl}/{readout}"] = {"cpu_s": 0.2, "scores": {
                n: float(n not in circuit) for n in XPROPORTION_EDGES}}
    peer = {"program": "made-up", "sd": sd, "causal": False, "clean": clean.tolist(),
            "corrupted": corrupted.tolist(), "answer": answer.tolist(),
            "wrong": wrong.tolist(), "official": official, "acdc": acdc,
            "edges": XPROPORTION_EDGES, "process_cpu_s": 1.0, "methods": methods,
            "tl_logits": _numpy_forward(sd, clean, False, read_from=1).tolist()}
    out = bench.tracr_scores(peer, batch=4)
    # float32 (the benchmark's model) against float64
    assert out["graph_vs_transformerlens_max_abs"] < 1e-5 * np.abs(peer["tl_logits"]).max()
    assert sorted(out["protocols"]) == ["after_bos/corrupted", "after_bos/zero",
                                        "last/corrupted", "last/zero"]
    for row in out["protocols"].values():
        assert row["auroc"]["EAP"] == 1.0 and row["auroc"]["EAP-IG"] == 0.0
        circuit = official if row["ablation"] == "RESAMPLE" else acdc
        assert sorted(row["circuit_scores"]["rmtbase exact"]) == sorted(circuit)
        assert 0.0 <= row["auroc"]["rmtbase exact"] <= 1.0
        assert row["auroc_floored"]["EAP"] == 1.0
    # auto-circuit's token-position graph: an edge per position, named edge@t, read after BOS
    by_pos = [f"{n}@{t}" for n in XPROPORTION_EDGES for t in range(6)]
    circuits = {"official": [f"{n}@{t}" for n in official for t in range(1, 6)],
                "acdc": [f"{n}@{t}" for n in acdc for t in range(1, 6)]}
    methods = {f"{m}/{abl}/after_bos": {"cpu_s": 0.1, "scores": {
        n: float((n in circuits[c]) == (m == "EAP")) for n in by_pos}}
        for m in ("EAP", "EAP-IG") for abl, c in (("RESAMPLE", "official"), ("ZERO", "acdc"))}
    out = bench.tracr_scores({**peer, **circuits, "edges": by_pos, "methods": methods,
                              "by_position": True}, batch=4)
    assert out["by_position"] and out["edges"] == len(by_pos)
    assert sorted(out["protocols"]) == ["after_bos/corrupted", "after_bos/zero"]
    for row in out["protocols"].values():
        assert row["auroc"]["EAP"] == 1.0 and row["auroc"]["EAP-IG"] == 0.0
        assert sorted(row["circuit_scores"]["rmtbase exact"]) == sorted(circuits[row["circuit"]])
    # the floor: below 1e-5 of the largest |score| a rank is rounding's, a tie
    # exact: entries are kept as they are (abs) or set to 0, no arithmetic
    np.testing.assert_array_equal(bench.floored([1.0, -2e-6, -0.5, 3e-5]), [1.0, 0, 0.5, 3e-5])
