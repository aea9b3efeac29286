"""The score pipeline as one library call (:func:`rmtbase.pipeline.run_score`) writes, through
:func:`rmtbase.report.write.write_report`, the files ``rmtbase score`` writes: compared file by
file with the restructure check's digest (``scripts/output_digest.py``: netCDF variables by
their stored bytes, every other file by its bytes or text, run-time provenance such as
``created`` stripped). The same seed and settings, one process, so the numbers must agree bit
for bit."""

from __future__ import annotations

from pathlib import Path

import pytest
from _scripts import load

from rmtbase.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _digest(folder: Path) -> list[str]:
    return load("scripts/output_digest.py").digest([folder])


def _both(tmp_path, model, text, *, figures: bool):
    """(the CLI's files, the library call's files), digested: ``rmtbase score MODEL
    --composition --probe --text TEXT`` and the same request run and written."""
    from rmtbase.pipeline import ScoreRequest, run_score
    from rmtbase.report.write import write_report
    from rmtbase.scoring.settings import CompositionSettings, ScoreSettings

    cli_out, lib_out = tmp_path / "cli", tmp_path / "lib"
    argv = ["score", str(model), "--composition", "--probe", "--text", str(text), "--draws",
            "300", "--max-draws", "300", "--stats", "spectral", "--quiet", "--out",
            str(cli_out)] + ([] if figures else ["--no-figures"])
    assert main(argv) == 0
    settings = ScoreSettings(stats="spectral", draws=300, max_draws=300)
    request = ScoreRequest(model=str(model), settings=settings, probe=True, text=str(text),
                           composition=CompositionSettings(draws=300))
    run = run_score(request, progress=False)
    written = write_report(run, lib_out, figures=figures)
    assert run.scores is not None and run.composition is not None and run.probe is not None
    assert "head_label" in run.scores and "behaviour_entropy" in run.scores
    assert set(written) == {p.relative_to(cli_out).as_posix()
                            for p in cli_out.rglob("*") if p.is_file()}
    return _digest(cli_out), _digest(lib_out)


def test_the_library_call_writes_the_commands_files_encoder(tmp_path, score_cache):
    """A 2-layer BERT with a tokenizer: score, composition, the text probe joined and each
    head labelled from it (no path patching for an encoder), without figures."""
    import _probe_models as pm

    model = pm.bert(tmp_path / "bert")
    text = tmp_path / "t.txt"
    text.write_text(pm.TEXT, encoding="utf-8")
    cli, lib = _both(tmp_path, model, text, figures=False)
    assert any(line.startswith("composition.nc:") for line in cli)
    assert cli == lib


@pytest.mark.slow  # the whole command twice on a 2-layer llama: path patching, figures (~90 s)
def test_the_library_call_writes_the_commands_files_with_circuits(tmp_path, score_cache):
    """A 2-layer llama with a tokenizer: the circuit search (labels, path patching) on the
    text, circuits.nc, and the figures (figures/composition.png among them)."""
    import _probe_models as pm

    model = pm.llama(tmp_path / "llama")
    text = tmp_path / "t.txt"
    text.write_text(pm.TEXT, encoding="utf-8")
    cli, lib = _both(tmp_path, model, text, figures=True)
    assert any(line.startswith("circuits.nc:") for line in cli)
    assert any(line.startswith("figures/composition.png") for line in cli)
    assert cli == lib
