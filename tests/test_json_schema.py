"""Every command's ``--json`` document names its layout: ``"schema": "rmtbase.<command>/1"``
first, and docs/json.md lists each command's schema name.

Each command with a ``--json`` option is run in-process on the cheapest input it takes (tiny
random models, a 10-draw table, a stub study) and its stdout parsed; a command given a
``--json`` option later without a schema here or in docs/json.md fails
:func:`test_every_json_command_is_covered_and_documented`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from rmtbase.cli import build_parser, main

DOC = Path(__file__).resolve().parents[1] / "docs" / "json.md"
SPECTRAL = ["--stats", "spectral", "--no-figures", "--quiet"]
#: The commands this file runs with --json.
COVERED = {"score", "heavy-tail", "circuits", "compare", "probe", "study", "baseline",
           "constants", "spectrum", "elementwise", "product-network"}


def _doc(capsys, argv) -> dict:
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


def _schema_first(doc, command):
    assert isinstance(doc, dict)
    assert next(iter(doc)) == "schema"
    version = {"circuits": 2, "score": 2}.get(command, 1)  # docs/json.md's table
    assert doc["schema"] == f"rmtbase.{command}/{version}"


def _json_commands() -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name for name, p in sub.choices.items()
            if any("--json" in a.option_strings for a in p._actions)}


def test_every_json_command_is_covered_and_documented():
    commands = _json_commands()
    assert commands == COVERED
    text = DOC.read_text(encoding="utf-8")
    from rmtbase.cli._common import json_schema

    for c in commands:
        assert json_schema(c) in text, c
    assert json_schema("circuits") == "rmtbase.circuits/2"


@pytest.mark.parametrize("argv", [
    ["constants", "--digits", "5", "--quiet"],
    ["spectrum", "--d", "16", "--dh", "4"],
    ["elementwise", "--dh", "4"],
    ["product-network", "--kind", "ginibre", "--depth", "1", "--gain", "1", "--d", "10"],
])
def test_analytic_commands(argv, capsys):
    doc = _doc(capsys, [*argv, "--json"])
    _schema_first(doc, argv[0])
    assert len(doc) > 1


def test_an_undefined_number_is_null(capsys):
    """The analytic commands' and ``baseline --summary``'s writer (``emit``) is strict JSON."""
    from rmtbase.cli._common import emit

    emit({"a": float("nan"), "b": [float("-inf"), 1.5]}, True, command="spectrum")
    doc = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(c))
    assert doc == {"schema": "rmtbase.spectrum/1", "a": None, "b": [None, 1.5]}


def test_baseline_summary(tmp_path, capsys):
    table = tmp_path / "t.nc"
    assert main(["baseline", "--d", "16", "--dh", "4", "--draws", "10", "--stats", "spectral",
                 "--no-progress", "--out", str(table)]) == 0
    capsys.readouterr()
    doc = _doc(capsys, ["baseline", "--summary", str(table), "--json"])
    _schema_first(doc, "baseline")
    assert "npr" in doc


def test_score_and_compare(tmp_path, capsys, score_cache):
    from _checkpoints import gpt2

    model = gpt2(tmp_path / "tiny-gpt2", seed=0)
    doc = _doc(capsys, ["score", str(model), *SPECTRAL, "--json", "--out", str(tmp_path / "s")])
    _schema_first(doc, "score")
    assert doc["command"] == "rmtbase score" and doc["entries"]
    doc = _doc(capsys, ["compare", str(tmp_path / "s"), "--no-figures", "--json",
                        "--out", str(tmp_path / "c")])
    _schema_first(doc, "compare")
    assert doc["models"]
    doc = _doc(capsys, ["heavy-tail", str(model), "--draws", "3", "--no-figures", "--quiet",
                        "--json", "--out", str(tmp_path / "h")])
    _schema_first(doc, "heavy-tail")
    assert doc["command"] == "rmtbase heavy-tail" and doc["entries"][0]["matrices"]


def test_probe(tmp_path, capsys):
    import _probe_models as pm

    model = pm.llama(tmp_path / "tiny-llama")
    text = tmp_path / "prose.txt"
    text.write_text(pm.TEXT, encoding="utf-8")
    doc = _doc(capsys, ["probe", str(model), "--text", str(text), "--window", "16", "--quiet",
                        "--no-figures", "--json", "--out", str(tmp_path / "p")])
    _schema_first(doc, "probe")
    assert doc["heads"]


def test_study(tmp_path, capsys, monkeypatch):
    """The study itself is a stub writing one file (its JSON is what is tested)."""
    import rmtbase.studies as studies

    def fake(out_dir, quick=False, seed=0):
        (out_dir / "claims.csv").write_text("claim,holds\nx,yes\n")
        return {"figures": [], "data": [str(out_dir / "claims.csv")], "summary": {"k0": 1.2}}

    monkeypatch.setattr(studies, "get", lambda name: type("M", (), {"run": staticmethod(fake)}))
    doc = _doc(capsys, ["study", "weibull_anchor", "--out", str(tmp_path / "st"), "--json"])
    _schema_first(doc, "study")
    assert doc["summary"] == {"k0": 1.2}


def test_score_circuit_keys_are_documented():
    """Every key of a ``--json`` circuit object (rmtbase.circuits.circuit_list, on a one-row
    candidate Dataset built here) and the composition's new keys are named in docs/json.md."""
    import numpy as np
    import xarray as xr

    from rmtbase.circuits import circuit_list

    row = {"kind": "k", "from": "L1H0", "to": "L2H1", "label_from": "previous-token",
           "label_to": "induction", "rank_weights": 1, "effect_causal": 0.4, "effect_se": 0.01,
           "confirmed": 1, "dominant": 1, "redundant": 0, "metric": "induction",
           "path": "direct", "length_to": 10, "n_sequences": 80, "rank_attribution": 2,
           "attribution": 0.35, "score_to": 0.8, "role": "supports", "joint_effect": 0.5,
           "joint_se": 0.02, "dependency": 0, "joint_contradicts": 0, "ablation": "mean",
           "effect_zero": 0.5, "effect_mean": 0.4, "effect_resample": 0.38, "depends": "",
           "faithfulness": 0.9, "faithfulness_se": 0.02, "faithfulness_empty": 0.1, "idle": 0}
    ds = xr.Dataset({k: ("candidate", np.array([v])) for k, v in row.items()})
    keys = set(circuit_list(ds)[0])
    assert {"kind", "from", "to", "label_from", "label_to", "rank_weights", "effect_causal",
            "confirmed", "dominant", "path", "label_length", "attribution", "ablation",
            "effect_zero", "effect_mean", "effect_resample", "depends", "faithfulness",
            "faithfulness_se", "faithfulness_empty", "idle"} <= keys
    assert "explained" not in keys
    text = DOC.read_text(encoding="utf-8")
    for k in sorted(keys | {"circuits", "standing", "found", "rank_source", "rank_kind"}):
        assert f"`{k}`" in text, k
