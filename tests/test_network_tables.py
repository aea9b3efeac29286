"""Product-network tables over (d, depth, gain): netCDF round trip with provenance, the
documented key derivation, prefixes, common random numbers across gains, Dask sweeps and the
``rmtbase sweep --network`` command. One configuration throughout, so the draw function compiles
once per width."""

import json
from fractions import Fraction

import jax
import numpy as np
import pytest
import xarray as xr

from rmtbase.analytic import network_finite as nf
from rmtbase.baseline import network_tables as nt
from rmtbase.baseline.table_file import read_table
from rmtbase.cli import main
from rmtbase.ensembles import named_key
from rmtbase.ensembles import products as pr
from rmtbase.errors import InputError, RmtbaseError

OPTS = dict(d=[3, 5], depth=[1, 4], gain=[0.5, 2.0], draws=6, seed=11, chunk_size=3,
            progress=False)
GAUSS = {**OPTS, "d": 5, "stats": "spectral"}   # a cheaper program to compile


@pytest.fixture(scope="module")
def tables():
    return {"residual": nt.network_table(kind="residual", **OPTS),
            "ginibre": nt.network_table(kind="ginibre", **GAUSS)}


def test_round_trip_and_provenance(tables, tmp_path):
    out = tmp_path / "net.nc"
    ds = nt.network_table(kind="residual", out=out, **OPTS)
    back = read_table(out)
    # exact: a file round trip of these arrays (lossless), or one read of one file
    xr.testing.assert_identical(back.drop_encoding(), ds)
    # exact: the same call twice in one process: same compiled programs, same inputs
    xr.testing.assert_identical(ds.drop_attrs(deep=False),
                                tables["residual"].drop_attrs(deep=False))
    assert dict(back.sizes) == {"d": 2, "depth": 2, "gain": 2, "draw": 6}
    a = back.attrs
    assert a["rmtbase_table_kind"] == "product_network" and a["network"] == "residual"
    assert a["seed"] == 11 and a["draws"] == 6 and a["dtype"] == "float64"
    for key in ("rmtbase_version", "jax_version", "backend", "prng_impl", "key_derivation",
                "conventions", "creation_time"):
        assert a[key]
    assert {"lyapunov_max", "lyapunov_min", "lyapunov_mean", "lambda_max", "npr",
            "condition_number", "m_excess_kurtosis"} <= set(back.data_vars)
    assert back["lyapunov_max"].attrs["units"] == "nat per layer"
    refs = json.loads(a["analytic_reference_values"])
    r = refs["d=5,depth=4,gain=2"]
    assert r["sum_lambda"] == 3**4 * 5
    assert r["sum_lambda2"] == pytest.approx(float(nf.expected_trace_sq("residual", 5, 4, 2)))
    assert r["m_excess_kurtosis"] == pytest.approx(float(nf.element_kurtosis("residual", 5, 4, 2)))


def test_a_draw_follows_the_documented_key_derivation(tables):
    """Draw j of width d: fold_in(fold_in(cell, 0), j), cell = fold_in(named_key(key(seed),
    name), d), name "gaussian" for the kind "ginibre" (its name before the rename, so its draws
    did not change); layer l from fold_in(named_key(draw, 'layers'), l)."""
    d, j, L, g = 5, 4, 4, 2.0
    cell = jax.random.fold_in(named_key(jax.random.key(11), "gaussian"), d)
    key = jax.random.fold_in(jax.random.fold_in(cell, 0), j)
    q, logd, t = pr.network_factors(key, "ginibre", L, g, d=d)
    lam = np.exp(2 * np.asarray(pr.log_singular_values(logd, t)))
    row = tables["ginibre"].sel(d=d, depth=L, gain=g).isel(draw=j)
    assert float(row["sum_lambda"]) == pytest.approx(lam.sum(), rel=1e-12)
    assert float(row["lambda_max"]) == pytest.approx(lam.max(), rel=1e-12)
    assert float(row["lyapunov_min"]) == pytest.approx(np.log(lam.min()) / (2 * L), rel=1e-10)


def test_gains_share_their_normal_variates(tables):
    """Gaussian: M at gain G is G^{L/2} × M at gain 1 with the same variates, so Σλ scales by
    exactly (G'/G)^L and scale-free statistics agree."""
    ds = tables["ginibre"]
    lo, hi = ds.sel(gain=0.5), ds.sel(gain=2.0)
    ratio = (hi["sum_lambda"] / lo["sum_lambda"]).values
    np.testing.assert_allclose(ratio, np.broadcast_to((4.0 ** ds["depth"].values)[None, :, None],
                                                      ratio.shape), rtol=1e-12)
    np.testing.assert_allclose(hi["npr"].values, lo["npr"].values, rtol=1e-10)
    np.testing.assert_allclose(hi["lyapunov_max"].values - lo["lyapunov_max"].values,
                               np.log(4.0) / 2, rtol=1e-10)


def test_a_shorter_table_is_a_prefix(tables):
    short = nt.network_table(kind="residual", **{**OPTS, "draws": 3})
    # exact: one compiled program: every chunk size and draw count runs the fixed batch width, draw
    #  i keyed by fold_in(key, i)
    xr.testing.assert_identical(short.drop_attrs(deep=False),
                                tables["residual"].isel(draw=slice(0, 3)).drop_attrs(deep=False))


def test_spectral_table_values_against_the_exact_mean(tables):
    """A sanity check at this tiny size (the z-tests are in tests/test_products.py)."""
    ds = tables["residual"]
    x = ds["sum_lambda"].sel(d=5, depth=1, gain=0.5).values
    assert x.mean() == pytest.approx(float(nf.expected_trace("residual", 5, 1, Fraction(1, 2))),
                                     rel=0.5)


def test_summary_refuses_a_network_table(tmp_path, capsys):
    out = tmp_path / "net.nc"
    nt.network_table(kind="residual", out=out, **OPTS)
    assert main(["baseline", "--summary", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "product-network table" in err and "\n" not in err


@pytest.mark.parametrize("kw,match", [
    (dict(kind="tanh"), "kind"), (dict(stats="some"), "stats"), (dict(draws=1), "draws"),
    (dict(seed=-1), "seed"), (dict(depth=0), "depth"), (dict(depth=[]), "depth"),
])
def test_spec_errors(kw, match):
    with pytest.raises(InputError, match=match):
        nt.make_network_spec(**kw)


def test_grid_errors(tmp_path):
    with pytest.raises(InputError, match="at least 2"):
        nt.network_grid([1, 4], 1.0)
    with pytest.raises(InputError, match="gain"):
        nt.network_grid(4, [1.0, -2.0])
    with pytest.raises(RmtbaseError, match="directory"):
        nt.network_table(4, 1, 1.0, draws=2, out=tmp_path, progress=False)


# ------------------------------------------------------------------------------- Dask sweeps


def test_network_sweep_equals_the_single_process_table(tables):
    distributed = pytest.importorskip("distributed")
    from rmtbase.baseline.sweep import NO_DASHBOARD, network_sweep

    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2,
                            dashboard_address=None,
                            scheduler_kwargs=NO_DASHBOARD) as client:
        swept = network_sweep(kind="residual", client=client, progress=False, **{
            k: v for k, v in OPTS.items() if k != "progress"})
    # exact: the same compiled programs (fixed batch width) and keys, in a Dask task on this CPU
    #  instead of this process
    xr.testing.assert_identical(swept.drop_attrs(deep=False),
                                tables["residual"].drop_attrs(deep=False))
    assert "Dask tasks" in swept.attrs["history"]


@pytest.mark.slow
def test_cli_sweep_network_two_workers(tables, tmp_path, capsys):
    pytest.importorskip("distributed")
    out = tmp_path / "net.nc"
    argv = ["sweep", "--network", "residual", "--d", "3", "5", "--depth", "1", "4", "--gain",
            "0.5", "2", "--draws", "6", "--seed", "11", "--workers", "2", "--no-progress",
            "--out", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    # exact: the same compiled programs (fixed batch width) and keys, in a Dask task on this CPU
    #  instead of this process
    xr.testing.assert_identical(read_table(out).drop_attrs(deep=False).drop_encoding(),
                                tables["residual"].drop_attrs(deep=False))


@pytest.mark.parametrize("extra,match", [
    (["--dh", "4"], "--dh"), (["--sigma", "2"], "--sigma"), (["--dtype", "float64"], "--dtype"),
    (["--ensemble", "residual"], "--ensemble"),
])
def test_cli_sweep_network_refuses_head_options(extra, match, tmp_path, capsys):
    argv = ["sweep", "--network", "residual", "--d", "4", "--depth", "2", "--workers", "1",
            "--out", str(tmp_path / "x.nc"), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert match in err and "\n" not in err


def test_cli_sweep_option_mixups(tmp_path, capsys):
    base = ["sweep", "--d", "4", "--workers", "1", "--out", str(tmp_path / "x.nc")]
    for extra, match in ((["--network", "residual"], "--depth"), ([], "--dh"),
                         (["--dh", "2", "--gain", "1"], "--gain"),
                         (["--dh", "2", "--depth", "1", "2"], "one value")):
        assert main([*base, *extra]) == 2
        assert match in capsys.readouterr().err
