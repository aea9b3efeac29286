"""Whole-matrix scoring (``rmtbase score --components``): the tiled estimator and its null, the
calibration on random LLaMA-GQA models stored as bfloat16, a planted heavy-tailed matrix, the
MiniLM output folder and the CLI's checks. Null tables go to a temporary RMTBASE_CACHE."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr

from rmtbase.baseline import matrix_null as mn
from rmtbase.cli import main
from rmtbase.stats.matrix import MATRIX_STATS, matrix_stats, tile_rows
from rmtbase.stats.precision import round_trip

ALPHA = 0.05


@pytest.fixture(scope="module")
def cache(module_cache):
    return module_cache


def llama_gqa(folder, *, seed=0, layers=6, plant=None):
    """A random LLaMA with grouped-query attention (d = 64, 4 query heads of 24 on 2 key
    heads, FFN 128) saved as bfloat16: every parameter N(0, 0.1²), so each matrix is i.i.d.
    Gaussian. ``plant(model)`` may overwrite weights before saving."""
    import torch
    import transformers as tf

    torch.manual_seed(seed)
    cfg = tf.LlamaConfig(hidden_size=64, num_hidden_layers=layers, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=24, intermediate_size=128,
                         vocab_size=50, bos_token_id=0, eos_token_id=0, pad_token_id=0)
    model = tf.LlamaForCausalLM(cfg)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(0.1 * torch.randn(p.shape, generator=gen))
        if plant is not None:
            plant(model)
    model.to(torch.bfloat16).save_pretrained(folder)
    return folder


# ---- the estimator: tiled = one tile --------------------------------------------------------

@pytest.mark.parametrize("storage", ["float32", "bfloat16"])
@pytest.mark.parametrize("law", ["normal", "student3"])
def test_tiled_statistics_equal_one_tile(storage, law):
    rng = np.random.default_rng(3)
    w = rng.standard_normal((300, 200)) if law == "normal" else rng.standard_t(3, (300, 200))
    w = np.asarray(round_trip(jnp.asarray(w.astype(np.float32)), storage))
    assert tile_rows(300, 200, 6000) == [(r, r + 30) for r in range(0, 300, 30)]
    one = matrix_stats(w, storage=storage)
    tiled = matrix_stats(w, storage=storage, tile_elements=6000)
    assert set(one) == set(MATRIX_STATS) | {"rms"}
    for k in one:  # only the rounding of the sums differs (float64 across tiles)
        assert tiled[k] == pytest.approx(one[k], rel=1e-5, abs=1e-5), k


def test_tiled_null_draw_is_the_untiled_statistic_of_its_tiles():
    """A tiled null draw (5 tiles, regenerated in each pass) gives the statistics of the
    matrix its tiles make up, computed in one piece; draw i depends on i only."""
    m, n, storage = 60, 50, "bfloat16"
    rows = tile_rows(m, n, 700)
    assert len(rows) == 5
    got = mn.matrix_null_draws(m, n, 3, storage=storage, seed=4, tile_elements=700)
    again = mn.matrix_null_draws(m, n, 1, storage=storage, seed=4, start=2, tile_elements=700)
    cell = mn.cell_key(4, m, n)
    for i in range(3):
        key = jax.random.fold_in(cell, i)
        w = np.concatenate([np.asarray(mn._tile_fn(r1 - r0, n, storage)(
            jax.random.fold_in(key, t))) for t, (r0, r1) in enumerate(rows)])
        ref = matrix_stats(w, storage=storage)
        for k in mn.VARIABLES:
            assert got[k][i] == pytest.approx(ref[k], rel=1e-5, abs=1e-5), (i, k)
    for k in mn.VARIABLES:  # exact: one compiled program per draw, keyed by fold_in(cell, i)
        assert again[k][0] == got[k][2]


def test_null_shape_and_table_cache(cache):
    assert mn.null_shape(4096, 14336) == mn.null_shape(14336, 4096) == (14336, 4096)
    assert mn.null_shape(64, 96, "q4_0") == (64, 96)
    first = mn.matrix_null_table(40, 24, storage="bfloat16", draws=6, seed=2)
    assert first.sizes["draw"] == 6 and first.attrs["m"] == 40
    short = mn.matrix_null_table(24, 40, storage="bfloat16", draws=4, seed=2)  # transposed
    # exact: the cached table/file holds this process's own draws of the same program; read back
    #  losslessly
    np.testing.assert_array_equal(short["weibull_k"].values, first["weibull_k"].values[:4])
    longer = mn.matrix_null_table(40, 24, storage="bfloat16", draws=9, seed=2)  # extended
    # exact: the cached table/file holds this process's own draws of the same program; read back
    #  losslessly
    np.testing.assert_array_equal(longer["rms"].values[:6], first["rms"].values)
    files = sorted(p.name for p in cache.glob("matrix-m40-n24-*"))
    assert files == [mn.table_filename(40, 24, 9, 2, "bfloat16")]
    fresh = mn.matrix_null_draws(40, 24, 9, storage="bfloat16", seed=2)
    # exact: one compiled program per draw (draws run one at a time, keyed by fold_in(cell, i))
    np.testing.assert_array_equal(longer["max_over_q99"].values, fresh["max_over_q99"])
    # a file that does not hold what its name says is regenerated, with a warning
    bad = longer.copy()
    bad.attrs["seed"] = 7
    from rmtbase.baseline.table_file import write_table

    write_table(bad, cache / files[0], replace="any")
    with pytest.warns(RuntimeWarning, match="does not hold"):
        again = mn.matrix_null_table(40, 24, storage="bfloat16", draws=9, seed=2)
    # exact: the same call twice in one process: same compiled programs, same inputs
    np.testing.assert_array_equal(again["rms"].values, longer["rms"].values)


def test_null_matches_the_weibull_anchor():
    """The null's mean k at the three trims lies within 4 standard errors of the half-normal
    anchors k0 (the estimator's finite-N bias is far smaller at N = 24576)."""
    from rmtbase.analytic.weibull import anchor

    d = mn.matrix_null_draws(192, 128, 60, seed=1)
    for stat, (a, b) in (("weibull_k", (0.1, 0.9)), ("weibull_k_trim90", (0.05, 0.95)),
                         ("weibull_k_trim100", (0.0, 1.0))):
        x = d[stat]
        se = x.std(ddof=1) / np.sqrt(x.size)
        assert abs(x.mean() - anchor(a, b).k0) < 4 * se + 2e-3, stat


# ---- scoring -----------------------------------------------------------------------------

def _score(folder, **kw):
    from rmtbase.scoring.matrices.components import score_components

    return score_components(folder, progress=False, **kw)


@pytest.mark.slow
def test_random_llama_gqa_bf16_is_calibrated(cache, tmp_path):
    """Random LLaMA-GQA models stored as bfloat16 (every matrix i.i.d. Gaussian): the
    per-matrix p-values are calibrated — the fraction at or below α = 0.05 over n matrices stays
    within 3 standard errors sqrt(α(1−α)/n) of α — and BH flags no more than that rate."""
    p, flags, n = [], 0, 0
    for seed in (0, 1):
        ds = _score(llama_gqa(tmp_path / f"llama{seed}", seed=seed), seed=seed)
        assert list(ds["component"].values) == ["q", "k", "v", "o", "ffn_gate", "ffn_up",
                                                "ffn_down"]
        assert set(ds["storage"].values.ravel()) == {"bfloat16"}
        assert ds["rows"].sel(component="k").values.tolist() == [48] * 6  # GQA: 2 × 24 rows
        assert np.isfinite(ds["p_value"].values).all()
        p.append(ds["component_p_value"].values.ravel())
        flags += int(ds["component_flag"].sum())
    p = np.concatenate(p)
    n = p.size
    rate, se = float(np.mean(p <= ALPHA)), float(np.sqrt(ALPHA * (1 - ALPHA) / n))
    assert n == 84
    print(f"calibration: n={n}, rate(p <= {ALPHA})={rate:.3f}, se={se:.3f}, flags={flags}")
    assert rate <= ALPHA + 3 * se, (rate, se, n)
    assert flags / n <= ALPHA + 3 * se, (flags, n)


@pytest.mark.slow
def test_random_llama_gqa_bf16_calibration_large(cache, tmp_path):
    """As above on six models (252 matrices), and per statistic: the fraction of p ≤ α over
    the 252 matrices is within 3 standard errors of α for every statistic of the family."""
    p, stats = [], []
    for seed in range(10, 16):
        ds = _score(llama_gqa(tmp_path / f"llama{seed}", seed=seed), seed=seed)
        p.append(ds["component_p_value"].values.ravel())
        fam = ds["stat"].values[ds["in_family"].values]
        stats.append(ds["p_value"].sel(stat=fam).values.reshape(-1, fam.size))
    p, stats = np.concatenate(p), np.concatenate(stats)
    n = p.size
    se = float(np.sqrt(ALPHA * (1 - ALPHA) / n))
    print(f"calibration: n={n}, rate={np.mean(p <= ALPHA):.3f}, se={se:.3f}; per statistic "
          + ", ".join(f"{r:.3f}" for r in np.mean(stats <= ALPHA, axis=0)))
    assert n == 252 and np.mean(p <= ALPHA) <= ALPHA + 3 * se
    assert (np.abs(np.mean(stats <= ALPHA, axis=0) - ALPHA) <= 3 * se).all()


@pytest.mark.slow
def test_llama_gqa_cli_writes_components(cache, tmp_path, capsys):
    """``rmtbase score FOLDER --components all`` on a random LLaMA-GQA (bfloat16): the
    components Dataset over its seven matrices and both figures."""
    folder = llama_gqa(tmp_path / "llama", seed=7, layers=2)
    out = tmp_path / "out"
    assert main(["score", str(folder), "--components", "all", "--component-draws", "40",
                 "--stats", "spectral", "--quiet", "--out", str(out)]) == 0
    assert "ffn_gate" in capsys.readouterr().out
    with xr.open_dataset(out / "components.nc") as ds:
        assert ds["value"].dims == ("layer", "component", "stat")
        assert ds.sizes == {"layer": 2, "component": 7, "stat": len(MATRIX_STATS)}
        assert ds.attrs["architecture"] == "llama"
    for name in ("components_weibull_k.png", "components_terminal_k.png"):
        assert (out / "figures" / name).stat().st_size > 0


def test_planted_heavy_tailed_matrix_is_flagged(cache, tmp_path):
    """Layer 2's ffn_down replaced by Student-t(3) entries of the same rms: that matrix is
    flagged (its kurtosis and Weibull k far from the null), the others are not."""
    import torch

    def plant(model):
        w = model.model.layers[2].mlp.down_proj.weight
        t = torch.distributions.StudentT(3.0).sample(w.shape)
        w.copy_(0.1 * t / t.pow(2).mean().sqrt())

    ds = _score(llama_gqa(tmp_path / "planted", seed=3, plant=plant))
    cell = ds.sel(layer=2, component="ffn_down")
    assert bool(cell["component_flag"])
    assert float(cell["component_p_value"]) < 1e-6
    assert bool(cell["flag"].sel(stat="excess_kurtosis"))
    assert float(cell["value"].sel(stat="weibull_k")) < float(
        cell["null_mean"].sel(stat="weibull_k")) - 5 * float(cell["null_std"].sel(stat="weibull_k"))
    others = ds["component_flag"].values.copy()
    others[list(ds["layer"].values).index(2), list(ds["component"].values).index("ffn_down")] = 0
    assert others.sum() <= 1


@pytest.mark.slow
def test_minilm_components_all_writes_the_files(cache, tmp_path, capsys):
    out = tmp_path / "minilm"
    code = main(["score", "--components", "all", "--component-draws", "40", "--stats",
                 "spectral", "--quiet", "--out", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert "whole matrices differ from the null" in text and "ffn_out" in text
    ds = xr.open_dataset(out / "components.nc")
    assert ds["value"].dims == ("layer", "component", "stat")
    assert ds.sizes == {"layer": 6, "component": 6, "stat": len(MATRIX_STATS)}
    assert list(ds["component"].values) == ["q", "k", "v", "o", "ffn_in", "ffn_out"]
    assert int(ds["null_draws"].min()) == 40 and ds.attrs["weibull_band"] == "1.186,1.204"
    k = ds["value"].sel(stat="weibull_k").values
    assert np.isfinite(k).all() and (k > 1.0).all() and (k < 1.25).all()
    ds.close()
    manifest = json.loads((out / "manifest.json").read_text())["files"]
    for name in ("components.nc", "components.csv", "figures/components_weibull_k.png",
                 "figures/components_terminal_k.png", "scores.nc"):
        assert name in manifest, name
        assert (out / name).stat().st_size > 0
    csv = (out / "components.csv").read_text().splitlines()
    assert len(csv) == 1 + 36 * len(MATRIX_STATS)
    assert "Whole matrices" in (out / "summary.txt").read_text()


def test_plots_take_an_axes(cache, tmp_path):
    from matplotlib.figure import Figure

    from rmtbase.report.component_figures import plot_k_heatmap, plot_terminal_k

    ds = _score(llama_gqa(tmp_path / "plot", seed=5, layers=2), draws=20)
    for fn in (plot_k_heatmap, plot_terminal_k):
        ax = Figure().subplots()
        assert fn(ds, ax) is ax
        assert fn(ds, Figure().subplots(), stat="weibull_k_trim100") is not None


@pytest.mark.parametrize("argv, message", [
    (["--components", "q,bogus"], "unknown component 'bogus'"),
    (["--components", "q,,k"], "empty entry"),
    (["--components", "ffn_gate"], "has no 'ffn_gate' matrix"),
    (["--component-draws", "50"], "--component-draws needs --components"),
    (["--components", "all", "--null", "permutation"], "does not combine"),
    (["--components", "all", "--component-draws", "1"], "at least 2"),
])
def test_cli_checks_components_before_any_work(tmp_path, capsys, argv, message):
    out = tmp_path / "never"
    assert main(["score", "--quiet", "--out", str(out), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not out.exists()


def test_statistics_undefined_under_a_q8_0_null_are_left_out(cache):
    """Q8_0 has an exact-zero level, so the Weibull fits of its null draws take ln 0 and are
    NaN: score_components crashed ("a tail model needs at least 2 non-NaN null draws"). Now
    those statistics are left out of the tests and named; the rest decide."""
    from rmtbase.scoring.matrices.components import _Cell, _score_cells
    from rmtbase.stats.matrix import matrix_stats
    from rmtbase.stats.precision import round_trip

    rng = np.random.default_rng(0)
    cells = []
    for layer in range(3):
        w = np.asarray(round_trip(0.02 * rng.standard_normal((32, 64)).astype(np.float32),
                                  "q8_0"))
        cells.append(_Cell(layer, "q", w.shape, "float32", "q8_0", "q8_0", False,
                           matrix_stats(w, storage="q8_0")))
    ds = _score_cells(cells, alpha=0.05, draws=100, seed=0)
    gone = ds.attrs["undefined_under_null"].split(",")
    assert gone == ["weibull_k_trim100", "weibull_lambda_trim100"]
    assert np.isnan(ds["p_value"].sel(stat="weibull_k_trim100").values).all()
    assert np.isfinite(ds["p_value"].sel(stat="weibull_k").values).all()
    assert np.isfinite(ds["component_p_value"].values).all()
    assert int(ds["component_flag"].sum()) == 0
