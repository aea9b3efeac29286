"""Untrained models stored as K-quant GGUF files score as null against the K-quant matched null.

A random-init LLaMA (transformers' N(0, 0.02²) init; d = 256, 4 query heads of d_h = 64, GQA
on 2 key heads) has its q/k projections quantised by rmtbase's Q2_K / Q3_K / Q4_K / Q6_K round
trip (:mod:`rmtbase.stats.kquants`, checked against ggml's reference in ``test_kquants.py``),
packed as ggml blocks and written as a ``llama`` GGUF file with llama.cpp's row permutation
(``tests/_gguf.py``). Read back, the file names its type, the null passes through the same
round trip, and per statistic the rate of p ≤ 0.05 lies within 3 binomial standard errors of
0.05 (``test_precision_null._assert_calibrated``: heads as units, GQA-shared k.* statistics
as one unit per key head, plus the null's own sampling), and models with a flagged head within α's rate.

Sample size. A first version with 2–3 seeds of 12 layers (72 key heads) failed for Q4_K on
k.entropy / k.delta_entropy (10 of 72 key heads at p ≤ 0.05, 3.1–3.4 se); the same statistics
computed directly on 576 other key heads of the same init had rates 0.054 / 0.056
(se 0.009), so the test now scores 4 seeds × 16 layers (256 heads, 128 key heads per format).

Cost (2 shared cores, null tables not cached): Q2_K 107 s, Q4_K 114 s, Q3_K 351 s (marked
slow; its round trip runs make_q3_quants' 5 sequential passes), Q6_K 22–33 s. All four passed
(largest rates 0.086–0.109 at se 0.014). Since the K-quant codes compile once per shape when
called outside jit (the files below are encoded one matrix at a time), the four run in 258 s
wall in one process with a peak of 2.8 GB, against 538 s and 12.9 GB before (2026-11-25).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("gguf")

import _gguf  # noqa: E402
from test_precision_null import ALPHA, _assert_calibrated  # noqa: E402

D, HEADS, KV, LAYERS, DRAWS = 256, 4, 2, 16, 400
SEEDS = (0, 1, 2, 3)


def _llama_gguf(path, fmt: str, seed: int):
    import torch
    import transformers as tf

    torch.manual_seed(seed)
    cfg = tf.LlamaConfig(hidden_size=D, num_attention_heads=HEADS, num_key_value_heads=KV,
                         num_hidden_layers=LAYERS, intermediate_size=64, vocab_size=50,
                         max_position_embeddings=16)
    sd = tf.LlamaForCausalLM(cfg).state_dict()
    layers, encoded = [], {}
    for i in range(LAYERS):
        q = sd[f"model.layers.{i}.self_attn.q_proj.weight"].numpy()
        k = sd[f"model.layers.{i}.self_attn.k_proj.weight"].numpy()
        layers.append({"q": q, "k": k})
        encoded[(i, "q")] = _gguf.encode_k(_gguf.permute(q, HEADS), fmt)
        encoded[(i, "k")] = _gguf.encode_k(_gguf.permute(k, KV), fmt)
    _gguf.write_llama(path, layers, d=D, n_heads=HEADS, n_kv_heads=KV, encoded=encoded)
    return path, layers


# Slow, each: the first K-quant score of a module draws its null through the quantiser (q6_k
# alone took 216 s on 2 quiet cores). The default run keeps the K-quant round trips against
# ggml's C reference and gguf's dequantiser (tests/test_kquants.py).
@pytest.mark.parametrize("fmt", [pytest.param("q2_k", marks=pytest.mark.slow),
                                 pytest.param("q3_k", marks=pytest.mark.slow),
                                 pytest.param("q4_k", marks=pytest.mark.slow),
                                 pytest.param("q6_k", marks=pytest.mark.slow)])
def test_untrained_k_quant_models_score_as_null(tmp_path, module_cache, fmt):
    import jax.numpy as jnp

    from rmtbase.models import load_heads
    from rmtbase.scoring.score import score_model
    from rmtbase.stats.precision import round_trip

    scores = []
    for seed in SEEDS:
        path, layers = _llama_gguf(tmp_path / f"{fmt}-{seed}.gguf", fmt, 40 + seed)
        if seed == 0:  # the file holds exactly the round trip of the HF weights
            lh = next(iter(load_heads(path)))
            want = np.asarray(round_trip(jnp.asarray(layers[0]["q"]), fmt))
            # exact: by construction, the quantiser is correctly rounded float32 ops in a fixed
            #  order, FMA and reciprocal rewrites guarded (rmtbase.stats._exact); bit-equality with
            #  the scalar ggml/torch reference is its contract
            np.testing.assert_array_equal(lh.wq.reshape(D, D), want)
            assert lh.quantisation == fmt
        ds = score_model(str(path), progress=False, spectrum_draws=0, draws=DRAWS)
        assert ds.attrs["quantisation"] == ds.attrs["null_storage"] == fmt
        assert f"{fmt} block quantiser" in ds.attrs["null"]
        assert ds.attrs["unreliable"] == ""  # histogram statistics in the decision
        scores.append(ds)
    n = sum(ds.sizes["layer"] * ds.sizes["head"] for ds in scores)
    assert n == len(SEEDS) * LAYERS * HEADS
    rates = {str(s): float(np.mean([(ds["p_value"].sel(stat=s).values <= ALPHA).mean()
                                    for ds in scores])) for s in scores[0]["stat"].values}
    lo, hi = min(rates, key=rates.get), max(rates, key=rates.get)
    print(f"{fmt}: n = {n} heads per statistic, rejection rates at alpha = {ALPHA}: "
          f"min {rates[lo]:.3f} ({lo}), max {rates[hi]:.3f} ({hi}), "
          f"binomial se {np.sqrt(ALPHA * (1 - ALPHA) / n):.3f} (heads as units)")
    _assert_calibrated(scores, DRAWS)
