"""``rmtbase score``: outputs, and one-line errors for bad models and options (no network)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr

from rmtbase.cli import main
from rmtbase.errors import ModelError

D, H, L = 64, 4, 2


@pytest.fixture(scope="module")
def cache(score_cache):
    return score_cache


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
    for opt in ("--out", "--stats", "--revision", "--allow-pickle", "--draws", "--fdr",
                "--alpha", "--no-figures"):
        assert opt in out


@pytest.mark.parametrize("argv, word", [
    (["score", "--alpha", "1.5"], "alpha"),
    (["score", "--fdr", "0"], "--fdr"),
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
    code = main(["score", str(folder), "--out", str(out), "--draws", "300", "--quiet",
                 "--stats", "all", "--fdr", "0.1", "--top", "3"])
    assert code == 0, capsys.readouterr().err
    text = capsys.readouterr().out
    lines = text.strip().splitlines()
    assert "heads differ from the null" in text and lines[1].startswith("Profile")
    ds = xr.open_dataset(out / "scores.nc")
    n_axes = ds.sizes["axis"]
    ds.close()
    assert len(lines) == 4 + n_axes and all(ln.count("L") >= 3 for ln in lines[3:])
    ds = xr.open_dataset(out / "scores.nc")
    try:
        assert ds.attrs["architecture"] == "gpt2" and ds.attrs["alpha"] == 0.1
        assert ds.sizes["layer"] == L and ds.sizes["head"] == H
        assert np.isfinite(ds["p_value"].values).all()
        assert ds["head_p_value"].dims == ("layer", "head")
        assert ds.attrs["storage_dtype"] == "float32" and "N(0, sigma^2)" in ds.attrs["null"]
    finally:
        ds.close()
    for name in ("scores.csv", "heads.csv", "summary.txt", "manifest.json",
                 "figures/verdict.png", "figures/effect_qk.npr.png", "figures/entropy_sigma.png"):
        assert (out / name).is_file(), name
    summary = (out / "summary.txt").read_text()
    assert "Null: i.i.d. N(0, sigma^2)" in summary and "Storage of W_Q/W_K" in summary
    # every line of the screen and summary.txt within 200 characters (long prose wrapped)
    assert max(len(t) for t in (text + summary).splitlines()) <= 200


def test_cli_refuses_a_foreign_output_folder_before_scoring(tmp_path, capsys, monkeypatch):
    """A non-empty folder that is not an earlier rmtbase output is refused with one line, and
    nothing is loaded or computed first."""
    import rmtbase.scoring.score as score_mod

    def never(*a, **k):
        raise AssertionError("scoring ran before the output was checked")

    monkeypatch.setattr(score_mod, "score_model", never)
    foreign = tmp_path / "thesis"
    foreign.mkdir()
    (foreign / "chapter1.tex").write_text("precious")
    assert "not an earlier rmtbase score output" in _one_line_error(
        capsys, ["score", "--out", str(foreign)])
    assert (foreign / "chapter1.tex").read_text() == "precious"
    _one_line_error(capsys, ["score", "--out", str(foreign / "chapter1.tex")])
    _one_line_error(capsys, ["score", "--top", "-3", "--out", str(tmp_path / "o")])


@pytest.mark.slow
def test_default_minilm(tmp_path, capsys, monkeypatch):
    """No MODEL: the embedded MiniLM (BERT, d = 384, d_h = 32, 6 × 12 heads), no network.
    Trained heads depart from the null: every head is flagged by the per-head decision, and
    W_QK's excess kurtosis (heavy tails) carries a descriptive flag in nearly every head,
    while W_Q's self-normalised std (a function of its mean) stays mostly null."""
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "cache"))
    code = main(["score", "--out", str(tmp_path / "out"), "--quiet"])
    assert code == 0, capsys.readouterr().err
    ds = xr.open_dataset(tmp_path / "out" / "scores.nc")
    try:
        assert "all-MiniLM-L6-v2" in ds.attrs["model"] and ds.attrs["architecture"] == "bert"
        assert (ds.sizes["layer"], ds.sizes["head"]) == (6, 12)
        assert int(ds["head_flag"].sum()) == 72
        flags = ds["flag"].sum(("layer", "head"))
        assert int(flags.sel(stat="qk.excess_kurtosis")) >= 60
        assert int(flags.sel(stat="q.std")) == 0  # a duplicate: never in a BH family
        assert int((ds["p_value"].sel(stat="q.std") <= 0.05).sum()) <= 20
    finally:
        ds.close()
