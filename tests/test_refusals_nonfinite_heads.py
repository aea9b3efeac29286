"""Non-finite weights with ``--composition --probe`` are refused before the
heads' scoring, in one line naming the heads (``L<l>H<h>``, which factors) as well as the
tensor, in every kind of file: an fp32, fp16 or bf16 safetensors folder and a GGUF, its block
formats included. Before, the check named the tensor only, and skipped a GGUF's block-format
tensors (a NaN block scale in Q8_0 went on to the score)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from _no_scoring import forbid

from rmtbase.cli import main
from rmtbase.errors import ModelError

D, HEADS = 64, 4
D_H = D // HEADS


@pytest.fixture
def no_scoring(monkeypatch):
    import rmtbase.baseline.cache as cache
    import rmtbase.probe as probe
    import rmtbase.scoring.score as score

    forbid(monkeypatch, (score, "score_model"), (score, "score_heads"), (cache, "null_table"),
           (probe, "probe_model"))


def _gpt2(folder, edit, dtype=None, keep=False):
    import torch
    import transformers as tf

    torch.manual_seed(0)
    cfg = tf.GPT2Config(n_embd=D, n_head=HEADS, n_layer=2, vocab_size=50, n_positions=128,
                        bos_token_id=0, eos_token_id=0)
    model = tf.GPT2LMHeadModel(cfg)
    with torch.no_grad():
        edit(model)
    if dtype is not None:
        model = model.to(getattr(torch, dtype))
    if keep:
        return model
    model.save_pretrained(folder)
    return folder


def _nan_q_l0h2(model):  # c_attn columns 0..d are W_Q, 16 a head: head 2 is 32..48
    model.transformer.h[0].attn.c_attn.weight[3, 32 + 5] = float("nan")


def _inf_v_l1h1(model):  # columns 2d + 16 .. 2d + 32: W_V of head 1
    model.transformer.h[1].attn.c_attn.weight[0, 2 * D + 16] = float("inf")


def test_composition_probe_names_the_head_before_the_score(tmp_path, capsys, no_scoring):
    folder = _gpt2(tmp_path / "nan", _nan_q_l0h2)
    capsys.readouterr()
    code = main(["score", str(folder), "--composition", "--probe", "--quiet",
                 "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "head L0H2 (W_Q or W_K) of" in err[0] and "non-finite" in err[0]
    assert "'transformer.h.0.attn.c_attn.weight'" in err[0]
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_folders_name_the_head(tmp_path, dtype):
    from rmtbase.models.finite import check_finite_model

    folder = _gpt2(tmp_path / dtype, _inf_v_l1h1, dtype)
    with pytest.raises(ModelError, match=r"^head L1H1 \(W_O or W_V\) of .* non-finite") as info:
        check_finite_model(str(folder), False)
    assert "transformer.h.1.attn.c_attn.weight" in str(info.value)


def test_an_mlp_tensor_is_named_as_a_tensor(tmp_path):
    from rmtbase.models.finite import check_finite_model

    def nan_mlp(model):
        model.transformer.h[0].mlp.c_fc.weight[0, 0] = float("nan")

    folder = _gpt2(tmp_path / "mlp", nan_mlp)
    with pytest.raises(ModelError, match=r"^tensor 'transformer.h.0.mlp.c_fc.weight' in "):
        check_finite_model(str(folder), False)


@pytest.mark.parametrize("qtype", ["F32", "Q8_0"])
def test_a_gguf_names_the_head_in_every_storage(tmp_path, qtype):
    """Head 2 of layer 1's W_Q holds a NaN (HF rows 32..48; llama.cpp's rotary permutation
    moves rows within a head only). In Q8_0 the NaN makes its block's scale NaN."""
    pytest.importorskip("gguf")
    import _gguf

    from rmtbase.models.finite import check_finite_model

    rng = np.random.default_rng(0)
    layers = [{p: rng.normal(0.0, 0.02, size=(D, D)) for p in "qkvo"} for _ in range(2)]
    layers[1]["q"][2 * D_H + 3, 7] = np.nan
    with warnings.catch_warnings():  # gguf's quantiser casts the NaN block to int8
        warnings.simplefilter("ignore", RuntimeWarning)
        path = _gguf.write_llama(tmp_path / f"m-{qtype}.gguf", layers, d=D, n_heads=HEADS,
                                 n_kv_heads=HEADS, qtype=qtype)
    with pytest.raises(ModelError, match=r"^head L1H2 \(W_Q or W_K\) of .* non-finite") as info:
        check_finite_model(str(path), False)
    assert "'blk.1.attn_q.weight'" in str(info.value)



def test_pickled_weights_are_checked_before_the_score(tmp_path):
    """A ``pytorch_model.bin`` folder (read with --allow-pickle): before, the check returned
    without reading it (the NaN was found only by the probe's loader, after the score)."""
    import torch

    from rmtbase.models.finite import check_finite_model

    def nan_mlp(model):
        model.transformer.h[1].mlp.c_proj.weight[2, 2] = float("nan")

    for edit, match in ((nan_mlp, r"^tensor 'transformer.h.1.mlp.c_proj.weight' in "),
                        (_nan_q_l0h2, r"^head L0H2 \(W_Q or W_K\) of .* non-finite")):
        folder = _gpt2(tmp_path / edit.__name__, edit)
        (folder / "model.safetensors").unlink()
        model = _gpt2(tmp_path / "again", edit, keep=True)
        torch.save(model.state_dict(), folder / "pytorch_model.bin")
        with pytest.raises(ModelError, match=match):
            check_finite_model(str(folder), True)


def test_plain_score_and_composition_name_the_head(tmp_path, capsys):
    """Without --probe there is no pre-check: the reader refuses the tensor where the layer is
    read, and score_model / composition name the heads behind it, API and CLI alike."""
    import rmtbase

    nan = _gpt2(tmp_path / "nan", _nan_q_l0h2)
    with pytest.raises(ModelError, match=r"^head L0H2 \(W_Q or W_K\) of .*non-finite.*\(tensor "):
        rmtbase.score_model(str(nan), stats="spectral", draws=200, progress=False)
    inf = _gpt2(tmp_path / "inf", _inf_v_l1h1)
    with pytest.raises(ModelError, match=r"^head L1H1 \(W_O or W_V\) of .*non-finite"):
        rmtbase.composition(str(inf), draws=200, progress=False)
    capsys.readouterr()
    assert main(["score", str(nan), "--stats", "spectral", "--draws", "200", "--no-figures",
                 "--out", str(tmp_path / "out")]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("rmtbase: error: head L0H2 (W_Q or W_K)"), err
    assert not (tmp_path / "out").exists()
