"""Red-team inputs that would score as if valid. An FP8 checkpoint with a negative
block scale, one whose config says ``weight_block_size [0, 0]``, and a PEFT LoRA adapter whose
``target_modules`` match none of its modules are each refused in one line (exit 2 from the
CLI) naming the file and the offending value, and no output is written."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _fp8 import write_fp8
from safetensors.numpy import save_file

from rmtbase.cli import main
from rmtbase.errors import ModelError

ARGS = ["--draws", "200", "--stats", "spectral", "--quiet", "--no-figures"]


def _llama(d=256, layers=1, seed=0):
    import torch
    import transformers as tf

    torch.manual_seed(seed)
    return tf.LlamaForCausalLM(tf.LlamaConfig(
        hidden_size=d, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=layers,
        intermediate_size=128, vocab_size=64, max_position_embeddings=16))


def _refused(argv, capsys, *needles):
    capsys.readouterr()
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.count("\n") == 1 and err.startswith("rmtbase: error: "), err
    for n in needles:
        assert n in err, err
    return err


@pytest.fixture(scope="module")
def fp8_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("redteam-fp8") / "llama-fp8"
    write_fp8(_llama(), folder)
    return folder


def _copy(src, dst):
    import shutil

    shutil.copytree(src, dst)
    return dst


@pytest.mark.parametrize("bad", [-1.0, 0.0, np.inf])
def test_fp8_scale_not_finite_positive_is_refused(fp8_folder, tmp_path, capsys, bad):
    """A scale that is negative, infinite, or zero over a tile that holds nonzero bytes (the
    writer stores 0 only for an all-zero tile) is refused when the weight is read."""
    import safetensors.torch as st

    folder = _copy(fp8_folder, tmp_path / "m")
    tensors = st.load_file(str(folder / "model.safetensors"))  # float8 tensors: torch only
    name = "model.layers.0.self_attn.k_proj.weight_scale_inv"
    assert (tensors[name] > 0).all()
    tensors[name][0, 1] = bad
    st.save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    out = tmp_path / "out"
    where = ["(0, 1)"] if np.isfinite(bad) else []  # inf: the reader's finiteness check
    _refused(["score", str(folder), *ARGS, "--out", str(out)], capsys,
             "k_proj.weight_scale_inv", "model.safetensors", *where)
    assert not out.exists()
    from rmtbase.models import load_heads

    with pytest.raises(ModelError, match="scale"):
        list(load_heads(str(folder)))


@pytest.mark.parametrize("size", [[0, 0], [128, 0], [-128, 128], [128], "128", [128.5, 128]])
def test_fp8_block_size_below_one_or_malformed_is_refused(fp8_folder, tmp_path, capsys, size):
    folder = _copy(fp8_folder, tmp_path / "m")
    cfg = json.loads((folder / "config.json").read_text())
    cfg["quantization_config"]["weight_block_size"] = size
    (folder / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "out"
    _refused(["score", str(folder), *ARGS, "--out", str(out)], capsys,
             "weight_block_size", "config.json", json.dumps(size))
    assert not out.exists()
    from rmtbase.models import model_info

    with pytest.raises(ModelError, match="weight_block_size"):  # from the config alone
        model_info(str(folder))


def test_fp8_other_block_size_is_refused_not_read_as_128(fp8_folder, tmp_path, capsys):
    """[64, 64] is a valid size but not the 128x128 tiles the reader (and the null) use: the
    scales would be read against the wrong tiles, so it is refused up front."""
    folder = _copy(fp8_folder, tmp_path / "m")
    cfg = json.loads((folder / "config.json").read_text())
    cfg["quantization_config"]["weight_block_size"] = [64, 64]
    (folder / "config.json").write_text(json.dumps(cfg))
    _refused(["score", str(folder), *ARGS, "--out", str(tmp_path / "out")], capsys,
             "weight_block_size", "[64, 64]", "128")


def test_fp8_writer_zero_tile_still_reads(tmp_path):
    """The reference writer stores scale 0 for an all-zero tile: read as zeros, not refused."""
    from rmtbase.models._fp8 import dequantize, quantize

    w = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32)
    w[:128, 128:] = 0.0
    q, s = quantize(w)
    assert s[0, 1] == 0.0
    got = dequantize(q.view(np.uint8), s)
    assert (got[:128, 128:] == 0).all() and np.isfinite(got).all()


@pytest.fixture(scope="module")
def lora_base(tmp_path_factory):
    folder = tmp_path_factory.mktemp("redteam-lora") / "base"
    _llama(d=64, layers=2, seed=3).save_pretrained(folder)
    return folder


def _lora(folder, targets, modules=("q_proj", "k_proj"), layers=2, d=64, r=4):
    rng = np.random.default_rng(5)
    tensors = {}
    for i in range(layers):
        for m in modules:
            out = d if m == "q_proj" else d // 2  # 2 of 4 heads of d_h 16 for keys (GQA)
            pre = f"base_model.model.model.layers.{i}.self_attn.{m}"
            tensors[f"{pre}.lora_A.weight"] = (0.05 * rng.standard_normal((r, d))).astype(
                np.float32)
            tensors[f"{pre}.lora_B.weight"] = (0.05 * rng.standard_normal((out, r))).astype(
                np.float32)
    folder.mkdir()
    save_file(tensors, str(folder / "adapter_model.safetensors"))
    (folder / "adapter_config.json").write_text(json.dumps(
        {"peft_type": "LORA", "r": r, "lora_alpha": 8, "target_modules": targets}))
    return folder


@pytest.mark.parametrize("targets", [["nothing_proj"], "model\\.layers\\.9\\.mlp\\.up_proj", []])
def test_lora_target_modules_matching_nothing_is_refused(lora_base, tmp_path, capsys, targets):
    adapter = _lora(tmp_path / "adapter", targets)
    out = tmp_path / "out"
    _refused(["score", str(adapter), "--base", str(lora_base), *ARGS, "--out", str(out)],
             capsys, "target_modules", "adapter_config.json", json.dumps(targets))
    assert not out.exists()


def test_lora_weights_outside_target_modules_are_refused(lora_base, tmp_path, capsys):
    """PEFT loads only the targeted modules: an adapter holding k_proj weights while its config
    targets q_proj alone is not what PEFT would apply."""
    adapter = _lora(tmp_path / "adapter", ["q_proj"])
    _refused(["score", str(adapter), "--base", str(lora_base), *ARGS,
              "--out", str(tmp_path / "out")], capsys, "k_proj", "target_modules")


@pytest.mark.parametrize("targets", [["q_proj", "k_proj"], ".*\\.(q_proj|k_proj)",
                                     "all-linear", None])
def test_lora_matching_target_modules_still_read(lora_base, tmp_path, targets):
    from rmtbase.models.lora import lora_weights

    adapter = _lora(tmp_path / "adapter", targets)
    _, _, w = lora_weights(adapter, lora_base, merged=False)
    assert len(w.deltas) == 4
    w.close()


@pytest.mark.parametrize("bad", [-0.5, 0.0, np.nan])
def test_fp8_row_scale_not_finite_positive_is_refused(bad):
    """Per-channel FP8 (compressed-tensors ``weight_scale``): the same rule per row."""
    from rmtbase.models._fp8 import dequantize_rows, quantize_rows

    w = np.random.default_rng(1).standard_normal((8, 32)).astype(np.float32)
    w[5] = 0.0
    q, s = quantize_rows(w)
    assert s[5, 0] == 0.0  # an all-zero row's 0 scale reads as zeros
    assert (dequantize_rows(q.view(np.uint8), s)[5] == 0).all()
    s[3, 0] = bad
    with pytest.raises(ValueError, match=r"^FP8 scale w\.weight_scale holds .* at row 3 "):
        dequantize_rows(q.view(np.uint8), s, "w.weight")
