"""Block-FP8 checkpoints (E4M3 weights, 128×128 ``weight_scale_inv`` tiles) and their null.

Checkpoints are written as DeepSeek-V3 / Qwen3-FP8 lay them out (``tests/_fp8.py``: torch
``float8_e4m3fn`` tensors through ``safetensors.torch``, ``quant_method = "fp8"``). Checked:
rmtbase reads them bit for bit as transformers' own FP8 loader dequantises them (an
independent reader); the null's JAX round trip equals the numpy writer bit for bit (jit, vmap,
partial edge tiles); an untrained model so stored scores as null.
"""

from __future__ import annotations

import numpy as np
import pytest
from _fp8 import write_fp8

from rmtbase.errors import ModelError


def _llama(d=256, heads=4, kv=2, layers=2, seed=0, ffn=384):
    import torch
    import transformers as tf

    torch.manual_seed(seed)
    return tf.LlamaForCausalLM(tf.LlamaConfig(
        hidden_size=d, num_attention_heads=heads, num_key_value_heads=kv,
        num_hidden_layers=layers, intermediate_size=ffn, vocab_size=64))


@pytest.fixture(scope="module")
def fp8_model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fp8") / "llama-fp8"
    model = _llama()
    want = write_fp8(model, folder)
    return folder, model, want


def test_file_layout_is_the_official_one(fp8_model):
    from safetensors import safe_open

    folder, model, _ = fp8_model
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        w = f.get_tensor("model.layers.0.mlp.up_proj.weight")
        s = f.get_tensor("model.layers.0.mlp.up_proj.weight_scale_inv")
    import torch

    assert w.dtype == torch.float8_e4m3fn and tuple(w.shape) == (384, 256)
    assert s.dtype == torch.float32 and tuple(s.shape) == (3, 2)
    ref = model.state_dict()["model.layers.0.mlp.up_proj.weight"].abs()
    np.testing.assert_array_equal(s.numpy()[0, 1], ref[:128, 128:].max().numpy() / np.float32(448))


def test_read_as_transformers_dequantises(fp8_model):
    """transformers' FP8 loader (dequantize on CPU) is the independent reader: equal bit for
    bit to FileWeights on every FP8 tensor; storage is 'fp8_e4m3'."""
    import torch
    import transformers as tf

    from rmtbase.models.weights import FileWeights

    folder, model, want = fp8_model
    theirs = tf.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).state_dict()
    w = FileWeights([p.name for p in folder.iterdir()], folder.joinpath, folder.name,
                    folder=folder)
    for name, value in want.items():
        got = w.get(name)
        assert w.storage_of(name) == "fp8_e4m3"
        np.testing.assert_array_equal(got, value)
        np.testing.assert_array_equal(got, theirs[name].numpy())
    w.close()


def test_null_round_trip_equals_the_writer():
    import jax

    from rmtbase.models._fp8 import dequantize, quantize
    from rmtbase.stats.precision import round_trip

    rng = np.random.default_rng(3)
    w = (0.02 * rng.standard_normal((3, 200, 300))).astype(np.float32)  # partial edge tiles
    batched = np.asarray(jax.jit(jax.vmap(lambda x: round_trip(x, "fp8_e4m3")))(w))
    for k in range(3):
        q, s = quantize(w[k])
        assert s.shape == (2, 3)
        ref = dequantize(q.view(np.uint8), s)
        np.testing.assert_array_equal(np.asarray(round_trip(w[k], "fp8_e4m3")), ref)
        np.testing.assert_array_equal(batched[k], ref)
    # E4M3 keeps 3 mantissa bits: relative error at most 2^-4 above the subnormal range
    big = np.abs(w[0]) > 0.02 * 2.0**-5
    rel = np.abs(np.asarray(round_trip(w[0], "fp8_e4m3")) - w[0])[big] / np.abs(w[0][big])
    assert rel.max() <= 2.0**-4


def test_bad_scales_are_refused_in_one_line(tmp_path):
    import torch
    from safetensors.torch import load_file, save_file

    from rmtbase.models import load_heads

    folder = tmp_path / "bad"
    write_fp8(_llama(layers=1), folder)
    t = load_file(str(folder / "model.safetensors"))
    t["model.layers.0.self_attn.q_proj.weight_scale_inv"] = torch.ones(1, 1)  # per-tensor
    save_file(t, str(folder / "model.safetensors"))
    with pytest.raises(ModelError, match="not the \\(2, 2\\) of 128x128 blocks") as e:
        list(load_heads(str(folder)))
    assert "\n" not in str(e.value)


@pytest.mark.slow  # ~30 s under load: the fp8 null's first compile
def test_scores_name_the_fp8_storage(fp8_model, score_cache):
    from rmtbase.scoring.score import score_model

    ds = score_model(str(fp8_model[0]), stats="spectral", draws=200, progress=False,
                     spectrum_draws=0)
    assert ds.attrs["quantisation"] == "fp8_e4m3" and ds.attrs["null_storage"] == "fp8_e4m3"
    assert "fp8_e4m3 block quantiser" in ds.attrs["null"]


@pytest.mark.slow  # 4 untrained 12 x 12-head models scored with every statistic: ~4 min
def test_untrained_fp8_model_scores_as_null(tmp_path, score_cache):
    """Untrained LLaMA (d = 384, 12 heads of d_h = 32 on 4 key heads, 12 layers, transformers'
    N(0, 0.02²) init) stored as block FP8, 4 seeds: 0 heads flagged, and for every statistic
    in the decision (histogram statistics included) the rate of p ≤ 0.05 within 2 se of 0.05
    (n = 576 heads; k.* n = 192 key heads, GQA-shared).

    The se counts what the rate really varies with: heads sharing a 128-row tile share its
    scale (4 query heads a tile; the 4 key heads of a layer are one tile), so tiles are the
    clusters (cluster-robust variance of the count), plus the null table's own sampling
    (a(1 − a)/draws: every head is compared with the same draws).

    Measured (rate, se): q.entropy 0.047 (0.013), q.kl_gaussian 0.056 (0.013), k.entropy 0.089
    (0.024), k.kl_gaussian 0.094 (0.025), q.weibull_lambda 0.071 (0.012); binomial se alone
    would be 0.009 (q) and 0.016 (k). Two statistics are conservative on these seeds whatever
    the storage: k.mean 0.010 and qk.max_over_q99 0.030 here, 0.010 and 0.033 for the same
    four models saved in float32; they are checked one-sided (no excess flags)."""
    from rmtbase.scoring.score import score_model

    a = 0.05
    p: dict[str, list] = {}
    clusters: dict[str, list] = {}
    ds = None
    for seed in range(2, 6):
        folder = tmp_path / f"m{seed}"
        write_fp8(_llama(d=384, heads=12, kv=4, layers=12, seed=seed, ffn=128), folder)
        ds = score_model(str(folder), progress=False, spectrum_draws=0)
        assert ds.attrs["quantisation"] == "fp8_e4m3" and ds.attrs["null_storage"] == "fp8_e4m3"
        assert int(ds["head_flag"].sum()) == 0
        for stat in ds["stat"].values:
            v = ds["p_value"].sel(stat=stat).values  # (layer, head)
            if str(stat).startswith("k."):  # one unit per key head; a layer's 4 are one tile
                v, tile = v[:, ::3], np.repeat(np.arange(12)[:, None], 4, axis=1)
            else:  # 4 query heads a tile
                tile = np.arange(12)[:, None] * 3 + np.arange(12)[None, :] // 4
            p.setdefault(str(stat), []).append(v.ravel())
            clusters.setdefault(str(stat), []).append((tile + 100 * seed).ravel())
    fam = ds["in_family"].to_series()
    assert fam["q.entropy"] and fam["k.kl_gaussian"]  # histogram statistics decide too
    rates, bad = {}, {}
    for stat in fam.index[fam.values]:
        v, c = np.concatenate(p[stat]), np.concatenate(clusters[stat])
        hit = (v <= a).astype(float)
        rate = hit.mean()
        ids, inv = np.unique(c, return_inverse=True)
        dev = np.bincount(inv, weights=hit - rate, minlength=ids.size)
        se = np.sqrt(np.sum(dev**2) / v.size**2 + a * (1 - a) / int(ds["null_draws"].sel(
            stat=stat)))
        rates[stat] = (round(float(rate), 4), v.size, round(float(se), 4))
        conservative_here = stat in ("k.mean", "qk.max_over_q99")  # as in float32
        if rate - a > 2 * se or (not conservative_here and a - rate > 2 * se):
            bad[stat] = rates[stat]
    print(rates)
    assert not bad, bad


def test_fp8_without_block_scales_is_refused_in_one_line(tmp_path):
    """compressed-tensors FP8 names its scale ``weight_scale`` (per tensor or channel): not
    block FP8, refused naming the tensor."""
    from safetensors.torch import load_file, save_file

    from rmtbase.models import load_heads

    folder = tmp_path / "ct"
    write_fp8(_llama(layers=1), folder)
    t = load_file(str(folder / "model.safetensors"))
    for k in [k for k in t if k.endswith("_scale_inv")]:
        t[k.removesuffix("_inv")] = t.pop(k)
    save_file(t, str(folder / "model.safetensors"))
    with pytest.raises(ModelError, match="q_proj.weight.*stored as F8_E4M3") as e:
        list(load_heads(str(folder)))
    assert "\n" not in str(e.value)
