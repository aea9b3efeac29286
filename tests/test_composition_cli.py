"""``rmtbase score MODEL --composition``: composition.nc, the circuit figure and --json fields
through the output folder; bad input refused in one line, exit 2, before any scoring."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr
from _no_scoring import forbid

from rmtbase.cli import main


def _gpt2(path, n_layer, n_head=4, n_embd=64):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=n_layer, n_head=n_head, n_embd=n_embd, vocab_size=64,
                     n_positions=32, bos_token_id=0, eos_token_id=0)
    GPT2LMHeadModel(cfg).save_pretrained(path)
    return path


@pytest.fixture
def no_scoring(monkeypatch):
    """Scoring and the composition fail the test if they start."""
    import rmtbase.scoring.composition.run as comp
    import rmtbase.scoring.score as score

    forbid(monkeypatch, (score, "score_model"), (comp, "composition"))


def _refused(capsys, argv):
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert len(err) == 1, err
    return err[0]


def test_one_layer_and_base_are_refused(tmp_path, capsys, no_scoring):
    one = _gpt2(tmp_path / "one", 1)
    two = _gpt2(tmp_path / "two", 2)
    capsys.readouterr()  # save_pretrained's progress lines
    line = _refused(capsys, ["score", str(one), "--composition", "--out", str(tmp_path / "o"),
                             "--quiet"])
    assert "two layers" in line
    line = _refused(capsys, ["score", str(two), "--base", str(two), "--composition", "--out",
                             str(tmp_path / "o"), "--quiet"])
    assert "--base" in line
    line = _refused(capsys, ["score", str(two), str(two), "--composition", "--out",
                             str(tmp_path / "o"), "--quiet"])
    assert "one MODEL" in line
    assert not (tmp_path / "o").exists()


def test_qk_only_gguf_is_refused(tmp_path, capsys, no_scoring):
    pytest.importorskip("gguf")
    import _gguf

    rng = np.random.default_rng(0)
    layers = [{"q": rng.normal(0, 0.02, (64, 64)), "k": rng.normal(0, 0.02, (32, 64))}
              for _ in range(2)]
    path = _gguf.write_llama(tmp_path / "qk.gguf", layers, d=64, n_heads=4, n_kv_heads=2)
    line = _refused(capsys, ["score", str(path), "--composition", "--out",
                             str(tmp_path / "o"), "--quiet"])
    assert "attn_v" in line and "OV circuit" in line


def test_cli_writes_composition(tmp_path, capsys):
    m = _gpt2(tmp_path / "g", 3)
    out = tmp_path / "out"
    capsys.readouterr()
    code = main(["score", str(m), "--composition", "--draws", "200", "--stats", "spectral",
                 "--out", str(out), "--json", "--quiet"])
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["composition"]["pairs_per_kind"] == 3 * 16
    assert set(doc["composition"]["flagged"]) == {"q", "k", "v"}
    ds = xr.open_dataset(out / "composition.nc")
    assert ds["composition"].dims == ("kind", "layer_from", "head_from", "layer_to", "head_to")
    assert ds.attrs["Conventions"].startswith("CF")
    assert (out / "figures" / "composition.png").stat().st_size > 0
    manifest = (out / ".rmtbase-output.json")
    if manifest.exists():
        assert "composition.nc" in manifest.read_text()


def test_cli_permutation_null_and_the_plan_stated_first(tmp_path, capsys):
    """--composition --null permutation: composition.nc under the permutation null (p on the
    1/(1 + draws) grid, the per-pair median), --json says which null; without --quiet the
    pairs, memory and GEMM work are stated on stderr before the run."""
    m = _gpt2(tmp_path / "g", 3)
    out = tmp_path / "out"
    capsys.readouterr()
    code = main(["score", str(m), "--composition", "--null", "permutation", "--draws", "40",
                 "--stats", "spectral", "--out", str(out), "--json", "--no-figures"])
    assert code == 0
    cap = capsys.readouterr()
    doc = json.loads(cap.out)
    assert doc["composition"]["null"] == "permutation"
    assert doc["composition"]["null_median"] is None  # one per pair, in the file
    stated = [ln for ln in cap.err.splitlines() if "composition:" in ln]
    assert stated and "48 pairs per kind" in stated[0] and "GiB" in stated[0]
    assert "TFLOP" in stated[0] and "permutation" in stated[0]
    ds = xr.open_dataset(out / "composition.nc")
    assert ds.attrs["null_kind"] == "permutation" and ds.attrs["draws"] == 40
    p = ds.composition_p.values[np.isfinite(ds.composition_p.values)]
    assert p.size == 3 * 48
    np.testing.assert_allclose(p * 41, np.round(p * 41), atol=1e-9)
    assert ds["null_median"].dims == ds["composition"].dims


def test_run_that_cannot_fit_is_refused(tmp_path, capsys, no_scoring, monkeypatch):
    """A composition whose planned memory exceeds what is available: one line naming both,
    exit 2, nothing written, before any scoring."""
    m = _gpt2(tmp_path / "g", 2)
    capsys.readouterr()
    monkeypatch.setenv("RMTBASE_MEMORY_LIMIT", "64K")  # the project's one memory check
    line = _refused(capsys, ["score", str(m), "--composition", "--out", str(tmp_path / "o"),
                             "--quiet"])
    assert "needs about" in line and "64 KiB available" in line
    assert not (tmp_path / "o").exists()
