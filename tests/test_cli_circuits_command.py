"""``rmtbase circuits MODEL`` (rmtbase.cli.circuits): the circuit search alone — composition,
labels at several repeat lengths, every source screened and patched — with its output folder,
``--json`` and its refusals before any work (the family from the config alone, bad lengths,
bad heads). Random-weight models from configs, no network."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from rmtbase.cli import main

pytest.importorskip("torch")
pytest.importorskip("transformers")


def _gpt2(path, n_positions=64, vocab=40):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=vocab, n_positions=n_positions,
                     bos_token_id=0, eos_token_id=0)
    GPT2LMHeadModel(cfg).save_pretrained(path)
    return path


def _refused(capsys, argv) -> str:
    assert main([str(a) for a in argv]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_an_untrained_model_has_no_circuit_and_every_line_is_reachable(tmp_path):
    """An untrained GPT-2: no head earns a label at any repeat length tried (5, 10, 20, 31
    fit 64 positions and 39 usable ids), nothing confirmed, and the found lines say so with
    the lengths tried; the folder holds composition.nc, circuits.nc, summary.txt (every line)
    and the figure; --json is the documented document."""
    m = _gpt2(tmp_path / "g")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(["circuits", str(m), "--draws", "200", "--out", str(tmp_path / "out"),
                   "--json", "--quiet"])
    assert rc == 0
    doc = json.loads(buf.getvalue())
    assert doc["schema"] == "rmtbase.circuits/2"
    assert {"circuits.nc", "composition.nc", "summary.txt", "figures/circuits.png"} <= set(
        doc["files"])
    assert not any(c["confirmed"] for c in doc["circuits"])
    assert doc["summary"]["repeat_lengths"] == "5, 10, 20, 31"
    assert any(t.startswith("no circuit found: no head after layer 0 reached a behaviour "
                            "label (repeat lengths tried: 5, 10, 20, 31") for t in doc["found"])
    summary = (tmp_path / "out" / "summary.txt").read_text(encoding="utf-8")
    for line in doc["found"]:
        assert line in summary


def test_refusals_come_before_any_work(tmp_path, capsys):
    """An encoder, a repeat length below 3 or beyond the context, and a malformed head are
    refused in one line naming what is wrong, before the model is read."""
    from transformers import BertConfig

    bert = tmp_path / "bert"
    bert.mkdir()
    BertConfig(num_hidden_layers=1, hidden_size=16, num_attention_heads=2,
               intermediate_size=16).to_json_file(bert / "config.json")
    assert "not the encoder 'bert'" in _refused(capsys, ["circuits", bert, "--out",
                                                         tmp_path / "o1"])
    m = _gpt2(tmp_path / "g")
    capsys.readouterr()  # save_pretrained's progress
    assert "at least 3" in _refused(capsys, ["circuits", m, "--repeat-length", "2", "--out",
                                             tmp_path / "o2"])
    assert "needs 81 positions; the model has 64" in _refused(
        capsys, ["circuits", m, "--repeat-length", "5,40", "--out", tmp_path / "o3"])
    with pytest.raises(SystemExit):
        main(["circuits", str(m), "--receivers", "2.1"])
    assert "L<layer>H<head>" in capsys.readouterr().err
    assert not (tmp_path / "o1").exists() and not (tmp_path / "o2").exists()
