"""The circuit search's screen and its guards against chance (rmtbase.circuits.core.screen,
tests/_hooked_paths, .labels): the linear form of the probe's statistics equals the probe's own
window_sums; the first-order attribution tracks the exact patch; the via-MLP change equals an
independent loop over the model's blocks; a label needs a statistic above uniform attention
and enough queries, so an untrained model, a tiny vocabulary and a two-window text confirm
nothing. Random-weight GPT-2s from configs, no network."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from rmtbase.circuits.core.capture import capture  # noqa: E402
from rmtbase.circuits.core.heads import HeadModel  # noqa: E402
from rmtbase.circuits.core.receiver import Patcher, sequence_scores  # noqa: E402
from rmtbase.circuits.head.sequences import Sequences, repeated_sequences  # noqa: E402


def _gpt2(scale=4.0, n_layer=3, vocab=40, seed=3):
    torch.manual_seed(seed)
    cfg = transformers.GPT2Config(n_layer=n_layer, n_head=4, n_embd=32, vocab_size=vocab,
                                  n_positions=64, bos_token_id=0, eos_token_id=0,
                                  attn_implementation="eager")
    net = transformers.GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():
        for name, p in net.named_parameters():
            if p.ndim == 2 and "wte" not in name and "wpe" not in name:
                p.mul_(scale)
    return net


@pytest.fixture(scope="module")
def setup():
    net = _gpt2()
    hm = HeadModel(net)
    seqs = repeated_sequences(net.config, n=6, batch=10, seed=1)
    cap, _ = capture(hm, seqs, progress=False)
    return net, hm, seqs, cap


def test_the_linear_form_of_each_statistic_equals_the_probes_window_sums(setup):
    """statistic_weights: Σ A W / count per sequence equals sequence_scores (the probe's
    window_sums) on random patterns, for each linear statistic, to 1e-12."""
    from rmtbase.circuits.core.screen import LINEAR, statistic_weights

    _, _, seqs, _ = setup
    rng = np.random.default_rng(0)
    t = seqs.length
    a = rng.random((seqs.n, t, t)) * np.tril(np.ones((t, t)))
    a /= a.sum(-1, keepdims=True)
    for stat in LINEAR:
        w, cnt = statistic_weights(stat, seqs)
        got = (a * w).sum((1, 2)) / np.where(cnt > 0, cnt, np.nan)
        np.testing.assert_allclose(got, sequence_scores(a, seqs, stat), rtol=0, atol=1e-12)


def test_attribution_tracks_the_exact_effect_of_every_source(setup):
    """For receiver L2H1, every earlier source's first-order estimate against its exact
    direct patch: q and k (the previous-token drop) within 15 % of the largest effect or
    2e-4; v (its first-order output change) within a factor 0.5–1.5 of the exact one."""
    from rmtbase.circuits.core.screen import attribution

    _, _, seqs, cap = setup
    pt = Patcher(HeadModel(setup[0]), cap, seqs, "zero")
    srcs = [(m, s) for m in range(2) for s in range(4)]
    for kind in "qkv":
        st = None if kind == "v" else "prev_token"
        est = attribution(pt, 2, 1, kind, st).ravel()
        exact = np.array([e.effect for e in pt.effects(2, 1, [[x] for x in srcs], kind, st)])
        if kind == "v":
            assert np.all((est > 0.5 * exact) & (est < 1.5 * exact)), (est, exact)
        else:
            tol = max(0.15 * np.abs(exact).max(), 2e-4)
            assert np.abs(est - exact).max() <= tol, (est, exact)
            assert np.abs(exact).max() > 2 * 2e-4  # the check has teeth


def test_the_via_mlp_change_equals_an_independent_loop_over_the_blocks(setup):
    """MLPPaths.changes for source L0H1 into layer 2: the residual of a loop over GPT-2's
    blocks with each attention output held at its captured value (c_proj of the captured z),
    the source's share removed at layer 0 and added back at the end, to 1e-5 of its scale;
    with nothing removed the hooked run reproduces the capture exactly."""
    from _hooked_paths import MLPPaths

    net, hm, seqs, cap = setup
    paths = MLPPaths(hm, seqs, cap)
    got = paths.changes([(0, 1)], [2])[(0, 1)][2]
    blocks = net.transformer.h
    with torch.no_grad():
        o = cap.z[0][:, :, 1, :] @ hm.source_weight(0, 1)
        x = cap.resid[0].clone()
        for j in range(2):
            attn = blocks[j].attn.c_proj(cap.z[j].reshape(*cap.z[j].shape[:2], -1))
            mid = x + attn - (o if j == 0 else 0)
            x = mid + blocks[j].mlp(blocks[j].ln_2(mid))
        want = x - cap.resid[2] + o
    scale = float(want.abs().max())
    assert scale > 1e-2 and float((got - want).abs().max()) <= 1e-5 * scale
    base = paths._stacked(1, None, [2], 2)[2]
    assert float((base - cap.resid[2]).abs().max()) == 0.0


def test_chance_levels_are_those_of_uniform_attention():
    """chance_levels: prev_token, self and first_token of uniform causal attention are
    mean 1/(i+1) over the content queries i >= 1 (BOS at 0 is not a content query's previous
    token: prev_token counts from i = 2), computed here in closed form."""
    from types import SimpleNamespace

    from rmtbase.circuits.head.labels import chance_levels

    seqs = repeated_sequences(SimpleNamespace(vocab_size=30, bos_token_id=0), n=5, batch=3)
    chance, counts = chance_levels(seqs)
    t = seqs.length
    assert chance["first_token"] == pytest.approx(np.mean([1 / (i + 1) for i in range(1, t)]))
    assert chance["self"] == pytest.approx(chance["first_token"])
    assert chance["prev_token"] == pytest.approx(np.mean([1 / (i + 1) for i in range(2, t)]))
    assert counts["prev_token"] == 3 * (t - 2) and counts["first_token"] == 3 * (t - 1)
    # distinct halves: each second-half query has one induction target
    assert counts["induction"] == 3 * 5


def test_a_label_needs_more_than_chance_and_enough_queries():
    """label_heads: a previous-token score of 0.45 labels a head when chance is 0, not when
    chance is 0.2 (it needs 0.2 + 0.4 x 0.8 = 0.52), nor when it pools fewer than 100
    queries."""
    import xarray as xr

    from rmtbase.circuits.head.labels import STATISTIC, label_heads

    probe = xr.Dataset({s: (("layer", "head"), np.zeros((2, 1))) for s in STATISTIC.values()},
                       coords={"layer": [0, 1], "head": [0]})
    probe["prev_token"] = (("layer", "head"), np.array([[0.45], [0.60]]))
    assert list(label_heads(probe)["label"].values.ravel()) == ["previous-token"] * 2
    chance = {s: 0.2 for s in STATISTIC.values()}
    assert list(label_heads(probe, chance=chance)["label"].values.ravel()) == [
        "none", "previous-token"]
    counts = {s: 99 for s in STATISTIC.values()}
    assert set(label_heads(probe, counts=counts)["label"].values.ravel()) == {"none"}


def _composition(net):
    from rmtbase.scoring.composition.run import composition

    return composition(net, draws=100, progress=False)


def test_an_untrained_model_a_tiny_vocabulary_and_two_windows_confirm_nothing(tmp_path):
    """An untrained GPT-2 (std 0.02: near-uniform attention) at the default lengths; a
    2-token vocabulary (no repeat length fits: nothing labelled, said); and two 8-token
    windows given as text sequences (too few queries for a label, too few sequences for a
    confirmation): no receiver, nothing confirmed."""
    from rmtbase.circuits import find_circuits
    from rmtbase.report.circuit_lines import found_lines

    net = _gpt2(scale=1.0)
    net.save_pretrained(tmp_path / "g")
    comp = _composition(str(tmp_path / "g"))
    ds = find_circuits(str(tmp_path / "g"), comp, progress=False)
    assert set(ds["label"].values.ravel()) <= {"none"} and ds.sizes["candidate"] == 0
    tiny = _gpt2(scale=8.0, vocab=2)
    tiny.save_pretrained(tmp_path / "t")
    ds = find_circuits(str(tmp_path / "t"), _composition(str(tmp_path / "t")), progress=False)
    assert ds.sizes["candidate"] == 0 and ds.attrs["repeat_lengths"] == ""
    lines = found_lines(comp, [], patched=True, meta=dict(ds.attrs))
    assert any(x.startswith("no circuit found: no head after layer 0 reached a behaviour")
               for x in lines)
    peaked = _gpt2(scale=8.0)
    rng = np.random.default_rng(0)
    ids = rng.integers(1, 40, size=(2, 8))
    ids[:, 4:] = ids[:, :4]  # repeats inside each window, as prose has
    text = Sequences(ids, np.ones(8, bool), "text", "2 windows of 8 tokens")
    ds = find_circuits(peaked, _composition(peaked), sequences=text, progress=False)
    assert set(ds["label"].values.ravel()) == {"none"} and ds.sizes["candidate"] == 0


@pytest.mark.parametrize("kind", ["gemma2", "olmo2", "gpt_neox", "bloom", "granite",
                                  "falcon_gqa", "phi"])
def test_without_mlps_nothing_travels_through_them_in_any_family(kind):
    """Post-norm (Gemma-2, OLMo-2), parallel (GPT-NeoX, Phi, Falcon), ALiBi (Bloom) and a
    residual multiplier (Granite): with every MLP weight zeroed, the via-MLP change of a
    source is 0 (to 1e-5 of the direct output's scale); with the MLPs live it is not, and
    find_circuits runs every path on an explicit receiver with finite effects."""
    from _hooked_paths import MLPPaths
    from test_circuits_families import _ids, _mlp, _net

    from rmtbase.circuits import find_circuits

    net = _net(kind)
    hm = HeadModel(net)
    ids = _ids(net, n=4, t=12).numpy()
    seqs = Sequences(ids, np.ones(ids.shape[1], bool), "repeated_random_tokens", kind)
    cap, _ = capture(hm, seqs, progress=False)
    direct = float(Patcher(hm, cap, seqs).source_output(0, 1).abs().max())
    live = MLPPaths(hm, seqs, cap).changes([(0, 1)], [2])[(0, 1)][2]
    assert float(live.abs().max()) > 1e-3 * direct
    with torch.no_grad():
        for li in range(hm.n_layers):
            blk = hm.layers[li]  # the MLP itself (a post-MLP norm of Gemma scales by 1 + w)
            for p in (getattr(blk, "mlp", None) or _mlp(blk)).parameters():
                p.zero_()
    cap, _ = capture(hm, seqs, progress=False)
    dead = MLPPaths(hm, seqs, cap).changes([(0, 1)], [2])[(0, 1)][2]
    assert float(dead.abs().max()) <= 1e-5 * direct
    comp = _composition(net)
    ds = find_circuits(_net(kind), comp, sequences=seqs, receivers_of_interest=[(2, 1)],
                       mlp_paths=True, progress=False)
    assert set(ds["path"].values) == {"direct", "via_mlp"}
    assert np.isfinite(ds["effect_causal"].values).all()


@pytest.mark.parametrize("kind", ["gpt2", "llama", "gemma2", "stablelm", "phi", "cohere"])
def test_the_folds_first_order_equals_the_gradient_through_the_residual(kind):
    """fold_dots (∂f/∂u then the fold's terms linear in a source) equals source_dots (the
    gradient with respect to the residual, one GEMM a layer) for q, k and v to 4e-6 of the
    largest estimate, in families with LayerNorm, RMSNorm, Gemma's 1 + w, a post-norm scale,
    per-head QK-norms and partial rotary. Both are float32: against the same dots in float64
    the fold is off by up to 9e-7 of the largest here (cohere's k), the general route by up
    to 3e-7; the bound leaves room for other CPUs' kernels. Leaving out the fold's norm
    term errs by 5e-5 (cohere) to 0.3 (gpt2) of the largest."""
    from test_circuits_families import _ids, _net

    from rmtbase.circuits.core import screen as S

    net = _net(kind)
    hm = HeadModel(net)
    ids = _ids(net, n=4, t=12).numpy()
    ids[:, 6:] = ids[:, :6]
    seqs = Sequences(ids, np.ones(12, bool), "repeated_random_tokens", kind)
    cap, _ = capture(hm, seqs, progress=False)
    pt = Patcher(hm, cap, seqs, "zero")
    assert pt.fold(2).linearisable
    for which in "qkv":
        st = None if which == "v" else "prev_token"
        a = S.fold_dots(pt, 2, 1, which, *S.input_metrics(pt, 2, 1, which, st))
        fs, combine = S.metrics(pt, 2, 1, which, st)
        b = S.source_dots(pt, S.gradients(pt, 2, fs), 2, combine)
        assert np.abs(b).max() > 0
        assert np.abs(a - b).max() <= 4e-6 * np.abs(b).max() + 1e-12, (which, a, b)


def test_the_v_screen_through_the_fold_is_the_first_order_output_change(setup):
    """fold_value_changes: for one source scaled by a small t, the exact output change is
    t times the first-order value to 2 % (the fold's first-order term is the derivative)."""
    from rmtbase.circuits.core.screen import fold_value_changes

    net, hm, seqs, cap = setup
    pt = Patcher(hm, cap, seqs, "zero")
    est = fold_value_changes(pt, 2, 1)
    t = 1e-2
    small = [z.clone() for z in cap.z]
    small[0][:, :, 1, :] *= t  # source L0H1 at a hundredth of its output
    from rmtbase.circuits.core.capture import Captured

    pt_small = Patcher(hm, Captured(cap.resid, small, cap.scale), seqs, "zero")
    exact = pt_small.effect(2, 1, [(0, 1)], "v", None).effect
    assert exact == pytest.approx(t * est[0, 1], rel=0.02)


def test_every_source_whose_estimate_nears_the_rule_is_patched_exactly():
    """exact_sources: the top k by weights, the top k by |attribution| and every source whose
    |attribution| reaches ATTRIBUTION_FLOOR of the rule's floor; all with exact_all."""
    from rmtbase.circuits.head.find import ATTRIBUTION_FLOOR, exact_sources

    ranked = [(0, s, s + 1, 1.0 - 0.1 * s) for s in range(6)]   # weights rank 0, 1, 2, …
    attr = np.array([[0.0, 0.0, 0.0, 0.5, 0.2, 0.06]])           # (layer, H)
    floor = 0.1
    got = exact_sources(ranked, attr, 1, False, floor)
    want = {(0, 0), (0, 3), (0, 4)} | ({(0, 5)} if 0.06 >= ATTRIBUTION_FLOOR * floor else set())
    assert set(got) == want
    assert [s for _, s in got] == sorted(s for _, s in got)  # weight order
    assert set(exact_sources(ranked, attr, 1, False)) == {(0, 0), (0, 3)}  # no floor given
    assert len(exact_sources(ranked, attr, 1, True, floor)) == 6


def test_one_estimator_in_d_space_factored_and_by_position():
    """attribution.dots, where both searches' screens end: ⟨g_r, Δ_s⟩ summed over positions
    and d equals an explicit float64 sum; the factored form (δ_s before its output weight W_s,
    one gradient for every prompt) equals the d-space form of Δ_s = δ_s W_s; by position it
    sums to the whole."""
    from rmtbase.circuits.core.attribution import dots

    gen = torch.Generator().manual_seed(3)
    n, r, s, t, d, dh = 3, 4, 5, 6, 8, 2
    g = torch.randn((n, r, t, d), generator=gen, dtype=torch.float64)
    small = torch.randn((n, s, t, dh), generator=gen, dtype=torch.float64)
    w = torch.randn((s, dh, d), generator=gen, dtype=torch.float64)
    delta = torch.stack([small[:, i] @ w[i] for i in range(s)], 1)  # (n, s, t, d)
    want = np.array([[[float((g[a, b] * delta[a, c]).sum()) for c in range(s)]
                      for b in range(r)] for a in range(n)])
    np.testing.assert_allclose(dots(g, delta).numpy(), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dots(g, small, weight=w).numpy(), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dots(g, delta, by_position=True).sum(-1).numpy(), want,
                               rtol=1e-12, atol=1e-12)
    shared = dots(g[:1], small, weight=w).numpy()  # one gradient, every prompt's change
    np.testing.assert_allclose(shared, dots(g[:1].expand(n, -1, -1, -1), delta).numpy(),
                               rtol=1e-12, atol=1e-12)
