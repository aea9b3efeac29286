"""The storage read is named wherever the precision is: the first line of the
terminal table and ``summary.txt``, the summary's storage sentence, report.html's storage row
and ``--json`` say ``Q4_1`` / ``Q5_0`` / ``fp8_e4m3`` and the null drawn for it, not the
float32 the weights were dequantised to (what they said before)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr

from rmtbase.report.storage_text import null_storage_read, storage_name, storage_read
from rmtbase.report.tables import anomaly_table, summary_text


def _fake(layers=3, **attrs):
    ds = xr.Dataset({"head_flag": (("layer", "head"), np.zeros((layers, 2), bool))},
                    coords={"layer": np.arange(layers), "head": np.arange(2)})
    ds.attrs.update(dict(model="m", architecture="llama", d=64, d_h=16, alpha=0.05,
                         storage_dtype="float32", storage_dtypes="float32"), **attrs)
    return ds


def test_names_in_ggml_spelling():
    assert storage_name("q4_1") == "Q4_1" and storage_name("q5_0") == "Q5_0"
    assert storage_name("q4_k+q8_0") == "Q4_K+Q8_0"
    assert storage_name("fp8_e4m3") == "fp8_e4m3" and storage_name("bfloat16") == "bfloat16"


def test_one_storage_and_mixed_storages_with_counts():
    ds = _fake(quantisation="q4_1", null_storage="q4_1")
    assert storage_read(ds) == "Q4_1" and null_storage_read(ds) == "Q4_1"
    ds = _fake(quantisation="none", null_storage="bfloat16", storage_dtypes="bfloat16",
               storage_dtype="bfloat16")
    assert storage_read(ds) == "bfloat16" and null_storage_read(ds) == "bfloat16"
    # Gemma-3 Q4_K_M-like: q/k Q5_0 in most layers, Q8_0 in some (the score keeps per-layer
    # variables when layers differ)
    ds = _fake(layers=4, quantisation="q5_0 (layers 0-2), q8_0 (layer 3)",
               null_storage="q5_0 (layers 0-2), q8_0 (layer 3)")
    ds["layer_quantisation"] = (("layer",), np.array(["q5_0", "q5_0", "q8_0", "q5_0"]))
    ds["layer_null_storage"] = (("layer",), np.array(["q5_0", "q5_0", "q8_0", "q5_0"]))
    assert storage_read(ds) == "Q5_0 (3 layers), Q8_0 (1 layer)"
    assert null_storage_read(ds) == "Q5_0 (3 layers), Q8_0 (1 layer)"
    # a float layer beside quantised ones: the float storage is named for it
    ds["layer_quantisation"] = (("layer",), np.array(["none", "q4_k+q8_0", "q4_k+q8_0",
                                                      "q4_k+q8_0"]))
    assert storage_read(ds) == "float32 (1 layer), Q4_K+Q8_0 (3 layers)"


def _first_line(ds) -> str:
    return anomaly_table(ds, 3).splitlines()[0]


@pytest.mark.slow  # ~1-2 min: 30 layers of SmolLM2 and the Q4_1 null at 576 x 64
def test_smollm2_gguf_first_line_names_q4_1(score_cache):
    from test_gguf import _smollm2

    from rmtbase.scoring import score_model

    ds = score_model(_smollm2(), stats=["qk.npr"], draws=40, progress=False, spectrum_draws=0,
                     max_draws=1000)
    line = _first_line(ds)
    assert "stored Q4_1, null Q4_1" in line and "float32" not in line, line


def test_q5_0_gguf_named_in_first_line_summary_json_and_report(tmp_path, score_cache, capsys):
    """A small llama GGUF written with the gguf package in Q5_0, scored by the CLI: the
    terminal/summary first line, the summary's storage sentence, --json and report.html's
    storage row name Q5_0 (and the Q5_0 null)."""
    pytest.importorskip("gguf")
    import _gguf

    from rmtbase.cli import main

    rng = np.random.default_rng(11)
    layers = [{"q": 0.02 * rng.standard_normal((64, 64)), "k": 0.02 * rng.standard_normal((32, 64))}
              for _ in range(2)]
    path = _gguf.write_llama(tmp_path / "m.gguf", layers, d=64, n_heads=4, n_kv_heads=2,
                             qtype="Q5_0")
    out = tmp_path / "out"
    assert main(["score", str(path), "--out", str(out), "--stats", "spectral", "--draws", "200",
                 "--json", "--quiet"]) == 0, capsys.readouterr().err
    doc = json.loads(capsys.readouterr().out)
    assert doc["entries"][0]["storage"]["read"] == "Q5_0"
    assert doc["entries"][0]["storage"]["null"] == "Q5_0"
    summary = (out / "summary.txt").read_text()
    assert "stored Q5_0, null Q5_0" in summary.splitlines()[0], summary.splitlines()[0]
    assert "Storage of W_Q/W_K read: Q5_0" in summary
    html = (out / "report.html").read_text()
    assert '["storage", "Q5_0"]' in html or '["storage","Q5_0"]' in html


@pytest.mark.slow  # the Q5_0 nulls at 256 x 32 (spectral 200, profile 18,000 draws): ~1 min
def test_gemma3_q4_k_m_gguf_with_q_k_in_q5_0_is_named_q5_0(tmp_path, score_cache, capsys):
    """The Gemma-3 Q4_K_M GGUF (q/k in Q5_0) cannot be downloaded here: a random Gemma-3
    (2 layers, d = 256, 4 query heads on 1 key head, d_h = 32) written as llama.cpp's converter
    does (norms + 1), q/k in Q5_0, every other matrix in Q4_K, general.file_type Q4_K_M. The
    CLI's first line, summary.txt's storage sentence, --json and report.html's storage row name
    Q5_0 (what q/k are stored in) and the Q5_0 null — not float32 (what the weights were
    dequantised to) and not the file's Q4_K_M."""
    pytest.importorskip("gguf")
    transformers = pytest.importorskip("transformers")
    import _gguf
    import torch

    from rmtbase.cli import main

    torch.manual_seed(3)
    cfg = transformers.Gemma3TextConfig(
        vocab_size=64, hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=1, head_dim=32, intermediate_size=256, max_position_embeddings=64,
        pad_token_id=0)
    model = transformers.AutoModelForCausalLM.from_config(cfg)
    path = _gguf.write_hf(model, tmp_path / "gemma3.gguf", "gemma3", qtype="Q4_K",
                          qtypes={"attn_q": "Q5_0", "attn_k": "Q5_0"},
                          file_type="MOSTLY_Q4_K_M")
    import gguf

    types = {t.name: t.tensor_type.name for t in gguf.GGUFReader(str(path)).tensors}
    assert types["blk.0.attn_q.weight"] == "Q5_0" and types["blk.1.attn_k.weight"] == "Q5_0"
    assert types["blk.0.attn_v.weight"] == "Q4_K" and types["blk.0.ffn_up.weight"] == "Q4_K"
    out = tmp_path / "out"
    assert main(["score", str(path), "--out", str(out), "--stats", "spectral", "--draws", "200",
                 "--json", "--quiet"]) == 0, capsys.readouterr().err
    doc = json.loads(capsys.readouterr().out)
    assert doc["entries"][0]["storage"]["read"] == "Q5_0", doc["entries"][0]["storage"]
    assert doc["entries"][0]["storage"]["null"] == "Q5_0"
    summary = (out / "summary.txt").read_text()
    first = summary.splitlines()[0]
    assert "stored Q5_0, null Q5_0" in first and "float32" not in first, first
    assert "Q4_K" not in first, first
    assert "Storage of W_Q/W_K read: Q5_0" in summary
    html = (out / "report.html").read_text()
    assert '["storage", "Q5_0"]' in html or '["storage","Q5_0"]' in html


@pytest.mark.slow  # ~30 s under load: the fp8 null's first compile
def test_block_fp8_first_line_names_fp8_e4m3(tmp_path, score_cache):
    from _fp8 import write_fp8
    from test_fp8 import _llama

    from rmtbase.scoring.score import score_model

    folder = tmp_path / "llama-fp8"
    write_fp8(_llama(), folder)
    ds = score_model(str(folder), stats="spectral", draws=200, progress=False,
                     spectrum_draws=0)
    line = _first_line(ds)
    assert "stored fp8_e4m3, null fp8_e4m3" in line, line
    assert "Storage of W_Q/W_K read: fp8_e4m3" in summary_text(ds)


def test_float_models_keep_their_float_name():
    ds = _fake(quantisation="none", null_storage="float32")
    assert "stored float32, null float32" in _first_line_fake(ds)


def _first_line_fake(ds) -> str:
    from rmtbase.report.tables import _headline

    return _headline(ds)
