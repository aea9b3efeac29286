"""Calibration of the combined head decision (:mod:`rmtbase.decision.combined`)
on untrained models at every storage: float32, bfloat16, a GGUF K-quant (Q4_K) and block FP8
(E4M3), n ≥ 1,000 heads each, scored by ``score_model`` at default options.

Per storage the rate of head p ≤ 0.05 lies within 2 binomial se of 0.05 (se = √(0.05·0.95/n),
heads as units; no GQA here, so every head has its own W_K), and Benjamini–Hochberg at 0.05 over
all n heads pooled flags none. Per model BH flags some head with probability ≤ α under the
global null (FDR = FWER there), so the models with a flag are held to α·m + 3 se
(``tests/_null_flags.py``): measured, one model of seven has one flagged head in float32 and
in bfloat16 (head p 3.3·10⁻⁴ against BH's first threshold 0.05/144 = 3.5·10⁻⁴).

Every model of a storage is read against the same null draws (same seed), so the rates also
carry the null's own Monte Carlo error (≈ √(0.05·0.95/2000) = 0.005 for the profile null and
the omnibus's joint draws); the binomial se alone is the stricter bound, and it is the one
asserted.

Measured (n, rate of head p ≤ 0.05, se, z; the rates of the two families alone in brackets,
statistics / axes; 18,000-draw profile null unless said; this test prints them):

- float32, BERT 384 × 32, 7 × 144 heads: n = 1008, 0.0605, se 0.0069, z +1.53 (0.0565 /
  0.0595); seed 105 has one flagged head (head p 3.3·10⁻⁴, set by the axes);
- bfloat16, the same models in bf16: n = 1008, 0.0625, se 0.0069, z +1.82 (0.0615 / 0.0595);
  seed 105 again one flagged head;
- Q4_K GGUF, LLaMA 256 × 32 (8 heads, 16 layers), 8 models, 2,000 profile draws: n = 1024,
  0.0596, se 0.0068, z +1.41 (0.0547 / 0.0557), no flag;
- FP8 E4M3 (block 128 × 128), LLaMA 256 × 32 (8 heads, 16 layers), 8 models: n = 1024,
  0.0527, se 0.0068, z +0.40 (0.0439 / 0.0586), no flag (FP8's 128-row tiles make 4 heads
  share a scale: the binomial se slightly understates its rate's spread).

The rates sit above 0.05 at float32, bfloat16 and Q4_K (z +1.4 … +1.8): each family alone is
0.055–0.06, and their Bonferroni adds them at α/2. Within 2 se, but a systematic excess of ~0.01 is not
excluded by these n; the two families' nulls are shared by all models of a storage, so part
of the excess may be those draws' Monte Carlo error (≈ 0.005 for the statistics' 2,000 joint
draws, ≈ 0.0017 for 18,000 profile draws) rather than a bias.
"""

from __future__ import annotations

import numpy as np
import pytest
from _null_flags import assert_flags_within_alpha

ALPHA = 0.05


def _bert(folder, seed, d, heads, layers, dtype):
    import torch
    import transformers as tf

    torch.manual_seed(seed)
    cfg = tf.BertConfig(hidden_size=d, num_attention_heads=heads, num_hidden_layers=layers,
                        intermediate_size=32, vocab_size=32, max_position_embeddings=16)
    tf.BertModel(cfg).to(getattr(torch, dtype)).save_pretrained(folder)
    return folder


def _llama(seed, d, heads, layers):
    import torch
    import transformers as tf

    torch.manual_seed(seed)
    cfg = tf.LlamaConfig(hidden_size=d, num_attention_heads=heads, num_key_value_heads=heads,
                         num_hidden_layers=layers, intermediate_size=32, vocab_size=32)
    return tf.LlamaForCausalLM(cfg)


def _gguf(path, seed, d, heads, layers, fmt="q4_k"):
    import _gguf

    sd = _llama(seed, d, heads, layers).state_dict()
    lay, enc = [], {}
    for i in range(layers):
        q = sd[f"model.layers.{i}.self_attn.q_proj.weight"].numpy()
        k = sd[f"model.layers.{i}.self_attn.k_proj.weight"].numpy()
        lay.append({"q": q, "k": k})
        enc[(i, "q")] = _gguf.encode_k(_gguf.permute(q, heads), fmt)
        enc[(i, "k")] = _gguf.encode_k(_gguf.permute(k, heads), fmt)
    _gguf.write_llama(path, lay, d=d, n_heads=heads, n_kv_heads=heads, encoded=enc)
    return path


def _fp8(folder, seed, d, heads, layers):
    from _fp8 import write_fp8

    write_fp8(_llama(seed, d, heads, layers), folder)
    return folder


#: storage -> (models, d, heads, layers, storage_dtype / quantisation the score must name)
CASES = {"float32": (7, 384, 12, 12), "bfloat16": (7, 384, 12, 12),
         "q4_k": (8, 256, 8, 16), "fp8_e4m3": (8, 256, 8, 16)}

#: Profile null draws where the default (18,000) costs too much here: the Q4_K round trip of
#: 18,000 factor pairs at 256 x 32 is ~7 CPU-min (8.5 CPU-s per 250, measured), so Q4_K is
#: calibrated against 2,000 profile draws (the rate then also carries the null's own Monte
#: Carlo error, ≈ √(0.05·0.95/2000) = 0.005, beside the binomial se asserted).
PROFILE_DRAWS = {"q4_k": 2000}


def _model(tmp_path, storage, seed, d, heads, layers):
    if storage in ("float32", "bfloat16"):
        return _bert(tmp_path / f"{storage}-{seed}", seed, d, heads, layers, storage)
    if storage == "q4_k":
        pytest.importorskip("gguf")
        return _gguf(tmp_path / f"{storage}-{seed}.gguf", seed, d, heads, layers)
    return _fp8(tmp_path / f"{storage}-{seed}", seed, d, heads, layers)


@pytest.mark.slow  # 7-8 untrained models per storage scored with every statistic: 4-8 min each
@pytest.mark.parametrize("storage", list(CASES))
def test_untrained_models_are_null_under_the_combined_decision(tmp_path, module_cache, storage,
                                                             monkeypatch):
    from rmtbase.decision.significance import benjamini_hochberg
    from rmtbase.scoring.score import score_model

    n_models, d, heads, layers = CASES[storage]
    if storage in PROFILE_DRAWS:
        monkeypatch.setattr("rmtbase.scoring.profile.factors.PROFILE_DRAWS", PROFILE_DRAWS[storage])
    scores = []
    for seed in range(100, 100 + n_models):
        folder = _model(tmp_path, storage, seed, d, heads, layers)
        ds = score_model(str(folder), progress=False, spectrum_draws=0)
        if storage in ("float32", "bfloat16"):
            assert ds.attrs["storage_dtype"] == storage
        else:
            assert ds.attrs["quantisation"] == ds.attrs["null_storage"] == storage
        assert ds.attrs["decision_axes"] == "alignment,symmetry,q_input_focus,k_input_focus"
        scores.append(ds)
    p = np.concatenate([ds["head_p_value"].values.ravel() for ds in scores])
    n = p.size
    assert n >= 1000 and np.isfinite(p).all()
    rate, se = float(np.mean(p <= ALPHA)), float(np.sqrt(ALPHA * (1 - ALPHA) / n))
    parts = {v: float(np.mean(np.concatenate([ds[v].values.ravel() for ds in scores]) <= ALPHA))
             for v in ("head_p_statistics", "head_p_axes")}
    print(f"{storage}: n = {n}, rate {rate:.4f}, se {se:.4f}, z {(rate - ALPHA) / se:+.2f}, "
          f"families {parts}")
    assert abs(rate - ALPHA) <= 2 * se, (storage, rate, se)
    assert not benjamini_hochberg(p, ALPHA)[0].any(), (storage, float(p.min()))
    assert_flags_within_alpha(scores)
