"""The entry-law (permutation) null: exact permutations, heads with non-Gaussian i.i.d. entries
score as null under it (but not under the Gaussian null), and trained MiniLM keeps its
spectral departures."""

from __future__ import annotations

import numpy as np
import pytest
from _null_flags import assert_no_head_flagged_at

D, H, L = 256, 8, 2


@pytest.fixture(scope="module")
def user_cache(module_cache):
    return module_cache


def test_permutations_are_uniform_and_reproducible():
    """Each permutation is a bijection; positions are uniform (χ² over where index 0 lands,
    2000 permutations of 50: p > 1e-4); same seed and chunk, same permutations."""
    from scipy import stats

    from rmtbase.scoring.nulls.permutation import permutations

    pq, pk = permutations(3, 0, 50, 2000)
    # exact: integers / booleans
    assert all(np.array_equal(np.sort(p), np.arange(50)) for p in pq[:20])
    where = np.argmax(pq == 0, axis=1)
    counts = np.bincount(where, minlength=50)
    assert stats.chisquare(counts).pvalue > 1e-4
    assert not np.array_equal(pq, pk)
    # exact: integers / booleans (permutations)
    np.testing.assert_array_equal(permutations(3, 0, 50, 5)[0], pq[:5])
    assert not np.array_equal(permutations(3, 1, 50, 5)[0], pq[:5])


def test_permutation_draws_equal_the_statistics_of_permuted_factors():
    """Draw b of head h is head_stats of the head's entries permuted by permutation b (checked
    against rmtbase.stats.head_stats on explicitly permuted matrices)."""
    import jax.numpy as jnp

    from rmtbase.scoring.nulls.permutation import permutation_null, permutations
    from rmtbase.stats import head_stats

    rng = np.random.default_rng(0)
    wq = rng.standard_normal((1, 2, 8, 64)).astype(np.float32)
    wk = rng.standard_normal((1, 2, 8, 64)).astype(np.float32)
    out = permutation_null(wq, wk, draws=6, element_draws=3, seed=5)
    pq, pk = permutations(5, 0, 8 * 64, 6)
    for b in range(3):
        q = wq[0, 1].ravel()[pq[b]].reshape(8, 64)
        k = wk[0, 1].ravel()[pk[b]].reshape(8, 64)
        ref = head_stats(jnp.asarray(q), jnp.asarray(k), which=("qk",))
        for s in ("qk.npr", "qk.lambda_max", "qk.excess_kurtosis", "qk.weibull_k"):
            assert out[s][0, 1, b] == pytest.approx(float(ref[s]), rel=2e-4), s
    assert np.isnan(out["qk.excess_kurtosis"][0, 1, 4])  # element draws stop at 3
    np.testing.assert_allclose(out["q.rms"][0, 1], np.sqrt(np.mean(wq[0, 1].astype(float)**2)))


def test_eigen_route_threads_and_ill_conditioned_fallback():
    """Shape (96, 16) takes the tridiagonal/bisection route. Every spectral draw of a Gaussian
    head and of a Student-t(1.2) head (whose permuted draws have κ far beyond the route's
    bound, so its draws go through the SVD) equals float64 NumPy SVDs of the explicitly
    permuted W_QK: λ_max and Σλ to 2e-5, λ_min to 2e-3 (float32 Grams). Values are identical
    with 1 and 3 threads."""
    from rmtbase.baseline.eig_route import eig_method
    from rmtbase.scoring.nulls.permutation import permutation_null, permutations

    d_h, d, draws = 16, 96, 60
    assert eig_method(d, d_h) == "eigh"
    rng = np.random.default_rng(4)
    wq = np.stack([rng.standard_normal((d_h, d)), rng.standard_t(1.2, (d_h, d))])[None]
    wk = np.stack([rng.standard_normal((d_h, d)), rng.standard_t(1.2, (d_h, d))])[None]
    wq, wk = wq.astype(np.float32), wk.astype(np.float32)
    out = permutation_null(wq, wk, draws=draws, seed=9, threads=1)
    again = permutation_null(wq, wk, draws=draws, seed=9, threads=3)
    # exact: the same per-draw compiled program and permutations; threads only split the draws
    assert all(np.array_equal(out[k], again[k]) for k in out)
    pq, pk = permutations(9, 0, d_h * d, 50)  # chunk 0 holds the first 50 draws
    kappa_heavy = []
    for h in range(2):
        for b in range(50):
            q = wq[0, h].ravel()[pq[b]].reshape(d_h, d).astype(np.float64)
            k = wk[0, h].ravel()[pk[b]].reshape(d_h, d).astype(np.float64)
            lam = np.linalg.svd(q.T @ k, compute_uv=False)[:d_h] ** 2
            assert out["qk.lambda_max"][0, h, b] == pytest.approx(lam[0], rel=2e-5)
            assert out["qk.sum_lambda"][0, h, b] == pytest.approx(lam.sum(), rel=2e-5)
            assert out["qk.lambda_min"][0, h, b] == pytest.approx(lam[-1], rel=2e-3)
            if h == 1:
                kappa_heavy.append(lam[0] / lam[-1])
    eps = float(np.finfo(np.float32).eps)
    assert max(kappa_heavy) * d_h * eps > 1e-4  # the heavy head needed the fallback


def _llama(init: str, seed: int):
    import math

    import torch
    import transformers as tf

    torch.manual_seed(seed)
    cfg = tf.LlamaConfig(hidden_size=D, num_attention_heads=H, num_key_value_heads=H,
                         num_hidden_layers=L, intermediate_size=64, vocab_size=50,
                         max_position_embeddings=16)
    model = tf.LlamaForCausalLM(cfg)
    with torch.no_grad():
        for layer in model.model.layers:
            for lin in (layer.self_attn.q_proj, layer.self_attn.k_proj):
                if init == "kaiming_uniform":  # torch's nn.Linear default
                    torch.nn.init.kaiming_uniform_(lin.weight, a=math.sqrt(5))
                else:
                    torch.nn.init.trunc_normal_(lin.weight, std=0.02, a=-0.03, b=0.03)
    return model


@pytest.mark.parametrize("init", [pytest.param("kaiming_uniform", marks=pytest.mark.slow),
                                  "truncated_normal"])
def test_non_gaussian_untrained_heads_are_null_under_permutation(user_cache, init):
    """Untrained heads with i.i.d. uniform or truncated-normal entries: the Gaussian null
    flags them (their entry law is not Gaussian), the permutation null does not (exact test:
    the heads are exchangeable with their shuffles; no head flagged at BH 10⁻³, a chance
    failure in at most one model in a thousand, ``tests/_null_flags.py``), and W_Q/W_K element statistics are left out of it."""
    from rmtbase.scoring.score import score_model

    model = _llama(init, 4)
    gauss = score_model(model, progress=False, spectrum_draws=0, draws=400)
    assert int(gauss["head_flag"].sum()) >= 12
    perm = score_model(model, progress=False, spectrum_draws=0, null="permutation",
                       draws=400, element_draws=100)
    assert_no_head_flagged_at(perm, what=f"{init} heads under the permutation null")
    assert not any(str(s).startswith(("q.", "k.")) for s in perm["stat"].values)
    assert perm.attrs["null"].startswith("each head's own entries, shuffled")
    assert np.isfinite(perm["head_p_value"].values).all()


@pytest.mark.slow
def test_minilm_keeps_its_spectral_departures_under_both_nulls(user_cache):
    """Trained MiniLM (72 heads), spectral statistics only: the heads flagged under the
    Gaussian null and under the permutation null (the numbers are in docs/tour.md)."""
    from rmtbase.scoring.score import score_model

    g = score_model(None, stats="spectral", progress=False, spectrum_draws=0)
    p = score_model(None, stats="spectral", null="permutation", progress=False,
                    spectrum_draws=0)
    n_g, n_p = int(g["head_flag"].sum()), int(p["head_flag"].sum())
    print(f"MiniLM spectral: {n_g} heads flagged (gaussian null), {n_p} (permutation null)")
    assert n_g >= 60 and n_p >= 40
