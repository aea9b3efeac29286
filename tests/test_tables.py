"""baseline(): layout, attrs, reproducibility, key derivation, and Monte Carlo checks.

Monte Carlo checks compare table means with exact expectations derived here independently
(not with the library's analytic module) at |z| < 5, z from the draws' standard error.
"""

import json
import math

import numpy as np
import pytest
import xarray as xr

import rmtbase
from rmtbase.baseline.table_dataset import assemble
from rmtbase.baseline.tables import (
    DRAW_BLOCK,
    baseline,
    cell_key,
    generate_blocks,
    grid_cells,
    make_spec,
    reference_values,
)
from rmtbase.errors import InputError

D, DH = 16, 4
# Two blocks, the second short: every "all" draw runs in 64-draw map chunks (one compilation
# serves every test of this config), so the draws, not the compiles, set this file's cost
# (5 chunks per table here against 8 at 2 * DRAW_BLOCK)
N = DRAW_BLOCK + 64


@pytest.fixture(scope="module")
def small():
    return baseline(D, DH, draws=N, seed=3, progress=False)


def test_layout_and_attrs(small):
    assert dict(small.sizes) == {"d": 1, "d_h": 1, "draw": N, "eig": DH}
    lam = small["lambda"]  # the stored spectrum (rmtbase.baseline.spectra)
    assert lam.dims == ("d", "d_h", "draw", "eig") and lam.dtype == np.float32
    assert (lam.attrs["sigma_power"], lam.attrs["sigma_of"]) == (2, "sigma_q*sigma_k")
    for name in ("npr", "lambda_max", "spectral_entropy", "sum_lambda", "sum_lambda2",
                 "condition_number", "stable_rank", "q_std", "k_std", "qk_std",
                 "qk_excess_kurtosis", "q_weibull_k", "q_rms", "k_rms"):
        assert name in small.data_vars, name
        var = small[name]
        assert var.dims == ("d", "d_h", "draw")
        assert var.dtype == np.float32
        for key in ("long_name", "units", "definition", "sigma_power", "scaling"):
            assert key in var.attrs, (name, key)
        assert np.all(np.isfinite(var.values)), name
    assert "qk.npr" not in small.data_vars and "spectrum" not in " ".join(small.data_vars)
    a = small.attrs
    assert a["rmtbase_version"] == rmtbase.__version__
    assert (a["ensemble"], a["seed"], a["draws"], a["dtype"]) == ("lowrank", 3, N,
                                                                   "float32")
    assert a["backend"] == "cpu" and a["scaling_factor"] == "none"
    assert "creation_time" in a and "conventions" in a
    refs = json.loads(a["analytic_reference_values"])["16x4"]
    assert refs["npr"] == pytest.approx(1 / (1 + 2 * DH / D), rel=1e-12)


def test_same_seed_identical_other_seed_differs(small):
    again = baseline(D, DH, draws=N, seed=3, progress=False)
    # exact: the same call twice in one process: same compiled programs, same inputs
    xr.testing.assert_identical(again.drop_attrs(deep=False), small.drop_attrs(deep=False))
    other = baseline(D, DH, draws=N, seed=4, progress=False)
    assert not np.array_equal(other["npr"].values, small["npr"].values)


def test_block_ranges_and_public_null_draws(small):
    """Block b of a cell is null_draws(fold_in(cell_key, b), ...), whatever range is asked."""
    import jax

    from rmtbase.baseline.null import null_draws

    spec = make_spec(draws=N, seed=3)
    part = generate_blocks(spec, D, DH, 1, 2)
    with jax.enable_x64(False):
        ref = null_draws(jax.random.fold_in(cell_key(3, D, DH), 1), D, DH, N - DRAW_BLOCK)
    # the table also stores every draw's spectrum; asking for it changes no statistic
    assert set(part) == set(ref) | {"qk.lambda"}
    for k, v in part.items():
        var = "lambda" if k == "qk.lambda" else rmtbase.stats.table_name(k)
        table = small[var].values[0, 0, DRAW_BLOCK:]
        # exact: one compiled program: every chunk size and draw count runs the fixed batch width,
        #  draw i keyed by fold_in(key, i)
        np.testing.assert_array_equal(v, table, err_msg=k)
        if k in ref:  # a second program (no spectrum kept): equal to float32 rounding
            np.testing.assert_allclose(ref[k], table, rtol=1e-6, atol=1e-7, err_msg=k)


def test_prefix_property(small):
    """Draw i depends on (seed, d, d_h, i) only: a shorter table is a prefix of a longer one."""
    short = baseline(D, DH, draws=DRAW_BLOCK + 8, seed=3, progress=False)
    # exact: one compiled program: every chunk size and draw count runs the fixed batch width, draw
    #  i keyed by fold_in(key, i)
    xr.testing.assert_identical(short.drop_attrs(deep=False),
                                small.isel(draw=slice(0, DRAW_BLOCK + 8)).drop_attrs(deep=False))


def test_grid_cells_equal_single_cells(small):
    grid = baseline(D, [2, DH], draws=N, seed=3, progress=False)
    assert dict(grid.sizes) == {"d": 1, "d_h": 2, "draw": N, "eig": DH}
    assert grid.attrs["cells"] == f"{D}x2,{D}x{DH}"
    # exact: each cell is keyed by (seed, d, d_h) and run by its own compiled program, alone or in a
    #  grid
    xr.testing.assert_identical(grid.sel(d_h=[DH]).drop_attrs(deep=False),
                                small.drop_attrs(deep=False))
    assert not np.array_equal(grid["npr"].sel(d_h=2), grid["npr"].sel(d_h=DH))


def test_assemble_leaves_non_cells_nan():
    spec = make_spec(draws=3, stats="spectral")
    cells = grid_cells([2, 5], [1, 4])
    assert cells == [(2, 1), (5, 1), (5, 4)]
    results = {c: {"qk.npr": np.full(3, c[0] + c[1] / 10), "q.rms": np.ones(3)} for c in cells}
    ds = assemble(spec, cells, results)
    assert np.all(np.isnan(ds["npr"].sel(d=2, d_h=4)))
    assert ds["npr"].sel(d=5, d_h=4).values.tolist() == [np.float32(5.4)] * 3
    assert list(ds.data_vars) == ["npr", "q_rms"]
    assert ds["q_rms"].attrs["sigma_of"] == "sigma_q"
    assert ds["npr"].attrs["sigma_of"] == "sigma_q*sigma_k"
    refs = json.loads(ds.attrs["analytic_reference_values"])
    assert set(refs) == {"2x1", "5x1", "5x4"}


def test_float64_table():
    ds = baseline(D, DH, draws=8, seed=3, stats="spectral", dtype="float64", progress=False)
    assert ds["npr"].dtype == np.float64 and ds.attrs["jax_enable_x64"] == 1
    assert np.all((ds["npr"].values > 0) & (ds["npr"].values <= 1))


def test_float32_same_with_and_without_x64(small):
    import jax

    with jax.enable_x64(False):
        off = baseline(D, DH, draws=N, seed=3, progress=False)
    # exact: a float32 program; x64 changes only the index/key integer widths
    xr.testing.assert_identical(off.drop_attrs(deep=False), small.drop_attrs(deep=False))


def test_sum_lambda_mean_is_exact_expectation():
    """E Σλ = E‖W_QK‖_F² = d² d_h σ_Q² σ_K² exactly (each entry of W_QK is a sum of d_h
    products of independent N(0, σ_Q²), N(0, σ_K²) variables), and the ddof-0 variance of the
    d² uncorrelated mean-zero entries has E = (1 - 1/d²) d_h σ_Q² σ_K²."""
    sq, sk = 0.3, 2.5  # the configuration of test_cache's rescale test: compiled once
    # 320 draws (5 map chunks; 640 before): |z| < 5 with z from the draws' own standard error
    ds = baseline(D, DH, draws=320, seed=11, sigma_q=sq, sigma_k=sk, progress=False)
    exact = D**2 * DH * sq**2 * sk**2
    x = ds["sum_lambda"].values.astype(np.float64).ravel()
    z = (x.mean() - exact) / (x.std(ddof=1) / math.sqrt(x.size))
    assert abs(z) < 5, z
    assert refs_close(reference_values(D, DH, sq, sk), "sum_lambda", exact)
    v = ds["qk_std"].values.astype(np.float64).ravel() ** 2
    z = (v.mean() - (1 - 1 / D**2) * DH * (sq * sk) ** 2) / (v.std(ddof=1) / math.sqrt(v.size))
    assert abs(z) < 5, z


def refs_close(refs, name, value):
    return name not in refs or math.isclose(refs[name], value, rel_tol=1e-12)


def _product_edges(c):
    """Edges of MP_c ⊠ MP_c from its S-transform S(w) = (1 + c w)^-2: χ(w) = w / ((1+w)(1+cw)²)
    is stationary where 2c w² + c w − 1 = 0, and the edges are 1/χ at those w."""
    out = []
    for w in ((-c + math.sqrt(c * c + 8 * c)) / (4 * c), (-c - math.sqrt(c * c + 8 * c)) / (4 * c)):
        out.append((1 + w) * (1 + c * w) ** 2 / w)
    return out[1], out[0]


def test_reference_values_against_independent_formulas():
    d, d_h, sq, sk = 768, 64, 1.3, 0.4
    refs = reference_values(d, d_h, sq, sk)
    c = d_h / d
    lo, hi = _product_edges(c)
    assert _product_edges(1.0)[1] == pytest.approx(27 / 4)  # Fuss–Catalan edge, s = 2
    expect = {"npr": 1 / (1 + 2 * c), "pr": d_h / (1 + 2 * c),
              "lambda_max": hi * (sq * sk * d) ** 2, "lambda_min": lo * (sq * sk * d) ** 2,
              "condition_number": hi / lo, "stable_rank": d_h / hi,
              "sum_lambda": d**2 * d_h * (sq * sk) ** 2, "qk_std": math.sqrt(d_h) * sq * sk,
              "qk_excess_kurtosis": 6 / d_h, "q_std": sq, "k_weibull_lambda": None}
    for name, value in expect.items():
        if value is None or name not in refs:
            continue
        assert refs[name] == pytest.approx(value, rel=1e-10), name
    assert {"npr", "sum_lambda", "qk_std", "q_std"} <= set(refs)


@pytest.mark.parametrize("kw, match", [
    (dict(d=4, d_h=8), "d_h must not exceed d"),
    (dict(d=0, d_h=0), "d_h must be at least 1"),
    (dict(d=16, d_h=4, sigma=-1.0), "sigma"),
    (dict(d=16, d_h=4, sigma=1.0, sigma_q=2.0), "either sigma"),
    (dict(d=16, d_h=4, draws=1), "draws"),
    (dict(d=16, d_h=4, ensemble="wigner"), "ensemble"),
    (dict(d=16, d_h=4, stats="some"), "stats"),
    (dict(d=16, d_h=4, dtype="int8"), "dtype"),
    (dict(d=16, d_h=4, ensemble="residual"), "depth"),
    (dict(d=16, d_h=4, depth=3), "depth"),
    (dict(d=16, d_h=4, seed=-1), "seed"),
])
def test_bad_input_is_one_line_input_error(kw, match):
    kw.setdefault("draws", 10)
    with pytest.raises(InputError, match=match) as info:
        baseline(**kw, progress=False)
    assert "\n" not in str(info.value)


def test_top_level_alias_and_out(tmp_path):
    ds = rmtbase.baseline(D, DH, draws=64, seed=2, progress=False,
                          out=tmp_path / "t.nc")
    back = rmtbase.baseline.tables.read_table(tmp_path / "t.nc")
    # exact: a file round trip of these arrays (lossless), or one read of one file
    xr.testing.assert_identical(back.drop_encoding(), ds)
