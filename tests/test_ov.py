"""OV circuits (rmtbase.models.ov, rmtbase.scoring.ov) and the outlier directions
(rmtbase.scoring.measures.directions): MiniLM's OV spectra against numpy on the checkpoint's own
value/output slices, a planted rank-1 OV change found with one exported direction along the
planted input vector, QK numbers unchanged beside OV, the CLI, and (slow) untrained models
scoring as null on the OV circuit."""

import glob

import numpy as np
import pytest
import xarray as xr

from rmtbase.models import default_model_path
from rmtbase.models.ov import load_ov_heads, ov_factors
from rmtbase.models.types import LayerHeads, ModelInfo
from rmtbase.scoring.measures.directions import directions_dataset, head_directions
from rmtbase.scoring.score import score_heads


def _minilm_tensors():
    from safetensors.numpy import load_file

    return load_file(glob.glob(str(default_model_path() / "*.safetensors"))[0])


def test_ov_factors_are_the_value_rows_and_output_columns_of_each_head():
    """Each head's (W_O,hᵀ, W_V,h) equal the slices of MiniLM's tensors taken by hand; GQA
    repeats value heads as keys are repeated."""
    w = _minilm_tensors()
    lh = next(iter(load_ov_heads(default_model_path())))
    v = w["encoder.layer.0.attention.self.value.weight"]
    o = w["encoder.layer.0.attention.output.dense.weight"]
    for h in (0, 5, 11):
        # exact: copies of stored values (slices, reshapes, transposes; no arithmetic)
        np.testing.assert_array_equal(lh.wk[h], v[32 * h:32 * (h + 1)])
        # exact: copies of stored values (slices, reshapes, transposes; no arithmetic)
        np.testing.assert_array_equal(lh.wq[h], o[:, 32 * h:32 * (h + 1)].T)
    rng = np.random.default_rng(0)
    v2, o2 = rng.standard_normal((2 * 4, 16)), rng.standard_normal((16, 6 * 4))
    wo_t, wv = ov_factors(v2, o2, n_heads=6, n_kv_heads=2, d_h=4)
    # exact: copies of stored values (slices, reshapes, transposes; no arithmetic)
    np.testing.assert_array_equal(wv[4], v2[4:8])  # query head 4 meets value head 1
    # exact: copies of stored values (slices, reshapes, transposes; no arithmetic)
    np.testing.assert_array_equal(wo_t[5], o2[:, 20:24].T)


@pytest.fixture(scope="module")
def minilm_ov(score_cache):
    from rmtbase.scoring.ov import score_ov

    return score_ov(None, progress=False, spectrum_draws=0)


def test_minilm_ov_spectra_equal_numpy_on_the_checkpoint_slices(minilm_ov):
    """W_OV's eigenvalues (of (W_O,hᵀ W_O,h)(W_V,h W_V,hᵀ), float64 numpy on the tensors'
    slices) equal the score's spectrum times σ_O² σ_V² d² to 5e-6 of the largest (the score's
    estimator is float32, as its null's: the smallest eigenvalues carry its absolute error);
    λ_max and NPR = (Σλ)²/(d_h Σλ²) to 1e-6 relative, the condition number λ_max/λ_min to
    3e-5 (λ_min's float32 error)."""
    w = _minilm_tensors()
    ds = minilm_ov
    assert ds.attrs["circuit"] == "ov" and "W_O" in ds.attrs["factors"]
    for layer in range(6):
        v = w[f"encoder.layer.{layer}.attention.self.value.weight"].astype(np.float64)
        o = w[f"encoder.layer.{layer}.attention.output.dense.weight"].astype(np.float64)
        for h in range(12):
            wv, wo = v[32 * h:32 * (h + 1)], o[:, 32 * h:32 * (h + 1)]
            lam = np.sort(np.linalg.eigvals((wo.T @ wo) @ (wv @ wv.T)).real)[::-1]
            sq = np.sqrt(np.mean(wo ** 2))
            sk = np.sqrt(np.mean(wv ** 2))
            got = ds["qk_spectrum"].sel(layer=layer, head=h).values * sq**2 * sk**2 * 384**2
            np.testing.assert_allclose(got, lam, rtol=1e-6, atol=5e-6 * lam[0])
            val = ds["value"].sel(layer=layer, head=h)
            assert float(val.sel(stat="qk.lambda_max")) == pytest.approx(lam[0], rel=1e-6)
            npr = lam.sum() ** 2 / (32 * (lam**2).sum())
            assert float(val.sel(stat="qk.npr")) == pytest.approx(npr, rel=1e-6)
            cond = lam[0] / lam[-1]
            assert float(val.sel(stat="qk.condition_number")) == pytest.approx(cond, rel=3e-5)


def test_head_directions_equal_the_svd_of_the_product():
    """The thin-factor triplets equal numpy's SVD of the d × d product (float64) up to sign:
    singular values to 1e-10 relative, |cos| of vectors 1 - 1e-10."""
    rng = np.random.default_rng(2)
    wq, wk = rng.standard_normal((8, 50)), rng.standard_normal((8, 50))
    s, left, right = head_directions(wq, wk, 3)
    u, s_ref, vt = np.linalg.svd(wq.T @ wk)
    np.testing.assert_allclose(s, s_ref[:3], rtol=1e-10)
    for i in range(3):
        assert abs(left[i] @ u[:, i]) == pytest.approx(1, abs=1e-10)
        assert abs(right[i] @ vt[i]) == pytest.approx(1, abs=1e-10)
        assert right[i][np.argmax(np.abs(right[i]))] > 0


def _ov_model(rng, theta=0.0, at=(2, 5), d=384, d_h=32, heads=12, layers=8):
    """Layers of OV factors (W_O,hᵀ, W_V,h) with N(0, σ²) entries; with ``theta`` the head
    ``at`` gets W_V,h ← W_V,h + θ σ_V √d a vᵀ (unit a, v): W_OV gains the rank-1 term
    (W_O,h a)(θ σ_V √d) vᵀ, whose input (right) direction is v."""
    v = rng.standard_normal(d)
    v /= np.linalg.norm(v)
    out = []
    for li in range(layers):
        wv = (0.04 * rng.standard_normal((heads * d_h, d))).astype(np.float32)
        wo = (0.02 * rng.standard_normal((d, heads * d_h))).astype(np.float32)
        if theta and li == at[0]:
            a = rng.standard_normal(d_h)
            a /= np.linalg.norm(a)
            rows = slice(at[1] * d_h, (at[1] + 1) * d_h)
            wv[rows] += (theta * 0.04 * np.sqrt(d) * np.outer(a, v)).astype(np.float32)
        wq, wk = ov_factors(wv, wo, heads, heads, d_h)
        out.append(LayerHeads(layer=li, wq=wq, wk=wk))
    info = ModelInfo(name="ov-planted", revision=None, architecture="bert", d=d, d_h=d_h,
                     n_layers=layers, n_heads=heads, n_kv_heads=heads)
    return info, out, v


def test_a_planted_rank1_ov_change_is_one_exported_direction_along_v(score_cache):
    """W_V,h += 4 σ √d a vᵀ in L2 H5 (d = 384, d_h = 32; far above the BBP threshold): the
    head has one outlier, its exported right (input) vector has |cos| ≥ 0.95 with v, p at
    the floor; the 95 untouched heads export a direction at the null rate, at most
    0.05 + 2 se = 0.095 (P(n_spikes > 0) ≤ 0.05 for a null head by construction)."""
    info, layers, v = _ov_model(np.random.default_rng(4), theta=4.0)
    ds = score_heads(info, layers, stats="spectral", progress=False, spectrum_draws=0)
    assert int(ds["n_spikes"].sel(layer=2, head=5)) == 1
    table = directions_dataset(layers, ds, "ov")
    row = np.nonzero((table["layer"].values == 2) & (table["head"].values == 5))[0]
    assert row.size == 1
    r = row[0]
    assert abs(float(table["right"].values[r] @ v)) >= 0.95
    assert table["index"].values[r] == 1 and table["circuit"].values[r] == "ov"
    assert table["p_value"].values[r] <= 1e-3 and table["edge_ratio"].values[r] > 1
    others = {(int(a), int(b)) for a, b in zip(table["layer"].values, table["head"].values,
                                               strict=True)} - {(2, 5)}
    assert len(others) / 95 <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / 95), len(others)


def test_qk_numbers_are_unchanged_beside_ov(score_cache):
    """score_circuits' qk entry equals score_model alone (values, p-values, profile)."""
    from rmtbase.scoring.collection.combine import entries
    from rmtbase.scoring.ov import score_circuits
    from rmtbase.scoring.score import score_model

    both = score_circuits(None, stats="spectral", progress=False, spectrum_draws=0)
    alone = score_model(None, stats="spectral", progress=False, spectrum_draws=0)
    (lq, qk), (lo, ov) = entries(both)
    assert (lq, lo) == ("qk", "ov")
    for var in ("value", "p_value", "head_p_value", "profile_value", "n_spikes"):
        # exact: the same call twice in one process: same compiled programs, same inputs (the qk
        #  pass is the same code beside ov)
        np.testing.assert_array_equal(qk[var].values, alone[var].values, err_msg=var)
    assert not np.array_equal(ov["value"].values, alone["value"].values)


def test_cli_ov_and_directions(tmp_path, capsys, score_cache):
    """rmtbase score --ov --directions: scores.nc over (circuit, …), both circuits printed,
    directions.nc rows joinable on (layer, head, circuit, index), one per outlier; --ov with
    several models is refused in one line before any work."""
    from rmtbase.cli import main

    out = tmp_path / "o"
    assert main(["score", "--ov", "--directions", "--stats", "spectral", "--quiet",
                 "--no-figures", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "== qk" in text and "== ov" in text
    with xr.open_dataset(out / "scores.nc") as ds, xr.open_dataset(out / "directions.nc") as dr:
        assert list(ds["circuit"].values) == ["qk", "ov"]
        for c in ("qk", "ov"):
            n = int(ds["n_spikes"].sel(circuit=c).sum())
            assert int((dr["circuit"].values == c).sum()) == n > 0
        keys = list(zip(dr["layer"].values, dr["head"].values, dr["circuit"].values,
                        dr["index"].values, strict=True))
        assert len(set(keys)) == len(keys) and dr["right"].shape[1] == 384
        norms = np.linalg.norm(dr["left"].values, axis=1)
        np.testing.assert_allclose(norms, 1, atol=1e-9)
    capsys.readouterr()
    folder = str(default_model_path())
    assert main(["score", folder, folder, "--ov", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--ov" in err


@pytest.mark.slow  # 8 random BERT checkpoints, OV with all statistics: ~30 s quiet
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_untrained_ov_circuits_score_as_null(tmp_path, score_cache, dtype):
    """Untrained BERT (transformers' N(0, 0.02²) init, 12 × 12 heads at 384 × 32), 4 seeds,
    stored in ``dtype``: the OV circuit's head p ≤ 0.05 in 0.05 ± 2 se of the 576 heads (se =
    0.0091), every decision statistic's p ≤ 0.05 rate within 3 se, at most 1 head flagged per
    model (BH at 0.05 under the global null: P(any flag) ≤ 0.05)."""
    import torch
    from _checkpoints import random_checkpoint as _random_checkpoint

    from rmtbase.scoring.ov import score_ov

    head_p, stat_p = [], []
    for seed in range(2, 6):
        folder = _random_checkpoint(tmp_path / f"m{seed}", "bert", getattr(torch, dtype), seed)
        ds = score_ov(str(folder), progress=False, spectrum_draws=0)
        assert ds.attrs["storage_dtype"] == dtype and int(ds["head_flag"].sum()) <= 1
        head_p.append(ds["head_p_value"].values.ravel())
        fam = ds["in_family"].values
        stat_p.append(ds["p_value"].values[..., fam].reshape(-1, int(fam.sum())))
    se = np.sqrt(0.05 * 0.95 / 576)
    rate = np.mean(np.concatenate(head_p) <= 0.05)
    assert abs(rate - 0.05) <= 2 * se, rate
    rates = np.mean(np.concatenate(stat_p) <= 0.05, axis=0)
    assert np.all(np.abs(rates - 0.05) <= 3 * se), rates


def test_ov_of_a_gguf_file_with_grouped_values(tmp_path):
    """A LLaMA GGUF (written by gguf-py's GGUFWriter as llama.cpp does; 4 query heads on 2
    value heads, F32): load_ov_heads gives each query head W_O's columns and its value head's
    rows of the matrices written, the storage read from the file."""
    pytest.importorskip("gguf")
    import _gguf

    rng = np.random.default_rng(8)
    d, d_h, nh, nkv = 32, 8, 4, 2
    layers = [{"q": rng.standard_normal((nh * d_h, d)), "k": rng.standard_normal((nkv * d_h, d)),
               "v": rng.standard_normal((nkv * d_h, d)), "o": rng.standard_normal((d, nh * d_h))}
              for _ in range(2)]
    path = _gguf.write_llama(tmp_path / "m.gguf", layers, d=d, n_heads=nh, n_kv_heads=nkv)
    got = list(load_ov_heads(path))
    assert len(got) == 2
    for li, lh in enumerate(got):
        v, o = layers[li]["v"].astype(np.float32), layers[li]["o"].astype(np.float32)
        for h in range(nh):
            # exact: copies of stored values (slices, reshapes, transposes; no arithmetic)
            np.testing.assert_array_equal(lh.wk[h], v[(h // 2) * d_h:(h // 2 + 1) * d_h])
            # exact: copies of stored values (slices, reshapes, transposes; no arithmetic)
            np.testing.assert_array_equal(lh.wq[h], o[:, h * d_h:(h + 1) * d_h].T)
        assert lh.storage == "float32"


def test_report_page_shows_qk_and_ov_of_a_head_together(tmp_path, score_cache):
    """report.html of score_circuits: pinning a head in the qk entry shows its OV profile and
    head p beside it (and no script error)."""
    from _browser import CHROMIUM, SKIP_REASON, run_page

    if CHROMIUM is None:
        pytest.skip(SKIP_REASON)
    from rmtbase.report import write_report
    from rmtbase.scoring.ov import score_circuits

    ds = score_circuits(None, stats="spectral", progress=False, spectrum_draws=0)
    write_report(ds, tmp_path / "out", figures=False)
    r, console = run_page(tmp_path / "out" / "report.html", """
    window.rmtbaseReport.pin(4, 0);
    r.detail = document.getElementById('detail').innerText;
    """, tmp_path)
    assert r["errors"] == [] and console == [], (r["errors"], console)
    a = float(ds["profile_value"].sel(circuit="ov", layer=4, head=0, axis="alignment"))
    assert "in ov: head p" in r["detail"] and f"alignment {a:.3g}"[:16] in r["detail"], \
        r["detail"][:600]
