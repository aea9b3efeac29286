"""The counterfactual of path patching (rmtbase.circuits.core.counterfactual): each change ``Δ`` as
written in its definition; the Patcher's mean and resample effects equal effects of residuals
built here by hand from the captured outputs (the fold, the exact recompute and the projection
fold alike); a source whose output is the same on every sequence has no effect under mean or
resample ablation whatever zero ablation says; the confirmation rule's ``depends``; the
faithfulness of a circuit that keeps every source is 1. Random-weight models, no network."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from rmtbase.circuits.core.capture import Captured, capture  # noqa: E402
from rmtbase.circuits.core.counterfactual import Counterfactual, other, partners  # noqa: E402
from rmtbase.circuits.core.heads import HeadModel  # noqa: E402
from rmtbase.circuits.core.receiver import Patcher  # noqa: E402
from rmtbase.circuits.head.sequences import repeated_sequences  # noqa: E402
from rmtbase.errors import InputError  # noqa: E402


def _gpt2(seed=3):
    torch.manual_seed(seed)
    cfg = transformers.GPT2Config(n_layer=3, n_head=4, n_embd=32, vocab_size=40, n_positions=64,
                                  bos_token_id=0, eos_token_id=0, attn_implementation="eager")
    net = transformers.GPT2LMHeadModel(cfg)
    with torch.no_grad():
        for name, p in net.named_parameters():
            if p.ndim == 2 and "wte" not in name and "wpe" not in name:
                p.mul_(8.0)
    return net.eval()


def test_each_counterfactual_change_is_its_definition():
    u = torch.randn(6, 5, 3, generator=torch.Generator().manual_seed(0))
    # exact: zero's change is its input itself (no arithmetic)
    assert torch.equal(Counterfactual("zero", 6).delta(u), u)
    mean = Counterfactual("mean", 6).delta(u)
    for n in range(6):  # the mean of the other five sequences, position by position
        others = torch.cat([u[:n], u[n + 1:]])
        torch.testing.assert_close(mean[n], u[n] - others.mean(0))
    cf = Counterfactual("resample", 6)
    assert cf.pairings == 4 and Counterfactual("resample", 3).pairings == 2
    for p in range(cf.pairings):
        got = cf.delta(u, p)
        for n in range(6):  # pairing p reads sequence (n + p + 1) mod N at the same position
            assert torch.equal(got[n], u[n] - u[(n + p + 1) % 6])  # exact: copies, one IEEE subtraction
    assert partners(range(6), 6, 1).tolist() == [2, 3, 4, 5, 0, 1]
    torch.testing.assert_close(cf.delta(u, None),
                               sum(cf.delta(u, p) for p in range(4)) / 4)
    assert other("mean") == "resample" and other("resample") == "mean"
    with pytest.raises(InputError, match="counterfactual is one of"):
        Counterfactual("gaussian", 6)


def _by_hand(pt, layer, head, sources, kind, stat, ablation):
    """The effect of a residual built here: x − Σ (o − o_cf) per pairing, averaged."""
    cap, hm = pt.cap, pt.hm
    n = pt.seqs.n
    outs = []
    pairings = range(1, min(4, n - 1) + 1) if ablation == "resample" else [None]
    for p in pairings:
        x = cap.resid[layer].float().clone()
        for m, s in sources:
            o = cap.z[m][:, :, s, :].float() @ hm.source_weight(m, s).float()
            loo = (o.sum(0, keepdim=True) - o) / (n - 1)
            cfo = loo if ablation == "mean" else torch.roll(o, -p, 0)
            x -= o - cfo
        outs.append(pt.effects_from_residuals(layer, head, [x], kind, stat)[0].per_sequence)
    return np.mean(outs, axis=0)


@pytest.mark.parametrize("ablation", ["mean", "resample"])
def test_patcher_effects_equal_residuals_built_by_hand(ablation):
    net = _gpt2()
    hm = HeadModel(net)
    seqs = repeated_sequences(net.config, n=6, batch=8, seed=11)
    cap, _ = capture(hm, seqs, progress=False)
    pt = Patcher(hm, cap, seqs, ablation)
    assert not pt.fold(2).exact  # the low-rank fold is what is compared
    for sources, kind, stat in (([(0, 1)], "k", "prev_token"), ([(1, 2), (0, 3)], "q", None),
                                ([(1, 0)], "v", None)):
        got = pt.effect(2, 3, sources, kind, stat)
        want = _by_hand(pt, 2, 3, sources, kind, stat, ablation)
        np.testing.assert_allclose(got.per_sequence, want, atol=2e-5)
    # the joint (every earlier head at once) by hand too
    everyone = [(m, s) for m in range(2) for s in range(4)]
    np.testing.assert_allclose(pt.joint(2, 3, "k", "prev_token").per_sequence,
                               _by_hand(pt, 2, 3, everyone, "k", "prev_token", ablation),
                               atol=2e-5)


def test_a_constant_source_has_no_effect_except_under_zero():
    """Source L0H1's captured output made the same on every sequence (its first sequence's,
    scaled up ×20): mean and resample see no change of the receiver (exactly 0), zero ablation
    a large one, and the screen linearised around each counterfactual says the same."""
    from rmtbase.circuits.core import screen as S

    net = _gpt2()
    hm = HeadModel(net)
    seqs = repeated_sequences(net.config, n=6, batch=8, seed=11)
    cap, _ = capture(hm, seqs, progress=False)
    z = [t.clone() for t in cap.z]
    z[0][:, :, 1, :] = 20.0 * z[0][:1, :, 1, :]
    resid = [t.clone() for t in cap.resid]
    extra = (z[0][:, :, 1, :] - cap.z[0][:, :, 1, :]).float() @ hm.source_weight(0, 1).float()
    for layer in range(1, hm.n_layers):  # the residual carries the constant head's output
        resid[layer] = resid[layer] + extra
    const = Captured(resid, z, cap.scale)
    effects, attrs = {}, {}
    for ablation in ("zero", "mean", "resample"):
        pt = Patcher(hm, const, seqs, ablation)
        effects[ablation] = pt.effect(2, 3, [(0, 1)], "k", "prev_token")
        attrs[ablation] = S.attribution(pt, 2, 3, "k", "prev_token")[0, 1]
    assert effects["mean"].effect == 0.0 and effects["resample"].effect == 0.0
    assert abs(effects["zero"].effect) > 1e-3
    assert attrs["mean"] == 0.0 and attrs["resample"] == 0.0 and attrs["zero"] != 0.0


def _length(hm, seqs, ablation="mean"):
    """The search's own capture of ``seqs`` with its patcher under ``ablation`` (what
    :mod:`rmtbase.circuits.head.faithfulness` and :mod:`.output_loss` are handed)."""
    from rmtbase.circuits.head.run import _Length

    cap, totals = capture(hm, seqs, progress=False)
    return _Length(hm, seqs, cap, totals, ablation)


def _row(e, e_other=None, e_zero=None, se=0.01):
    return {"effect_causal": e, "effect_se": se, "score_to": 0.8, "metric": "induction",
            "layer_to": 2, "head_to": 0, "kind": "k",
            "effect_resample": e if e_other is None else e_other,
            "effect_zero": e if e_zero is None else e_zero, "effect_zero_se": se}


def test_the_rule_confirms_only_what_both_counterfactuals_keep():
    """Rule floor here 0.08 (10 % of 0.8) and 3 se = 0.03. A row at 0.3 kept at 0.2 by resample
    is confirmed; kept at 0.1 (< half) it depends on the counterfactual; of the other sign,
    too; so does a row at 0.1 kept at 0.06 (over half, under the floor); a row at 0.01 under
    mean that passes at 0.5 under zero depends on zero only; under zero ablation no check
    applies."""
    from rmtbase.circuits.core.receiver import Effect as Eff
    from rmtbase.circuits.head.find import judge

    joint = Eff(0.5, 0.01, 0.8, "induction", np.zeros(4))
    got = judge([_row(0.3, 0.2), _row(0.3, 0.1), _row(0.3, -0.3), _row(0.01, None, 0.5),
                 _row(0.01, None, 0.01), _row(0.1, 0.06)], joint, labelled=True, n_seq=16,
                ablation="mean")
    assert [r["confirmed"] for r in got] == [True, False, False, False, False, False]
    # the last: resample keeps 60 % but falls under the rule's floor (0.08)
    assert [r["depends"] for r in got] == ["", "counterfactual", "counterfactual", "zero", "",
                                           "counterfactual"]
    got = judge([_row(0.3, 0.0)], joint, labelled=True, n_seq=16, ablation="zero")
    assert got[0]["confirmed"] and got[0]["depends"] == ""
    # an unlabelled receiver's row that stands is a dependency, never confirmed
    got = judge([_row(0.3, 0.2)], joint, labelled=False, n_seq=16, ablation="mean")
    assert got[0]["dependency"] and not got[0]["confirmed"]


def test_zero_only_is_said_after_the_other_counterfactual_was_measured():
    """A row under the floor (0.08) under mean that passes under zero has its resample effect
    measured (``measure_counterfactuals`` asks for it, beside the rows passing under mean) and
    is called ``zero`` only when that effect is under the floor too: at 0.3 under resample the
    non-zero counterfactuals disagree (``counterfactual``); unmeasured (NaN) it gets no word."""
    from rmtbase.circuits.core.receiver import Effect as Eff
    from rmtbase.circuits.head.find import judge, measure_counterfactuals

    effects = {"zero": [0.5, 0.5, 0.01, 0.3], "resample": [0.01, 0.3, 9.0, 0.2]}
    asked = {}

    def effects_of(ablation, idx):
        asked[ablation] = list(idx)
        return [Eff(effects[ablation][i], 0.01, 0.8, "induction", np.zeros(4)) for i in idx]

    rows = [{k: v for k, v in _row(e).items() if not k.startswith("effect_") or k == "effect_se"}
            | {"effect_causal": e} for e in (0.01, 0.01, 0.01, 0.3)]
    measure_counterfactuals(effects_of, rows, 16, "mean")
    assert asked == {"zero": [0, 1, 2, 3], "resample": [0, 1, 3]}  # row 2 passes neither
    assert np.isnan(rows[2]["effect_resample"]) and rows[0]["effect_resample"] == 0.01
    joint = Eff(0.5, 0.01, 0.8, "induction", np.zeros(4))
    got = judge(rows, joint, labelled=True, n_seq=16, ablation="mean")
    assert [r["depends"] for r in got] == ["zero", "counterfactual", "", ""]
    assert got[3]["confirmed"]
    unmeasured = _row(0.01, np.nan, 0.5)
    assert judge([unmeasured], joint, labelled=True, n_seq=16, ablation="mean")[0][
        "depends"] == ""


def test_faithfulness_of_every_source_kept_is_one_and_of_none_is_the_joint():
    """measure() with C = every earlier head: F = 1 exactly (nothing replaced); with C = ∅ the
    q/k value is the receiver's score with every earlier head replaced, i.e. 1 − joint/score
    (the attention-only GPT-2 here: no MLP, so the direct sum is the whole change)."""
    from rmtbase.circuits.head import faithfulness

    net = _gpt2()
    with torch.no_grad():
        for blk in net.transformer.h:
            blk.mlp.c_proj.weight.zero_()
            blk.mlp.c_proj.bias.zero_()
    hm = HeadModel(net)
    seqs = repeated_sequences(net.config, n=6, batch=8, seed=11)
    run = _length(hm, seqs)
    rec = (2, 3, "prev_token")
    everyone = [(m, s) for m in range(2) for s in range(4)]
    got = faithfulness.measure(run, rec, "k", everyone, mlps=False)
    assert got["faithfulness"] == pytest.approx(1.0, abs=1e-6)
    joint = run.pt.joint(2, 3, "k", "prev_token")
    base = np.asarray(run.pt.base_scores(2, 3, "prev_token"))
    want = (base - joint.per_sequence).mean() / base.mean()
    assert got["faithfulness_empty"] == pytest.approx(want, abs=1e-6)
    v = faithfulness.measure(run, rec, "v", everyone, mlps=False)
    assert v["faithfulness"] == pytest.approx(1.0, abs=1e-6)


def test_predictable_positions_are_those_a_copy_predicts():
    from rmtbase.circuits.head.output_loss import predictable

    ids = np.array([[0, 5, 6, 7, 5, 6, 7], [0, 1, 1, 1, 2, 3, 2]])
    got = predictable(ids)
    # row 0: the repeated half's queries 4 (5 -> 6) and 5 (6 -> 7); row 1: query 2 (1 -> 1)
    assert got[0].tolist() == [False, False, False, False, True, True, False]
    assert got[1].tolist() == [False, False, True, False, False, False, False]


def test_output_losses_match_a_forward_with_the_heads_output_replaced_by_hand():
    """loss_receivers_ablated under mean: an independent forward in which a pre-hook on the
    receiver layer's c_proj replaces the head's slice of its input by its mean over the
    other sequences at each position; loss_clean from the model's own logits; a circuit whose
    receiver keeps every input clean (no edges) leaves the loss at loss_clean."""
    from rmtbase.circuits.head.output_loss import losses, predictable

    net = _gpt2()
    hm = HeadModel(net)
    seqs = repeated_sequences(net.config, n=6, batch=8, seed=11)
    run = _length(hm, seqs)
    got = losses(run, {(2, 1): {}})
    ids = torch.from_numpy(seqs.ids)
    mask = predictable(seqs.ids)[:, :-1]

    def nll(logits):
        lp = torch.log_softmax(logits[:, :-1].double(), -1)
        x = -lp.gather(-1, ids[:, 1:, None]).squeeze(-1).numpy()
        return ((x * mask).sum(1) / mask.sum(1)).mean()

    with torch.no_grad():
        clean = nll(net(input_ids=ids).logits)
    assert got["loss_clean"][0] == pytest.approx(clean, rel=1e-6)
    assert got["loss_circuit_ablated"][0] == pytest.approx(clean, rel=1e-5)

    dh = hm.head_dim

    def pre(_mod, args):
        z = args[0].clone()
        sl = z[..., 1 * dh:2 * dh]
        z[..., 1 * dh:2 * dh] = (sl.sum(0, keepdim=True) - sl) / (sl.shape[0] - 1)
        return (z,)

    h = net.transformer.h[2].attn.c_proj.register_forward_pre_hook(pre)
    try:
        with torch.no_grad():
            want = nll(net(input_ids=ids).logits)
    finally:
        h.remove()
    assert got["loss_receivers_ablated"][0] == pytest.approx(want, rel=1e-4)
    assert abs(want - clean) > 1e-4  # the replacement changes the loss: the test has teeth


def test_a_base_model_with_a_tied_head_gets_the_lm_heads_logits():
    """rmtbase loads GGUF files and folders as base models: their logits are the final hidden
    state times the (tied) input embedding, equal to the LM head's own."""
    from rmtbase.circuits.core.readout import unembed

    net = _gpt2()
    ids = torch.from_numpy(repeated_sequences(net.config, n=6, batch=2, seed=1).ids)
    at = torch.tensor([0, 3, 5])
    with torch.no_grad():
        want = net(input_ids=ids).logits
        hidden = net.transformer(input_ids=ids).last_hidden_state
        for n in range(ids.shape[0]):
            got = unembed(net.transformer, hidden[n, at])
            torch.testing.assert_close(got, want[n, at], rtol=1e-5, atol=1e-4)
    net.transformer.config.tie_word_embeddings = False
    with torch.no_grad():
        assert unembed(net.transformer, hidden[0, at]) is None
