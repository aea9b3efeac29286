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
from rmtbase.errors import InputError
from rmtbase.tables import DRAW_BLOCK, baseline, generate_blocks, make_spec, reference_values

D, DH = 16, 4


@pytest.fixture(scope="module")
def small():
    return baseline(D, DH, draws=DRAW_BLOCK + 50, seed=3, progress=False)


def test_layout_and_attrs(small):
    assert dict(small.sizes) == {"d": 1, "d_h": 1, "draw": DRAW_BLOCK + 50}
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
    assert (a["ensemble"], a["seed"], a["draws"], a["dtype"]) == ("lowrank", 3, DRAW_BLOCK + 50,
                                                                   "float32")
    assert a["backend"] == "cpu" and a["scaling_factor"] == "none"
    assert "creation_time" in a and "conventions" in a
    refs = json.loads(a["analytic_reference_values"])["16x4"]
    assert refs["npr"] == pytest.approx(1 / (1 + 2 * DH / D), rel=1e-12)


def test_same_seed_identical_other_seed_differs(small):
    again = baseline(D, DH, draws=DRAW_BLOCK + 50, seed=3, progress=False)
    xr.testing.assert_identical(again.drop_attrs(deep=False), small.drop_attrs(deep=False))
    other = baseline(D, DH, draws=DRAW_BLOCK + 50, seed=4, progress=False, stats="spectral")
    assert not np.array_equal(other["npr"].values, small["npr"].values)


def test_chunking_does_not_change_numbers(small):
    chunked = baseline(D, DH, draws=DRAW_BLOCK + 50, seed=3, chunk_size=7, progress=False)
    xr.testing.assert_identical(chunked.drop_attrs(deep=False), small.drop_attrs(deep=False))
    spec = make_spec(draws=DRAW_BLOCK + 50, seed=3)
    both = generate_blocks(spec, D, DH, 0, 2)
    for k, v in both.items():
        np.testing.assert_array_equal(v, small[rmtbase.stats.table_name(k)].values.ravel())


def test_prefix_property(small):
    """Draw i depends on (seed, d, d_h, i) only: a shorter table is a prefix of a longer one."""
    short = baseline(D, DH, draws=DRAW_BLOCK + 10, seed=3, progress=False)
    xr.testing.assert_identical(short.drop_attrs(deep=False),
                                small.isel(draw=slice(0, DRAW_BLOCK + 10)).drop_attrs(deep=False))


def test_grid_cells_equal_single_cells():
    grid = baseline([8, 12], [2, 3, 10], draws=30, seed=1, stats="spectral", progress=False)
    assert dict(grid.sizes) == {"d": 2, "d_h": 3, "draw": 30}
    assert grid.attrs["cells"] == "8x2,8x3,12x2,12x3,12x10"
    assert np.all(np.isnan(grid["npr"].sel(d=8, d_h=10).values))  # d_h > d: not a cell
    one = baseline(12, 3, draws=30, seed=1, stats="spectral", progress=False)
    xr.testing.assert_identical(grid.sel(d=[12], d_h=[3]).drop_attrs(deep=False), one.drop_attrs(deep=False))


def test_float32_same_with_and_without_x64(small):
    import jax

    with jax.enable_x64(False):
        off = baseline(D, DH, draws=DRAW_BLOCK + 50, seed=3, progress=False)
    xr.testing.assert_identical(off.drop_attrs(deep=False), small.drop_attrs(deep=False))


def test_sum_lambda_mean_is_exact_expectation():
    """E Σλ = E‖W_QK‖_F² = d² d_h σ_Q² σ_K² exactly (each entry of W_QK is a sum of d_h
    products of independent N(0, σ_Q²), N(0, σ_K²) variables)."""
    d, d_h, sq, sk = 24, 6, 1.5, 0.7
    ds = baseline(d, d_h, draws=400, seed=11, sigma_q=sq, sigma_k=sk, stats="spectral",
                  dtype="float64", progress=False)
    x = ds["sum_lambda"].values.ravel()
    exact = d**2 * d_h * sq**2 * sk**2
    z = (x.mean() - exact) / (x.std(ddof=1) / math.sqrt(x.size))
    assert abs(z) < 5, z
    assert refs_close(reference_values(d, d_h, sq, sk), "sum_lambda", exact)


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
    ds = rmtbase.baseline(8, 2, draws=12, seed=2, stats="spectral", progress=False,
                          out=tmp_path / "t.nc")
    back = rmtbase.tables.read_table(tmp_path / "t.nc")
    xr.testing.assert_identical(back.drop_encoding(), ds)
