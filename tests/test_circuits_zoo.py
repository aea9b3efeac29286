"""The circuit search checked on small GPT-2s trained with recipes it was not developed on
(:mod:`rmtbase.studies._circuit_zoo`), against a causal truth computed independently in
``tests/_circuit_truth.py`` (plain torch from the state dict; direct and via-MLP path patching
of every earlier source into each receiver's q, k and v input).

Quick tier: the truth's forward against transformers' logits; its patching against runs of the
model with a source's output projection zeroed; its scores against the probe's definitions;
the zoo's cache. Slow tier (trains each model when not cached, 100–300 CPU-s each): what each
trained model contains by the truth, and what ``find_circuits(model, composition,
repeat_lengths="auto")`` must report on it:

(a) the truth's induction heads labelled ``induction`` and their causally dominant K source
    confirmed and ``dominant``; (b) every single source passing the rule (≥ 3 se and ≥ 10 % of
    the receiver's score; v: relative output change ≥ 0.1) confirmed, whatever its weight rank,
    with ``effect_causal`` within 4 combined se of the truth (independent sequences: the
    tolerance is 4 √(se_tool² + se_truth²)); (c) MLP-mediated sources reported with path
    ``via_mlp``; (d) the model without the circuit confirms none.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import _circuit_truth as T  # noqa: E402


def _tiny(seed=0, n_layer=3, zero_mlp=False):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=17, n_positions=48, n_embd=32, n_layer=n_layer, n_head=4,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, tie_word_embeddings=False,
                     initializer_range=0.2, attn_implementation="eager", bos_token_id=0,
                     eos_token_id=0)
    net = GPT2LMHeadModel(cfg).double().eval()
    sd = {k: v.detach().clone() for k, v in net.state_dict().items()}
    if zero_mlp:
        for i in range(n_layer):
            sd[f"transformer.h.{i}.mlp.c_proj.weight"].zero_()
            sd[f"transformer.h.{i}.mlp.c_proj.bias"].zero_()
    return net, sd


def _cut(sd, layer, head, n_head=4):
    """A copy of ``sd`` with head (layer, head)'s rows of the output projection zeroed."""
    out = {k: v.clone() for k, v in sd.items()}
    w = out[f"transformer.h.{layer}.attn.c_proj.weight"]
    dh = w.shape[0] // n_head
    w[head * dh:(head + 1) * dh] = 0
    return out


def test_forward_with_mlps_equals_transformers():
    net, sd = _tiny()
    ids, pos = T.repeated_distinct(16, 7, 4, 0)
    with torch.no_grad():
        ref = net(input_ids=ids, position_ids=pos, output_attentions=True)
        r = T.run(sd, ids, pos, 4)
    assert torch.allclose(r["logits"], ref.logits, rtol=1e-9, atol=1e-9)
    for a, b in zip(r["pats"], ref.attentions, strict=True):
        assert torch.allclose(a, b, rtol=1e-9, atol=1e-12)


def test_sequences_are_distinct_within_a_half():
    ids, pos = T.repeated_distinct(12, 10, 50, 3)
    assert ids.shape == (50, 21) and (ids[:, 0] == 0).all() and (ids[:, 1:] >= 1).all()
    assert (ids[:, 1:11] == ids[:, 11:]).all()
    assert all(len(set(row[1:11].tolist())) == 10 for row in ids)
    assert (pos[0] == torch.arange(21)).all()


def test_scores_follow_the_probe_definitions():
    """The truth's scores written out for the repeated layout equal rmtbase.probe.behaviour's
    general definitions (a comparison of definitions, so that effects compare like with
    like; the truth does not call it)."""
    from rmtbase.probe import behaviour as bh

    _, sd = _tiny(2)
    n = 6
    ids, pos = T.repeated_distinct(16, n, 3, 1)
    with torch.no_grad():
        pats = T.run(sd, ids, pos, 4)["pats"]
    content = np.ones(2 * n + 1, bool)
    content[0] = False
    for a in pats:
        mine = T.scores(a, n)
        for b in range(3):
            ref = bh.behaviours(a[b].numpy(), content, causal=True, ids=ids[b].numpy())
            for k, v in mine.items():
                np.testing.assert_allclose(v[b].numpy(), ref[k], rtol=0, atol=1e-12)


def test_total_patch_equals_a_run_without_the_source():
    """2 layers with MLPs: the residual entering layer 1 of a run with head L0H2's output
    projection zeroed is the clean one less L0H2's output plus the change of MLP0 on it, the
    ``total`` patch; every receiver's pattern (q and k patched) and output (v too) equal that
    run's. The ``direct`` and ``via_mlp`` patches add up to it (each removes one part)."""
    _, sd = _tiny(1, n_layer=2)
    n = 8
    ids, pos = T.repeated_distinct(16, n, 6, 0)
    cut = _cut(sd, 0, 2)
    with torch.no_grad():
        r, rc = T.run(sd, ids, pos, 4), T.run(cut, ids, pos, 4)
        x = T.patched_input(sd, r, 1, [(0, 2)], "total")
        torch.testing.assert_close(x, rc["resid"][1], rtol=0, atol=1e-12)
        xd, xv = (T.patched_input(sd, r, 1, [(0, 2)], p) for p in ("direct", "via_mlp"))
        torch.testing.assert_close(xd + xv - r["resid"][1], x, rtol=0, atol=1e-12)
        for h in range(4):
            e = T.effect(sd, r, (1, h), x, ("q", "k"), "induction", n, 4)
            want = T.scores(r["pats"][1], n)["induction"][:, h] - \
                T.scores(rc["pats"][1], n)["induction"][:, h]
            torch.testing.assert_close(e, want, rtol=0, atol=1e-12)
        # v alone: the clean pattern on the cut run's values
        w = T._layer(sd, 1)
        qkv = T._qkv(w, T._ln(rc["resid"][1], w["ln_1.weight"], w["ln_1.bias"]), 4)
        z_new = (r["pats"][1] @ qkv[2])[:, :, 1:]
        z = r["z"][1][:, :, 1:]
        want = ((z_new - z).pow(2).sum((-1, -2)).sqrt() / z.pow(2).sum((-1, -2)).sqrt())
        e = T.effect(sd, r, (1, 3), x, ("v",), None, n, 4)
        torch.testing.assert_close(e, want[:, 3], rtol=0, atol=1e-12)
        assert float(e.abs().max()) > 1e-3


def test_via_mlp_holds_intermediate_attention_at_its_clean_output():
    """3 layers, layer 1's attention output zeroed (weights and bias): holding it at its clean
    value is then the same as recomputing it, so the ``total`` patch of L0H1 into layer 2
    equals the run with L0H1's projection zeroed; with layer 1's attention live it does not
    (the cut run also changes layer 1's heads)."""
    _, sd = _tiny(3)
    n = 7
    ids, pos = T.repeated_distinct(16, n, 5, 2)
    dead = {k: v.clone() for k, v in sd.items()}
    dead["transformer.h.1.attn.c_proj.weight"].zero_()
    dead["transformer.h.1.attn.c_proj.bias"].zero_()
    with torch.no_grad():
        for model, same in ((dead, True), (sd, False)):
            r, rc = T.run(model, ids, pos, 4), T.run(_cut(model, 0, 1), ids, pos, 4)
            x = T.patched_input(model, r, 2, [(0, 1)], "total")
            assert torch.allclose(x, rc["resid"][2], rtol=0, atol=1e-12) is same


def test_via_mlp_is_zero_without_mlps_and_joint_removes_every_source():
    _, sd = _tiny(4, zero_mlp=True)
    ids, pos = T.repeated_distinct(16, 6, 4, 0)
    with torch.no_grad():
        r = T.run(sd, ids, pos, 4)
        clean = r["resid"][2]
        x = T.patched_input(sd, r, 2, [(0, 0), (1, 3)], "via_mlp")
        assert torch.equal(x, clean)
        srcs = [(m, h) for m in range(2) for h in range(4)]
        # all heads of layers 0, 1 removed, MLPs zero: the residual is the embeddings plus
        # the two attention biases
        x = T.patched_input(sd, r, 2, srcs, "total")
        want = r["resid"][0] + sd["transformer.h.0.attn.c_proj.bias"] + \
            sd["transformer.h.1.attn.c_proj.bias"]
        torch.testing.assert_close(x, want, rtol=0, atol=1e-12)


def test_truth_of_a_folder_runs_and_rule():
    """The truth pipeline on a random folder: every earlier source of every receiver, both
    paths, every kind; the rule's floor."""
    net, _ = _tiny(5, n_layer=2)
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        net.float().save_pretrained(d)
        sd, cfg = T.load(d)
        tab = T.receiver_table(sd, cfg, (1, 2), "induction", 5, n_seq=8)
    assert len(tab["single"]) == 3 * 2 * 4 and len(tab["joint"]) == 3 * 3
    assert T.passes(0.05, 0.01, 0.4) and not T.passes(0.03, 0.005, 0.4)
    assert not T.passes(0.05, 0.02, 0.4) and not T.passes(0.09, 0.001, None)


def test_zoo_folder_is_written_whole_and_then_read(tmp_path, monkeypatch):
    import dataclasses
    import json

    from transformers import GPT2LMHeadModel

    from rmtbase.errors import InputError
    from rmtbase.studies import _circuit_zoo as Z

    z = Z.RECIPES["mlp2s"]
    tiny = dataclasses.replace(z, base=dataclasses.replace(z.base, n_embd=16, n_head=2,
                                                          steps=3, batch=4, eval_batch=8))
    monkeypatch.setitem(Z.RECIPES, "tiny", tiny)
    f = Z.trained_folder("tiny", 0, tmp_path)
    info = json.loads((f / "train_info.json").read_text())
    assert info["attn0_scale"] == 0.1 and info["seed"] == 0
    GPT2LMHeadModel.from_pretrained(f)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny_seed0"]
    monkeypatch.setattr(Z, "train", lambda *a: pytest.fail("trained again"))
    assert Z.trained_folder("tiny", 0, tmp_path) == f
    with pytest.raises(InputError, match="unknown recipe"):
        Z.trained_folder("nope", 0, tmp_path)


def test_scaled_attention_is_folded_into_the_saved_weights():
    """Training with layer 0's attention output scaled by a hook, then folding the factor into
    c_proj, gives a plain GPT-2 computing the hooked model's logits."""
    from rmtbase.studies import _circuit_zoo as Z

    net, _ = _tiny(6, n_layer=2)
    ids, pos = T.repeated_distinct(16, 5, 3, 0)
    hook = Z._scaled(net, 0.1)
    with torch.no_grad():
        want = net(input_ids=ids, position_ids=pos).logits
        hook.remove()
        plain = net(input_ids=ids, position_ids=pos).logits
        Z.fold_scale(net, 0.1)
        got = net(input_ids=ids, position_ids=pos).logits
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)
    assert not torch.allclose(plain, want, atol=1e-3)


def test_markov_data_follow_the_chain():
    """200 × 47 transitions of the chain: the empirical transition frequencies of the 5 most
    visited states within 5 binomial se of the matrix (fixed seed)."""
    from rmtbase.studies import _circuit_zoo as Z

    z = Z.RECIPES["markov3"]
    ids, pos, rep = Z.markov_batch(np.random.default_rng(0), 200, z)
    assert ids.shape == (200, z.base.seq_len) and not rep.any() and (ids[:, 1:] >= 1).all()
    assert (np.diff(pos, axis=1) == 1).all()
    p = Z.markov_matrix(z)
    np.testing.assert_allclose(p.sum(1), 1.0)
    a, b = ids[:, 1:-1].ravel(), ids[:, 2:].ravel()
    for s in np.argsort(-np.bincount(a, minlength=p.shape[0]))[:5]:
        nxt = np.bincount(b[a == s], minlength=p.shape[0]) / (a == s).sum()
        se = np.sqrt(p[s] * (1 - p[s]) / (a == s).sum())
        assert (np.abs(nxt - p[s]) <= 5 * se + 1e-12).all(), s
