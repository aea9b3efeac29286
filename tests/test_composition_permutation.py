"""The permutation null of head–head composition (rmtbase.scoring.composition.permutation):
the batched permuted path computes the same scores as the model's, random models are
calibrated whatever their entry law and storage, a planted circuit is found."""

from __future__ import annotations

import numpy as np
import pytest
from _null_flags import assert_composition_rates

import rmtbase
from rmtbase.scoring.composition import permutation as P
from rmtbase.scoring.composition.run import assemble, composition_from_factors


def _gpt2(path, n_layer, n_head, n_embd, seed=0, law="gaussian"):
    """An untrained GPT-2; ``law="student_t"``: every attention weight replaced by i.i.d.
    Student-t(3) entries (scale 0.02) and the model stored in bfloat16."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    cfg = GPT2Config(n_layer=n_layer, n_head=n_head, n_embd=n_embd, vocab_size=64,
                     n_positions=32, bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(cfg)
    if law == "student_t":
        t = torch.distributions.StudentT(3.0)
        with torch.no_grad():
            for block in model.transformer.h:
                for lin in (block.attn.c_attn, block.attn.c_proj):
                    lin.weight.copy_(0.02 * t.sample(lin.weight.shape))
        model = model.to(torch.bfloat16)
    model.save_pretrained(path)
    return path


def _factors(rng, n_l, n_h, dh, d):
    return [[rng.normal(size=(n_h, dh, d)).astype(np.float32) for _ in range(4)]
            for _ in range(n_l)]


def test_identity_permutations_give_the_models_scores(monkeypatch):
    """With every permutation the identity, each permuted draw is the model itself: the
    batched path (vmapped over draws, another compiled program) equals
    composition_from_factors within float32 rounding (1e-5 relative), every pair's count of
    draws ≥ s is B or close (ties broken by rounding) and the median is s."""
    rng = np.random.default_rng(1)
    n_l, n_h, dh, d, n_kv = 3, 4, 8, 32, 2
    fac = _factors(rng, n_l, n_h, dh, d)
    for f in fac:  # GQA: keys and values shared by pairs of query heads
        f[1] = np.repeat(f[1][::2], 2, axis=0)
        f[3] = np.repeat(f[3][::2], 2, axis=0)
    layers = [tuple(f) for f in fac]
    comp, _, _ = composition_from_factors(layers, n_kv)

    def ident(seed, chunk, n, count):
        return {x: np.tile(np.arange(n, dtype=np.int32), (count, 1)) for x in P.FACTORS}

    monkeypatch.setattr(P, "permutations", ident)
    c = P.permutation_counts(layers, n_kv, comp, draws=5, seed=0)
    ok = np.isfinite(comp)
    assert ok.sum() == 3 * 3 * 16
    np.testing.assert_allclose(c["median"][ok], comp[ok], rtol=1e-5)
    np.testing.assert_allclose(c["m1"][ok], comp[ok] ** 2, rtol=2e-5)


@pytest.mark.parametrize("law", [pytest.param("gaussian", marks=pytest.mark.slow),
                                 "student_t"], ids=["gaussian-fp32", "t3-bf16"])
def test_random_gpt2_is_calibrated_under_permutation(tmp_path, law):
    """Untrained GPT-2, 5 layers × 16 heads, d = 128 (2,560 ordered pairs per kind), 200
    permutations: Gaussian init in float32, and i.i.d. Student-t(3) entries stored in bfloat16
    (a heavy-tailed law on the bf16 lattice: the permutation null is exact for any i.i.d.
    entries). P(p ≤ 0.05) = 10/201 = 0.0498 exactly; the rate of each kind within 2 binomial
    se (√(0.05·0.95/2560) = 0.0043; pairs sharing a head are dependent, so this se is a
    floor) of 0.05; no BH flag."""
    m = _gpt2(tmp_path / "g", 5, 16, 128, seed=1, law=law)
    ds = rmtbase.composition(m, null="permutation", draws=200, seed=3)
    assert ds.attrs["null_kind"] == "permutation"
    assert_composition_rates(ds, 2560)
    eff = ds.composition_effect.values
    assert abs(np.nanmedian(eff) - 1.0) < 0.02  # ratio to the pair's own permuted median


def test_planted_circuit_is_flagged_under_permutation():
    """Random factors (3 layers × 8 heads, d = 128, d_h = 16), layer 2 head 5's W_K rows in
    the span of layer 0 head 3's W_OV output; 2,000 permutations. That pair's K-composition:
    no permuted draw reaches it (p = 1/2001 ≤ 1e-3), flagged by BH within its (kind, layer
    pair) family of 64 (q = 64/2001 = 0.032); BH over all 576 entries cannot flag at 2,000
    draws (it needs 11,519, draws_to_flag) and flags nothing; of the 575 other entries at most
    0.001·575 + 3·√(0.001·575) ≈ 3 have p ≤ 1e-3."""
    rng = np.random.default_rng(0)
    n_l, n_h, dh, d = 3, 8, 16, 128
    fac = _factors(rng, n_l, n_h, dh, d)
    fac[2][1][5] = (rng.normal(size=(dh, dh)) @ fac[0][2][3]).astype(np.float32)
    layers = [tuple(f) for f in fac]
    comp, over, norms = composition_from_factors(layers, n_h)
    c = P.permutation_counts(layers, n_h, comp, draws=2000, seed=0)
    p = P.permutation_p(comp, c)
    ds = assemble(comp, over, norms, None, p=p, median=c["median"], attrs={"d": d, "d_h": dh})
    assert ds.attrs["null_kind"] == "permutation"  # null_sorted=None is the permutation null
    sel = dict(kind="k", layer_from=0, head_from=3, layer_to=2, head_to=5)
    assert float(ds.composition_p.sel(**sel)) == pytest.approx(1 / 2001)
    assert float(ds.composition_q_family.sel(**sel)) <= 0.05
    assert P.draws_to_flag(576) == 11519
    assert int(ds.composition_flag.sum()) == 0
    assert float(ds.composition_effect.sel(**sel)) > 2
    small = int((ds.composition_p <= 1e-3).sum()) - 1
    assert small <= 0.001 * 575 + 3 * np.sqrt(0.001 * 575)
    # the Gaussian null's moments are not this null's: not stated; no tail beyond the draws
    assert not any(k.startswith("null_var_s2") or k == "null_exact_mean_s2" for k in ds.attrs)
    assert "no tail beyond the draws" in ds.composition_p_tail.attrs["definition"]


def test_permutation_plan_counts_the_draws():
    """The stated work is draws × the layer pairs' GEMMs (LLaMA-3-8B shape: 102 TFLOP per
    draw, 496 layer pairs of 2·(32 + 16)·128·4096·32·128 FLOP)."""
    one = P.plan(32, 32, 8, 4096, 128, 1)
    assert one["gemm_flops"] == 496 * 2.0 * 48 * 128 * 4096 * 32 * 128
    assert P.plan(32, 32, 8, 4096, 128, 1000)["gemm_flops"] == 1000 * one["gemm_flops"]


def test_bad_null_is_refused(tmp_path):
    from rmtbase.errors import InputError

    m = _gpt2(tmp_path / "g", 2, 2, 16)
    with pytest.raises(InputError, match="^null must be one of gaussian, permutation"):
        rmtbase.composition(m, null="uniform")
