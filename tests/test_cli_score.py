"""``rmtbase score``: outputs, and one-line errors for bad models and options (no network)."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
import xarray as xr

from rmtbase.cli import main
from rmtbase.errors import ModelError

D, H, L = 64, 4, 2


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    path = tmp_path_factory.getbasetemp() / "rmtbase-score-cache"  # shared with test_score_models
    path.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RMTBASE_CACHE", str(path))
        yield path


def _gpt2(folder, *, nan=False, seed=0):
    import torch
    import transformers as tf

    torch.manual_seed(seed)
    cfg = tf.GPT2Config(n_embd=D, n_head=H, n_layer=L, vocab_size=50, n_positions=32,
                        bos_token_id=0, eos_token_id=0)
    model = tf.GPT2LMHeadModel(cfg)
    if nan:
        with torch.no_grad():
            model.transformer.h[1].attn.c_attn.weight[3, 5] = float("nan")
    model.save_pretrained(folder)
    return folder


def _one_line_error(capsys, argv) -> str:
    capsys.readouterr()  # drop earlier output (e.g. save_pretrained's progress bar)
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("rmtbase: error: "), err
    return err[0]


def test_help_lists_options(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["score", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for opt in ("--out", "--stats", "--revision", "--allow-pickle", "--draws", "--alpha",
                "--no-figures"):
        assert opt in out


@pytest.mark.parametrize("argv, word", [
    (["score", "--alpha", "1.5"], "alpha"),
    (["score", "--draws", "1"], "draws"),
])
def test_bad_options_one_line(capsys, argv, word):
    assert word in _one_line_error(capsys, argv)


def test_bad_choice_is_argparse_one_line(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["score", "--stats", "nope"])
    assert exc.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_missing_folder_unknown_arch_missing_and_corrupt_weights(tmp_path, capsys):
    _one_line_error(capsys, ["score", str(tmp_path / "no-such-model"), "--out", str(tmp_path / "o")])
    unknown = tmp_path / "unknown"
    unknown.mkdir()
    (unknown / "config.json").write_text(json.dumps(
        {"model_type": "fancy_unknown_arch", "architectures": ["FancyModel"]}))
    assert "fancy_unknown_arch" in _one_line_error(capsys, ["score", str(unknown)])
    folder = _gpt2(tmp_path / "gpt2")
    weights = folder / "model.safetensors"
    good = weights.read_bytes()
    weights.write_bytes(b"\x00garbage, not a safetensors file" * 10)
    _one_line_error(capsys, ["score", str(folder), "--out", str(tmp_path / "o")])
    weights.unlink()
    _one_line_error(capsys, ["score", str(folder), "--out", str(tmp_path / "o")])
    weights.write_bytes(good[: len(good) // 2])  # truncated
    _one_line_error(capsys, ["score", str(folder), "--out", str(tmp_path / "o")])


def test_nan_weights_are_a_model_error(tmp_path, capsys, cache):
    from rmtbase.scoring.score import score_model

    folder = _gpt2(tmp_path / "nan", nan=True)
    with pytest.raises(ModelError):
        score_model(str(folder), draws=200, progress=False, spectrum_draws=0)
    _one_line_error(capsys, ["score", str(folder), "--out", str(tmp_path / "o"), "--quiet"])


def test_cli_writes_scores_csv_figures(tmp_path, capsys, cache):
    folder = _gpt2(tmp_path / "g")
    out = tmp_path / "out"
    t0 = time.perf_counter()
    code = main(["score", str(folder), "--out", str(out), "--draws", "300", "--quiet",
                 "--stats", "all", "--alpha", "0.1", "--top", "3"])
    elapsed = time.perf_counter() - t0
    assert code == 0, capsys.readouterr().err
    text = capsys.readouterr().out
    assert "tests flagged" in text and len(text.strip().splitlines()) == 2 + 3
    ds = xr.open_dataset(out / "scores.nc")
    try:
        assert ds.attrs["architecture"] == "gpt2" and ds.attrs["alpha"] == 0.1
        assert ds.sizes["layer"] == L and ds.sizes["head"] == H
        assert np.isfinite(ds["p_value"].values).all()
    finally:
        ds.close()
    assert (out / "scores.csv").is_file()
    assert (out / "figures" / "z_qk.npr.png").is_file()
    assert (out / "figures" / "entropy_sigma.png").is_file()
    assert elapsed < 120


@pytest.mark.slow
def test_default_minilm(tmp_path, capsys, monkeypatch):
    """No MODEL: the embedded MiniLM (BERT, d = 384, d_h = 32, 6 × 12 heads), no network.
    Under a minute when the (384, 32) table is shipped (else it is generated into the
    temporary cache first). Trained heads depart from the null: W_QK's excess kurtosis
    (heavy tails) in nearly every head, while W_Q's std (self-normalised: only its mean can
    move it) stays mostly null."""
    from rmtbase.baseline.cache import shipped_index

    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "cache"))
    shipped = any(e.get("d") == 384 and e.get("d_h") == 32 for e in shipped_index())
    t0 = time.perf_counter()
    code = main(["score", "--out", str(tmp_path / "out"), "--quiet"])
    elapsed = time.perf_counter() - t0
    assert code == 0, capsys.readouterr().err
    ds = xr.open_dataset(tmp_path / "out" / "scores.nc")
    try:
        assert "all-MiniLM-L6-v2" in ds.attrs["model"] and ds.attrs["architecture"] == "bert"
        assert (ds.sizes["layer"], ds.sizes["head"]) == (6, 12)
        flags = ds["flag"].sum(("layer", "head"))
        assert int(flags.sel(stat="qk.excess_kurtosis")) >= 60
        assert int(flags.sel(stat="q.std")) <= 20
    finally:
        ds.close()
    if shipped:
        assert elapsed < 60, elapsed
