"""Fine-tune deltas and LoRA adapters (rmtbase.scoring.matrices.delta, rmtbase score --base).

A random-init LLaMA (d = 128, 4 heads of d_h = 32, 2 layers, float32) is the base. The
"fine-tune" adds small dense Gaussian noise to every weight and, to two heads only, a planted
rank-2 update of W_Q: scored against its base, exactly those two heads are flagged (the noise
is what the delta's null describes). A PEFT LoRA folder written by hand (safetensors + JSON)
scores as ΔW = (α/r)·B·A (every layout, built with PEFT: ``tests/test_lora_layouts.py``).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import save_file

from rmtbase.errors import InputError, ModelError

D, H, DH, L = 128, 4, 32, 2
PLANTED = {(0, 1), (1, 3)}


def _base(folder, seed=0, d=D):
    import torch
    import transformers as tf

    torch.manual_seed(seed)
    cfg = tf.LlamaConfig(hidden_size=d, num_attention_heads=H, num_key_value_heads=H,
                         num_hidden_layers=L, intermediate_size=64, vocab_size=50,
                         max_position_embeddings=16)
    model = tf.LlamaForCausalLM(cfg)
    model.save_pretrained(folder)
    return model


def _finetune(model, folder, seed=1):
    import torch

    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.002 * torch.randn(p.shape, generator=g))
        for layer, head in PLANTED:
            q = model.model.layers[layer].self_attn.q_proj.weight
            b = torch.randn(DH, 2, generator=g)
            a = torch.randn(2, D, generator=g)
            q[head * DH:(head + 1) * DH] += 0.004 * (b @ a)  # rank 2, Frobenius ≈ 2.5× noise
    model.save_pretrained(folder)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("delta")
    model = _base(root / "base")
    _finetune(model, root / "ft")
    return root / "ft", root / "base"


@pytest.mark.slow
def test_planted_rank_two_updates_are_exactly_the_flagged_heads(pair, module_cache):
    from rmtbase.scoring.matrices.delta import score_delta

    ft, base = pair
    ds = score_delta(str(ft), str(base), draws=400, progress=False, spectrum_draws=0)
    flagged = set(zip(*(map(int, a) for a in np.nonzero(ds["head_flag"].values)), strict=True))
    assert flagged == PLANTED
    assert ds.attrs["delta_kind"] == "finetune" and "dW_Q" in ds.attrs["null"]
    # relative changes: independent recomputation from the saved weights
    from safetensors.numpy import load_file

    wf, wb = load_file(str(ft / "model.safetensors")), load_file(str(base / "model.safetensors"))
    key = "model.layers.1.self_attn.{}_proj.weight"
    q_f, q_b = wf[key.format("q")][32:64], wb[key.format("q")][32:64]
    k_f, k_b = wf[key.format("k")][32:64], wb[key.format("k")][32:64]
    want_q = np.linalg.norm(q_f - q_b) / np.linalg.norm(q_b)
    np.testing.assert_allclose(ds["delta_rel_q"].values[1, 1], want_q, rtol=1e-5)
    qk_f, qk_b = q_f.T.astype(np.float64) @ k_f, q_b.T.astype(np.float64) @ k_b
    want_qk = np.linalg.norm(qk_f - qk_b) / np.linalg.norm(qk_b)
    np.testing.assert_allclose(ds["delta_rel_qk"].values[1, 1], want_qk, rtol=1e-5)
    # the untouched heads' W_Q changed by the noise only: about 0.002/0.02
    assert 0.05 < float(ds["delta_rel_q"].values[0, 0]) < 0.2


@pytest.mark.slow
def test_lora_adapter_scores_as_its_update(pair, tmp_path, module_cache):
    from rmtbase.models.lora import read_lora
    from rmtbase.scoring.matrices.delta import score_delta

    _, base = pair
    rng = np.random.default_rng(5)
    r, alpha = 4, 8
    tensors, want = {}, {}
    for i in range(L):
        for m in ("q", "k"):
            a = (0.05 * rng.standard_normal((r, D))).astype(np.float32)
            b = (0.05 * rng.standard_normal((D, r))).astype(np.float32)
            pre = f"base_model.model.model.layers.{i}.self_attn.{m}_proj"
            tensors[f"{pre}.lora_A.weight"], tensors[f"{pre}.lora_B.weight"] = a, b
            want[(i, m)] = (alpha / r) * (b.astype(np.float64) @ a)
    adapter = tmp_path / "lora"
    adapter.mkdir()
    save_file(tensors, str(adapter / "adapter_model.safetensors"))
    (adapter / "adapter_config.json").write_text(json.dumps(
        {"peft_type": "LORA", "r": r, "lora_alpha": alpha,
         "target_modules": ["q_proj", "k_proj"], "base_model_name_or_path": str(base)}))
    got = read_lora(adapter).updates
    for (i, m), w in want.items():
        np.testing.assert_allclose(got[f"model.layers.{i}.self_attn.{m}_proj"], w,
                                   rtol=1e-5, atol=1e-9)
    ds = score_delta(str(adapter), str(base), draws=400, progress=False, spectrum_draws=0)
    assert ds.attrs["delta_kind"] == "lora"
    assert ds["head_p_value"].shape == (L, H) and np.isfinite(ds["delta_rel_qk"].values).all()
    # rank 4 < d_h = 32: the spectrum of a LoRA update is far from the dense null
    assert bool(ds["head_flag"].all())
    # an adapter that leaves k_proj alone is scored with W_K read from the base
    only_q = {k: v for k, v in tensors.items() if ".q_proj." in k}
    save_file(only_q, str(adapter / "adapter_model.safetensors"))
    ds = score_delta(str(adapter), str(base), draws=400, progress=False, spectrum_draws=0)
    assert ds.attrs["delta_sides"] == "q" and (ds["delta_rel_k"].values == 0).all()


def test_refusals(pair, tmp_path):
    from rmtbase.scoring.matrices.delta import score_delta

    ft, base = pair
    with pytest.raises(InputError, match="needs its base model"):
        score_delta(str(ft), None)
    other = tmp_path / "other"
    _base(other, d=64)
    with pytest.raises(ModelError, match="differ: d 128 vs 64") as e:
        score_delta(str(ft), str(other))
    assert "\n" not in str(e.value)


def test_cli_base(pair, tmp_path, module_cache, capsys):
    from rmtbase.cli import main

    ft, base = pair
    out = tmp_path / "out"
    assert main(["score", str(ft), "--base", str(base), "--out", str(out), "--draws", "400",
                 "--no-figures", "--quiet", "--stats", "spectral"]) == 0
    import xarray as xr

    ds = xr.open_dataset(out / "scores.nc")
    assert "delta_rel_qk" in ds and ds.attrs["delta_kind"] == "finetune"
    assert main(["score", str(ft), str(ft), "--base", str(base),
                 "--out", str(tmp_path / "o2")]) != 0
    assert "--base scores one fine-tuned MODEL" in capsys.readouterr().err
