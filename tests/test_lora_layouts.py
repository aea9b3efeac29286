"""LoRA adapters of every layout, built with PEFT on tiny random models (no network).

BERT (``query``, ``key``), GPT-2 (fused Conv1D ``c_attn``, ``fan_in_fan_out=True``) and LLaMA
with GQA (PEFT's default targets ``q_proj, v_proj``, and ``q_proj, k_proj``), each d = 64,
4 heads of d_h = 16, r = 4 with random lora_B. The merged weights equal PEFT's own
``merge_and_unload`` to 1e-6; the per-head change equals the merged model's minus the base's;
outputs are named ``<adapter> vs <base>`` with no absolute path; an adapter saved before
training (B = 0) is refused in one line.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from rmtbase.errors import ModelError

pytest.importorskip("peft")

D, H, L, R = 64, 4, 2, 4
OPTS = dict(stats="spectral", draws=200, progress=False, spectrum_draws=0)


def _model(kind):
    import torch
    import transformers as tf

    torch.manual_seed({"bert": 0, "gpt2": 1, "llama": 2}[kind])
    if kind == "bert":
        return tf.BertModel(tf.BertConfig(hidden_size=D, num_attention_heads=H,
                                          num_hidden_layers=L, intermediate_size=64,
                                          vocab_size=50))
    if kind == "gpt2":
        return tf.GPT2LMHeadModel(tf.GPT2Config(n_embd=D, n_head=H, n_layer=L, vocab_size=50,
                                                n_positions=16, bos_token_id=0,
                                                eos_token_id=0))
    return tf.LlamaForCausalLM(tf.LlamaConfig(hidden_size=D, num_attention_heads=H,
                                              num_key_value_heads=2, num_hidden_layers=L,
                                              intermediate_size=64, vocab_size=50))


def _adapter(root, kind, targets, *, train=True, rows=None, **kw):
    """Base folder, PEFT adapter folder and PEFT's merged state dict. ``rows``: only these
    (layer, output rows) of lora_B are nonzero (a planted change)."""
    import peft
    import torch

    base = root / f"{kind}-base"
    if not base.exists():
        _model(kind).save_pretrained(base)
    model = type(_model(kind)).from_pretrained(base)
    cfg = peft.LoraConfig(r=R, lora_alpha=8, target_modules=targets, **kw)
    pm = peft.get_peft_model(model, cfg)
    g = torch.Generator().manual_seed(7)
    if train:
        with torch.no_grad():
            for name, p in pm.named_parameters():
                if "lora_B" in name:
                    p.copy_(0.05 * torch.randn(p.shape, generator=g))
                    if rows is not None:
                        layer = int(name.split(".layers.")[1].split(".")[0])
                        keep = torch.zeros(p.shape[0], dtype=torch.bool)
                        keep[rows.get(layer, slice(0, 0))] = True
                        p[~keep] = 0.0
    name = f"{kind}-{'-'.join(targets)}{'' if train else '-untrained'}"
    pm.save_pretrained(root / name)
    merged = {k: v.detach().float().numpy() for k, v in pm.merge_and_unload().state_dict().items()}
    return base, root / name, merged


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("lora")
    return root, {
        "bert": _adapter(root, "bert", ["query", "key"]),
        "gpt2": _adapter(root, "gpt2", ["c_attn"], fan_in_fan_out=True),
        "llama_qv": _adapter(root, "llama", ["q_proj", "v_proj"]),
        "llama_qk": _adapter(root, "llama", ["q_proj", "k_proj"]),
    }


CASES = ("bert", "gpt2", "llama_qv", "llama_qk")


@pytest.mark.parametrize("case", CASES)
def test_merged_weights_equal_peft_merge(built, case):
    from rmtbase.models.lora import lora_weights

    base, adapter, merged = built[1][case]
    _, _, w = lora_weights(adapter, base, merged=True)
    assert w.deltas, "the adapter matched no base tensor"
    for name in w.deltas:
        key = name if name in merged else name.split(".", 1)[1]  # GPT2LMHeadModel prefix
        np.testing.assert_allclose(w.get(name), merged[key], rtol=0, atol=1e-6)
    w.close()


@pytest.mark.parametrize("case", CASES)
def test_head_changes_are_merged_minus_base(built, case):
    from rmtbase.models import load_heads
    from rmtbase.models.lora import lora_heads

    base, adapter, _ = built[1][case]
    for dl, ml, bl in zip(lora_heads(adapter, base), lora_heads(adapter, base, merged=True),
                          load_heads(base), strict=True):
        np.testing.assert_allclose(dl.wq, ml.wq - bl.wq, atol=1e-6)
        np.testing.assert_allclose(dl.wk, ml.wk - bl.wk, atol=1e-6)
        assert np.any(dl.wq)
        assert np.any(dl.wk) == (case != "llama_qv")


@pytest.mark.parametrize("case", CASES)
def test_every_layout_scores_named_after_the_adapter(built, case, module_cache):
    from rmtbase.scoring.matrices.delta import score_delta

    base, adapter, _ = built[1][case]
    ds = score_delta(str(adapter), str(base), **OPTS)
    assert ds.attrs["model"] == f"{adapter.name} vs {base.name}"
    assert ds.attrs["delta_of"] == adapter.name and ds.attrs["delta_base"] == base.name
    assert ds.attrs["delta_kind"] == "lora"
    assert ds.attrs["delta_sides"] == ("q" if case == "llama_qv" else "k,q")
    assert not any(isinstance(v, str) and str(built[0]) in v for v in ds.attrs.values())
    assert ds["head_p_value"].shape == (L, H) and not ds["unchanged"].any()
    assert np.isfinite(ds["head_p_value"].values).all()
    if case == "llama_qv":  # k.* describe the base: out of the decision
        fam = ds["in_family"].to_series()
        assert not fam[[s for s in fam.index if s.startswith("k.")]].any()
        assert "W_Q only" in ds.attrs["null"]


def test_planted_change_found_only_in_the_heads_it_touches(built, module_cache):
    """q_proj-only adapter whose lora_B is nonzero only in the rows of head 2 of layer 1:
    that head is changed and scored; every other head is `unchanged` (NaN, out of BH)."""
    from rmtbase.scoring.matrices.delta import score_delta

    root = built[0]
    dh = D // H
    base, adapter, _ = _adapter(root, "llama", ["q_proj"], rows={1: slice(2 * dh, 3 * dh)})
    ds = score_delta(str(adapter), str(base), **OPTS)
    want = np.ones((L, H), bool)
    want[1, 2] = False
    # exact: integers / booleans
    np.testing.assert_array_equal(ds["unchanged"].values, want)
    assert np.isfinite(ds["head_p_value"].values[1, 2])
    assert np.isnan(ds["head_p_value"].values[want]).all()
    assert not ds["head_flag"].values[want].any()
    assert ds["head_flag"].values[1, 2]  # rank 4 < d_h: far from the dense null
    # exact: integers / booleans
    np.testing.assert_array_equal(ds["delta_rel_q"].values > 0, ~want)
    assert (ds["delta_rel_k"].values == 0).all()
    from rmtbase.report.tables import summary_text

    text = summary_text(ds)
    assert "1 of 1 changed heads (7 unchanged, not scored)" in text and " nan" not in text


def test_untrained_adapter_is_refused_in_one_line(built):
    from rmtbase.scoring.matrices.delta import score_delta

    base, adapter, _ = _adapter(built[0], "bert", ["query", "key"], train=False)
    with pytest.raises(ModelError, match="this adapter changes nothing") as e:
        score_delta(str(adapter), str(base), **OPTS)
    assert "\n" not in str(e.value)


def test_adapter_on_values_only_is_refused(built):
    from rmtbase.scoring.matrices.delta import score_delta

    base, adapter, _ = _adapter(built[0], "llama", ["v_proj"])
    with pytest.raises(ModelError, match="changes no query/key weights") as e:
        score_delta(str(adapter), str(base), **OPTS)
    assert "\n" not in str(e.value)


@pytest.mark.slow
def test_cli_relative_paths_name_the_adapter(built, module_cache, capsys):
    import xarray as xr

    from rmtbase.cli import main

    root = built[0]
    base, adapter, _ = built[1]["gpt2"]
    cwd = os.getcwd()
    os.chdir(root)
    try:
        assert main(["score", adapter.name, "--base", base.name, "--out", "out", "--draws",
                     "200", "--no-figures", "--quiet", "--stats", "spectral"]) == 0
        with xr.open_dataset("out/scores.nc") as ds:
            assert ds.attrs["model"] == f"{adapter.name} vs {base.name}"
            assert not any(str(root) in str(v) for v in ds.attrs.values())
        assert main(["compare", "out", "--out", "cmp", "--no-figures"]) == 0
        text = " ".join(p.read_text(errors="replace") for p in (root / "cmp").rglob("*")
                        if p.is_file() and p.suffix in (".csv", ".json", ".txt", ".md"))
        assert f"{adapter.name} vs {base.name}" in text
    finally:
        os.chdir(cwd)


@pytest.mark.slow  # ~40 s under load: MiniLM scored at d = 384
def test_adapter_on_the_real_minilm(tmp_path, module_cache):
    """PEFT adapter (query, key; r = 4) on the shipped all-MiniLM-L6-v2 weights: the merge
    equals PEFT's, and the score is named after the adapter with the MiniLM folder's name."""
    import peft
    import torch
    import transformers as tf

    from rmtbase.models import default_model_path
    from rmtbase.models.lora import lora_weights
    from rmtbase.scoring.matrices.delta import score_delta

    path = default_model_path()
    pm = peft.get_peft_model(tf.BertModel.from_pretrained(path),
                             peft.LoraConfig(r=R, lora_alpha=8, target_modules=["query", "key"]))
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for name, p in pm.named_parameters():
            if "lora_B" in name:
                p.copy_(0.01 * torch.randn(p.shape, generator=g))
    pm.save_pretrained(tmp_path / "minilm-lora")
    merged = {k: v.detach().numpy() for k, v in pm.merge_and_unload().state_dict().items()}
    _, _, w = lora_weights(tmp_path / "minilm-lora", path, merged=True)
    assert len(w.deltas) == 12
    for name in w.deltas:
        key = name if name in merged else name.split(".", 1)[1]
        np.testing.assert_allclose(w.get(name), merged[key], rtol=0, atol=1e-6)
    w.close()
    ds = score_delta(str(tmp_path / "minilm-lora"), str(path), **OPTS)
    assert ds.attrs["model"] == "minilm-lora vs model" and ds["head_p_value"].shape == (6, 12)


def test_delta_label_names_both_sides(tmp_path):
    from rmtbase.scoring.matrices.delta import delta_label

    (tmp_path / "a" / "model").mkdir(parents=True)
    (tmp_path / "b" / "model").mkdir(parents=True)
    assert delta_label(tmp_path / "a" / "model", tmp_path / "b" / "model") == "a/model vs b/model"
    assert delta_label(str(tmp_path / "a"), "org/base-model") == "a vs org/base-model"
    cwd = os.getcwd()
    os.chdir(tmp_path / "a")
    try:
        assert delta_label("model", "../b") == "model vs b"
        assert delta_label(".", "../b") == "a vs b"
    finally:
        os.chdir(cwd)
