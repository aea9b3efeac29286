"""``rmtbase score --heavy-tail``: WeightWatcher's heavy-tail metrics with their null in every
output (scores.nc, heavy_tail.csv, report.html, summary.txt), each file parsed back; the head
score's numbers are those of a run without the flag (slow, MiniLM); one-line refusals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from test_cf_compliance import _assert_cf

from rmtbase.cli import main

SCORE = ["--quiet", "--stats", "spectral", "--draws", "300", "--growth-budget", "0"]


@pytest.fixture(scope="module")
def cache(score_cache):
    return score_cache


def _gpt2(folder):
    import torch
    import transformers as tf

    torch.manual_seed(0)
    cfg = tf.GPT2Config(n_embd=64, n_head=4, n_layer=2, vocab_size=50, n_positions=32,
                        bos_token_id=0, eos_token_id=0)
    tf.GPT2LMHeadModel(cfg).save_pretrained(folder)
    return str(folder)


def _read_back(out, draws: int) -> xr.Dataset:
    """Every heavy-tail output of ``out`` parsed and held against scores.nc's numbers."""
    with xr.open_dataset(out / "scores.nc") as ds:
        ds = ds.load()
    assert ds.attrs["heavy_tail_draws"] == draws  # exact: an integer attribute
    value = ds["heavy_tail_value"]
    assert value.dims == ("layer", "component", "heavy_tail_metric")
    for name in ("p_value", "null_median", "null_lo", "null_hi", "band_units"):
        assert ds[f"heavy_tail_{name}"].attrs["units"] == "1"
        assert ds[f"heavy_tail_{name}"].attrs["long_name"]
    p = ds["heavy_tail_p_value"].drop_sel(heavy_tail_metric="log_norm").values
    p = p[np.isfinite(p)]
    assert p.size and np.all((p >= 2 / (draws + 1) - 1e-12) & (p <= 1))  # add-one p
    csv = pd.read_csv(out / "heavy_tail.csv")
    present = int((ds["heavy_tail_rows"].values > 0).sum())
    assert len(csv) == present
    for row in csv.itertuples():  # the CSV's %.6g numbers are scores.nc's
        cell = ds.sel(layer=row.layer, component=row.component)
        np.testing.assert_allclose([row.alpha, row.alpha_p, row.stable_rank],
                                   [float(cell["heavy_tail_value"].sel(heavy_tail_metric=m))
                                    if k == "value" else
                                    float(cell["heavy_tail_p_value"].sel(heavy_tail_metric=m))
                                    for k, m in (("value", "alpha"), ("p", "alpha"),
                                                 ("value", "stable_rank"))], rtol=1e-5)
        assert row.folklore == str(cell["heavy_tail_folklore"].values)
    html = (out / "report.html").read_text()
    assert '<section id="heavy-tail">' in html and "heavy_tail.csv" in html
    summary = (out / "summary.txt").read_text()
    line = [ln for ln in summary.splitlines() if ln.startswith("Heavy tails")]
    assert len(line) == 1 and f": {present} matrices with alpha" in line[0]
    lo, hi = csv.loc[csv["component"] == "q", "alpha"].agg(["min", "max"])
    assert any(ln.startswith("q ") and f"{lo:.3g}..{hi:.3g}" in ln
               for ln in summary.splitlines()), summary
    return ds


def _same_head_score(plain, ht, ds) -> None:
    """The head variables of ``ht``'s scores.nc (``ds``) equal those of ``plain``'s, written
    without the flag (exact: one process, the same settings), and its summary.txt leads."""
    with xr.open_dataset(plain / "scores.nc") as base:
        head = base.load()
    assert not [v for v in head.data_vars if str(v).startswith("heavy_tail")]
    assert not (plain / "heavy_tail.csv").exists()
    # exact: one process, the same settings and programs; the flag only adds variables
    xr.testing.assert_identical(ds[list(head.data_vars)].drop_attrs(deep=False),
                                head.drop_attrs(deep=False))
    assert (plain / "summary.txt").read_text() in (ht / "summary.txt").read_text()


def test_heavy_tail_in_every_output(tmp_path, cache):
    """A tiny GPT-2 (2 layers: q, k, v, o 64 × 64, FFN 256 × 64) with 5 null draws per shape:
    the outputs agree with each other and scores.nc passes the CF check; without figures no
    ESD figure."""
    out = tmp_path / "ht"
    assert main(["score", _gpt2(tmp_path / "g"), "--out", str(out), "--no-figures", *SCORE,
                 "--heavy-tail", "--heavy-tail-draws", "5"]) == 0
    ds = _read_back(out, 5)
    assert (ds.sizes["component"], int((ds["heavy_tail_rows"] > 0).sum())) == (6, 12)  # exact
    _assert_cf(out / "scores.nc")
    assert not (out / "figures" / "heavy_tail_esd.png").exists()


def test_the_null_follows_quantized_null(tmp_path, cache):
    """``--quantized-null q4_0`` draws the heavy-tail null at q4_0 as the head score's: scores.nc
    names it per matrix and in its attributes, and the null's stable rank (scale-free) is the
    q4_0 table's, not the float32 one's (3 draws)."""
    from rmtbase.scoring.matrices.heavy_tail import null_metrics

    out = tmp_path / "ht"
    assert main(["score", _gpt2(tmp_path / "g"), "--out", str(out), "--no-figures", *SCORE,
                 "--quantized-null", "q4_0", "--heavy-tail", "--heavy-tail-draws", "3"]) == 0
    with xr.open_dataset(out / "scores.nc") as ds:
        ds = ds.load()
    assert ds.attrs["heavy_tail_quantized_null"] == "q4_0"
    assert set(np.unique(ds["heavy_tail_null_storage"].values)) == {"q4_0"}
    got = float(ds["heavy_tail_null_median"].sel(layer=0, component="q",
                                                 heavy_tail_metric="stable_rank"))
    want = {s: float(np.median(null_metrics(64, 64, s, 3)["stable_rank"]))
            for s in ("q4_0", "float32")}
    np.testing.assert_allclose(got, want["q4_0"], rtol=1e-9)
    assert abs(got - want["float32"]) > 1e-6 * want["float32"], want


@pytest.mark.slow
def test_embedded_minilm_with_the_esd_figure(tmp_path, cache):
    """The embedded MiniLM (36 matrices), 9 null draws per shape, figures on: α of layer 0's
    query matrix is its own WeightWatcher fit, the report embeds the ESD figure, and the head
    score is that of the run without the flag."""
    from rmtbase.models import default_model_path, load_components
    from rmtbase.stats.heavy_tail import heavy_tail_metrics

    plain, out = tmp_path / "plain", tmp_path / "out"
    assert main(["score", "--out", str(plain), *SCORE]) == 0
    assert main(["score", "--out", str(out), *SCORE, "--heavy-tail", "--heavy-tail-draws",
                 "9"]) == 0
    ds = _read_back(out, 9)
    _same_head_score(plain, out, ds)
    assert (ds.sizes["component"], int((ds["heavy_tail_rows"] > 0).sum())) == (6, 36)  # exact
    w = next(iter(load_components(default_model_path(), components=("q",)))).matrices["q"]
    np.testing.assert_allclose(ds["heavy_tail_value"].sel(layer=0, component="q",
                                                          heavy_tail_metric="alpha"),
                               heavy_tail_metrics(w)["alpha"], rtol=1e-12)
    assert (out / "figures" / "heavy_tail_esd.png").stat().st_size > 10_000
    assert 'alt="heavy_tail_esd.png"' in (out / "report.html").read_text()


@pytest.mark.parametrize("argv, words", [
    (["--heavy-tail-draws", "9"], "needs --heavy-tail"),
    (["--heavy-tail", "--heavy-tail-draws", "1"], "at least 2"),
    (["--heavy-tail", "--ov"], "--ov"),
    (["m", "--heavy-tail", "--base", "x"], "rmtbase heavy-tail MODEL --base BASE"),
    (["--heavy-tail", "--null", "permutation"], "scores_components"),
])
def test_refusals_are_one_line(tmp_path, capsys, argv, words):
    code = main(["score", "--out", str(tmp_path / "o"), "--quiet", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and words in err[0], err
    assert not (tmp_path / "o").exists()


def test_the_library_request_refuses_alike():
    from rmtbase.errors import InputError
    from rmtbase.pipeline import ScoreRequest

    for kw, words in (({"heavy_tail_draws": 9}, "needs --heavy-tail"),
                      ({"heavy_tail": True, "heavy_tail_draws": 1}, "at least 2"),
                      ({"heavy_tail": True, "heavy_tail_draws": 2.5}, "an integer"),
                      ({"heavy_tail": True, "ov": True}, "--ov")):
        with pytest.raises(InputError, match=words):
            ScoreRequest(**kw)


def test_help_names_the_flag_and_the_null_default(capsys):
    from rmtbase.baseline.heavy_tail_null import DEFAULT_DRAWS

    with pytest.raises(SystemExit):
        main(["score", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--heavy-tail " in out
    assert f"null draws per matrix shape for --heavy-tail (default {DEFAULT_DRAWS};" in out
