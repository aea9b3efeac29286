"""Randomly initialised transformers score as null; planted structure is found.

Models: GPT-2, GPT-NeoX, LLaMA with GQA (4 query heads on 2 key heads), BERT and OPT, built
from small configs (d = 64, 4 heads of d_h = 16, 4 layers), saved with save_pretrained to a
temporary folder and read back through rmtbase.models (no network). All share the null cell
(64, 16), generated once per session into a temporary RMTBASE_CACHE with N = 300 draws
(N = 2000 in the slow variant).

transformers' ``_init_weights`` draws every query/key weight i.i.d. N(0, initializer_range²)
(GPT-2 Conv1D, NeoX fused query_key_value, LLaMA/BERT/OPT Linear); ``test_init_is_iid_gaussian``
checks that for each architecture before anything relies on it.
"""

from __future__ import annotations

import numpy as np
import pytest
from _null_flags import assert_flags_within_alpha
from scipy import stats as sst

D, H, L, KV = 64, 4, 4, 2
DRAWS = 300
ALPHA = 0.05


def _configs():
    import transformers as tf

    common = dict(vocab_size=50, max_position_embeddings=32)
    return {
        "gpt2": (tf.GPT2Config(n_embd=D, n_head=H, n_layer=L, vocab_size=50, n_positions=32,
                               bos_token_id=0, eos_token_id=0), tf.GPT2LMHeadModel),
        "gpt_neox": (tf.GPTNeoXConfig(hidden_size=D, num_attention_heads=H, num_hidden_layers=L,
                                      intermediate_size=128, **common), tf.GPTNeoXForCausalLM),
        "llama": (tf.LlamaConfig(hidden_size=D, num_attention_heads=H, num_key_value_heads=KV,
                                 num_hidden_layers=L, intermediate_size=128, **common),
                  tf.LlamaForCausalLM),
        "bert": (tf.BertConfig(hidden_size=D, num_attention_heads=H, num_hidden_layers=L,
                               intermediate_size=128, **common), tf.BertModel),
        "opt": (tf.OPTConfig(hidden_size=D, num_attention_heads=H, num_hidden_layers=L,
                             ffn_dim=128, word_embed_proj_dim=D, **common), tf.OPTForCausalLM),
    }


def _init_std(cfg) -> float:
    return float(getattr(cfg, "initializer_range", None) or cfg.init_std)


@pytest.fixture(scope="module")
def cache(score_cache):
    return score_cache


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """{arch: (folder, config)} of randomly initialised, saved models (fixed torch seed)."""
    import torch

    out = {}
    for i, (arch, (cfg, cls)) in enumerate(_configs().items()):
        torch.manual_seed(100 + i)
        model = cls(cfg)
        folder = tmp_path_factory.mktemp(f"rand-{arch}")
        model.save_pretrained(folder)
        out[arch] = (folder, cfg)
    return out


def _score_all(models, draws):
    from rmtbase.scoring.score import score_model

    return {arch: score_model(str(folder), draws=draws, alpha=ALPHA, progress=False,
                              spectrum_draws=0)
            for arch, (folder, _) in models.items()}


@pytest.fixture(scope="module")
def scores(models, cache):
    return _score_all(models, DRAWS)


def test_init_is_iid_gaussian(models):
    """Per architecture, pooled W_Q and W_K entries: mean 0 and std = initializer_range within
    5 standard errors, excess kurtosis within 5·√(24/n), and KS vs N(0, σ²) not rejected at
    1e-6. Catches a truncated, uniform or scaled init (which would not be our null)."""
    from rmtbase.models import load_heads

    for arch, (folder, cfg) in models.items():
        sigma = _init_std(cfg)
        for which in ("wq", "wk"):
            layers = list(load_heads(str(folder)))
            w = np.concatenate([getattr(lh, which)[:: (H // KV if arch == "llama" and which == "wk" else 1)]
                                .ravel() for lh in layers]).astype(float)
            n = w.size
            assert abs(w.mean()) < 5 * sigma / np.sqrt(n), (arch, which)
            assert abs(w.std() / sigma - 1) < 5 / np.sqrt(2 * n), (arch, which)
            assert abs(sst.kurtosis(w)) < 5 * np.sqrt(24 / n), (arch, which)
            assert sst.kstest(w / sigma, "norm").pvalue > 1e-6, (arch, which)


def test_model_info_and_dataset_layout(scores):
    for arch, ds in scores.items():
        assert ds.attrs["architecture"] == arch
        assert (ds.attrs["d"], ds.attrs["d_h"]) == (D, 16)
        assert ds.sizes["layer"] == L and ds.sizes["head"] == H
        need = {"qk.npr", "qk.lambda_max", "qk.spectral_entropy", "qk.condition_number",
                "qk.std", "qk.excess_kurtosis", "q.std", "k.std", "q.weibull_k", "k.weibull_k"}
        assert need <= set(ds["stat"].values)
        assert "q.rms" not in set(ds["stat"].values)
        assert int(ds["null_draws"].min()) >= DRAWS
        np.testing.assert_allclose(ds["sigma_q"].values, _init_std_of(arch), rtol=0.1)
        # λ in raw units: null mean of λ_max ∝ (σ_Q σ_K)² ~ (0.02²)² d² O(1)
        lam = ds["null_mean"].sel(stat="qk.lambda_max").values
        assert np.all((lam > 0.5 * 0.02**4 * D**2) & (lam < 20 * 0.02**4 * D**2))


def _init_std_of(arch):
    return _init_std(_configs()[arch][0])


def _assert_null(scores, draws):
    """Per statistic, pooled over the 5 models (n_heads heads; independent units = layers × key
    heads, LLaMA's query heads coming in groups g = 2 that share W_K): C = #(p ≤ α) has mean
    ≤ α n_heads and Var ≤ Σ_units g² α + n_heads² α(1-α)/N (a unit's count is in [0, g] with
    mean ≤ gα, so its variance ≤ g²α; g = 1 gives α(1-α); the last term is the shared null's
    own sampling), so we test C ≤ α n_heads + 5 sd. Mean p: within 5 sd of ½ with
    Var ≤ Σ_units g²/12 / n_heads² + 1/(12N). BH: no flag in any model (under the global null
    P(any flag) ≤ α, as FDR = FWER there; fixed seeds make this deterministic)."""
    a = ALPHA
    groups = []
    for ds in scores.values():
        g = ds.attrs["n_heads"] // ds.attrs["n_kv_heads"]
        groups += [g] * (ds.sizes["layer"] * ds.attrs["n_kv_heads"])
    groups = np.array(groups, float)
    n_heads = int(groups.sum())
    var_c = np.sum(np.where(groups == 1, a * (1 - a), groups**2 * a)) + n_heads**2 * a * (1 - a) / draws
    p_sd = np.sqrt(np.sum(groups**2) / 12 / n_heads**2 + 1 / (12 * draws))
    all_p = []
    for stat in scores["gpt2"]["stat"].values:
        p = np.concatenate([ds["p_value"].sel(stat=stat).values.ravel() for ds in scores.values()])
        assert p.size == n_heads and np.isfinite(p).all(), stat
        assert (p <= a).sum() <= a * n_heads + 5 * np.sqrt(var_c), stat
        assert abs(p.mean() - 0.5) < 5 * p_sd, stat
        all_p.append(p)
    frac = np.mean(np.concatenate(all_p) <= a)
    assert 0.01 < frac < 0.1, frac  # pooled over correlated statistics: a loose sanity band
    # the decision: models with a flagged head (or a descriptive flag) within BH's alpha rate
    # (tests/_null_flags.py); the statistics' omnibus p is uniform (KS over the pooled heads;
    # GQA heads sharing W_K are dependent, so only a gross miscalibration fails the 1e-3
    # level); the head p, a Bonferroni over that omnibus and the factor axes
    # (rmtbase.decision.combined: p = min(1, 2 min(p_S, p_A)), not uniform, mass at 1), is
    # valid: its rate at alpha within the bound on C above
    p_s = np.concatenate([ds["head_p_statistics"].values.ravel() for ds in scores.values()])
    assert p_s.size == n_heads and np.isfinite(p_s).all()
    assert sst.kstest(p_s, "uniform").pvalue > 1e-3
    head_p = np.concatenate([ds["head_p_value"].values.ravel() for ds in scores.values()])
    assert head_p.size == n_heads and np.isfinite(head_p).all()
    assert (head_p <= a).sum() <= a * n_heads + 5 * np.sqrt(var_c)
    assert_flags_within_alpha(list(scores.values()))


def test_random_models_score_as_null(scores):
    _assert_null(scores, DRAWS)


@pytest.mark.slow
def test_random_models_score_as_null_many_draws(models, cache):
    """The same with N = 2000 null draws (tighter null sampling term, p-values to 1e-3)."""
    _assert_null(_score_all(models, 2000), 2000)


def test_planted_spike_is_flagged(models, cache):
    """A strong shared rank-1 direction planted in W_Q and W_K of all heads of layers 1 and 2
    of the GPT-2 model (loaded object, no save): every one of those 8 heads is flagged by the
    per-head decision (spectral statistics; their λ_max sits far beyond the null draws, so its
    p-value is GPD-extrapolated), and λ_max's z is large. BH controls the FDR over heads: at
    most 2 false flags among the 8 unplanted heads (≈ 0.4 expected)."""
    import torch
    import transformers as tf

    from rmtbase.scoring.score import score_model

    folder, _ = models["gpt2"]
    model = tf.GPT2LMHeadModel.from_pretrained(folder)
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for layer in (1, 2):
            w = model.transformer.h[layer].attn.c_attn.weight  # Conv1D (d, 3d): q | k | v
            v = torch.randn(D, generator=g)
            v /= v.norm()
            for h in range(H):
                u = torch.randn(16, generator=g)
                u /= u.norm()
                w[:, h * 16:(h + 1) * 16] += 1.0 * torch.outer(v, u)
                w[:, D + h * 16:D + (h + 1) * 16] += 1.0 * torch.outer(v, u)
    ds = score_model(model, stats="spectral", draws=DRAWS, alpha=ALPHA, progress=False,
                     spectrum_draws=0)
    assert ds["head_flag"].sel(layer=[1, 2]).values.all()
    assert ds["z"].sel(layer=[1, 2], stat="qk.lambda_max").values.min() > 5
    assert int(ds["head_flag"].sel(layer=[0, 3]).sum()) <= 2
