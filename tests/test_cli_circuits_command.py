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
    s = doc["summary"]  # the composition's draws and open pairs, also in a found line
    assert s["composition_draws"] >= 20 and s["composition_open_pairs"] >= 0
    assert sum(f"at {s['composition_draws']:,} draws" in t for t in doc["found"]) == 1
    assert any(t.startswith("no circuit found: no head after layer 0 reached a behaviour "
                            "label (repeat lengths tried: 5, 10, 20, 31") for t in doc["found"])
    summary = (tmp_path / "out" / "summary.txt").read_text(encoding="utf-8")
    for line in doc["found"]:
        assert line in summary


def test_refusals_come_before_any_work(tmp_path, capsys):
    """An encoder, a repeat length below 3 or beyond the context, a receiver or layer beyond the
    model and a malformed head are refused in one line naming what is wrong, before the model
    is read (nothing else on stderr: no stage started)."""
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
    # a receiver or layer the model does not have: from the config, before the composition
    assert "receiver L1H5 is not a head after layer 0 of this 2-layer, 2-head model" in \
        _refused(capsys, ["circuits", m, "--receivers", "L1H5", "--out", tmp_path / "o2"])
    assert "layers: 2 is not a layer after 0 of this 2-layer model" in _refused(
        capsys, ["circuits", m, "--layers", "2", "--out", tmp_path / "o2"])
    with pytest.raises(SystemExit):
        main(["circuits", str(m), "--receivers", "2.1"])
    assert "L<layer>H<head>" in capsys.readouterr().err
    assert not (tmp_path / "o1").exists() and not (tmp_path / "o2").exists()


#: Every option of ``rmtbase circuits`` by the mode it belongs to (the test below fails on an
#: option in none of them), with values within the option's bounds, the falsy ones among them
#: (a value out of bounds is refused before the mode is looked at: tests/test_bounds_property.py).
SHARED = {"help", "model", "out", "overwrite", "json", "no_figures", "quiet", "counterfactual",
          "task", "threads"}
HEAD_VALUES = {"k": ["1", "3"], "layers": ["1", "2,3"], "receivers": ["L1H0"],
               "repeat_length": ["auto", "5"], "text": ["", "t.txt"], "draws": ["200"],
               "seed": ["0", "7"], "sinks": [None], "mlp_paths": ["off", "auto", "on"]}
TASK_VALUES = {"metric": ["logit_diff", "kl"], "top": ["0", "20"], "holdout": ["0", "0.0", "0.5"],
               "evaluate": ["", "c.json"], "composition": ["", "c.nc"], "force": [None]}


def _options():
    """{dest: option string} of every option of ``rmtbase circuits``' parser."""
    import argparse

    from rmtbase.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {a.dest: (a.option_strings or [a.dest])[-1] for a in sub.choices["circuits"]._actions}


def test_an_option_of_the_other_mode_is_refused_whatever_its_value(tmp_path, capsys):
    """Every option belongs to one mode or both (a new option must be placed here); each
    head-search option given with --task, and each task option given without it, is refused in
    one line naming it, exit 2, nothing written, for every value, 0 and the default included."""
    from rmtbase.cli.circuits_task import HEAD_OPTIONS, TASK_DEFAULTS

    opts = _options()
    assert set(opts) == SHARED | set(HEAD_VALUES) | set(TASK_VALUES), \
        "an option of rmtbase circuits in no mode: place it in SHARED, HEAD_ or TASK_VALUES"
    assert set(HEAD_VALUES) == set(HEAD_OPTIONS)
    assert set(TASK_DEFAULTS) - {"counterfactual"} <= set(TASK_VALUES)
    out = tmp_path / "o"
    for mode, values, other in (("head", HEAD_VALUES, ["--task", "ioi"]), ("task", TASK_VALUES,
                                                                           [])):
        for dest, vals in values.items():
            for v in vals:
                argv = ["circuits", str(tmp_path / "model"), *other, opts[dest],
                        *([] if v is None else [v]), "--out", str(out)]
                try:
                    rc = main(argv)
                except SystemExit as e:
                    rc = e.code
                err = capsys.readouterr().err.strip().splitlines()
                assert rc == 2 and len(err) == 1, (argv, rc, err)
                assert opts[dest] in err[0], (argv, err)
                assert ("head-behaviour search" if mode == "head" else "--task") in err[0]
                assert not out.exists()
