"""Tables store every draw's spectrum (``lambda``), and spectral statistics missing from a
table are derived from it at read time (rmtbase.baseline.spectra)."""

import numpy as np
import pytest

from rmtbase.baseline import cache
from rmtbase.baseline.references import summary
from rmtbase.baseline.spectra import spectral_from_table
from rmtbase.baseline.tables import baseline, read_table, write_table
from rmtbase.errors import TableError
from rmtbase.scoring.nulls.layer_null import null_arrays
from rmtbase.stats import SPECTRAL_STATS
from rmtbase.stats.spectral import spectral_stats

N = 250
#: float32 spectral statistics recomputed from the stored λ outside the vectorised draw:
#: the sums may be taken in another order (measured ≤ 6e-7 relative).
RTOL = 4e-6


@pytest.fixture(scope="module",  # the all-statistics table: slow tier (quick tier <= 10 min)
                params=["spectral", pytest.param("all", marks=pytest.mark.slow)])
def grid(request):
    return baseline([12, 20], [3, 6], draws=N, seed=5, stats=request.param, progress=False)


def _close(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    # exact: integers / booleans (NaN masks)
    assert np.array_equal(np.isnan(a), np.isnan(b))
    m = np.isfinite(a)
    np.testing.assert_allclose(b[m], a[m], rtol=RTOL, atol=0)


def test_table_stores_its_spectrum(grid):
    lam = grid["lambda"]
    assert lam.dims == ("d", "d_h", "draw", "eig") and lam.dtype == np.float32
    assert grid.sizes["eig"] == 6 and list(grid["eig"].values) == list(range(6))
    for key in ("long_name", "units", "definition"):
        assert lam.attrs[key]
    assert (lam.attrs["sigma_power"], lam.attrs["scaling"]) == (2, "power")
    # cell (12, 3): three eigenvalues, NaN-padded; descending
    cell = lam.sel(d=12, d_h=3).values
    assert np.all(np.isnan(cell[:, 3:])) and np.all(np.isfinite(cell[:, :3]))
    assert np.all(np.diff(cell[:, :3], axis=1) <= 0)
    for d, d_h in ((12, 3), (12, 6), (20, 3), (20, 6)):
        st = spectral_stats(lam.sel(d=d, d_h=d_h).values[:, :d_h])
        for s in SPECTRAL_STATS:
            _close(grid[s].sel(d=d, d_h=d_h).values, st[s])


def test_derived_equals_stored(grid):
    dropped = grid.drop_vars(["npr", "spectral_entropy", "lambda_min"])
    got = spectral_from_table(dropped)
    for s in ("npr", "spectral_entropy", "lambda_min"):
        _close(grid[s].values, got[s].values)
        assert got[s].attrs == grid[s].attrs and got[s].dtype == grid[s].dtype
    assert spectral_from_table(grid) is grid  # nothing missing: untouched
    arrays = null_arrays(dropped, ["qk.npr", "qk.pr"], 20, 6)
    _close(grid["npr"].sel(d=20, d_h=6).values, arrays["qk.npr"])
    no_spectrum = dropped.drop_vars("lambda")
    with pytest.raises(TableError, match="stores no spectrum"):
        spectral_from_table(no_spectrum)
    with pytest.raises(TableError, match="lacks"):
        null_arrays(no_spectrum, ["qk.npr"], 20, 6)


def test_summary_skips_the_spectrum_and_rescale_moves_it(grid):
    out = summary(grid, 20, 6)
    assert "lambda" not in out and "npr" in out
    r = cache.rescale(grid, 2.0, 0.5)
    np.testing.assert_allclose(r["lambda"].values, grid["lambda"].values, rtol=1e-6)
    r = cache.rescale(grid, 2.0, 3.0)
    np.testing.assert_allclose(r["lambda"].values, 36 * grid["lambda"].values.astype(np.float64),
                               rtol=1e-6)


def test_sigma_table_stores_scaled_spectrum():
    ds = baseline(12, 3, draws=N, seed=5, stats="spectral", sigma=2.0, progress=False)
    one = baseline(12, 3, draws=N, seed=5, stats="spectral", progress=False)
    np.testing.assert_allclose(ds["lambda"].values, 16 * one["lambda"].values.astype(np.float64),
                               rtol=1e-6)


def test_written_table_roundtrips_compressed(grid, tmp_path):
    path = write_table(grid, tmp_path / "t.nc")
    back = read_table(path)
    # exact: a file round trip of these arrays (lossless), or one read of one file
    np.testing.assert_array_equal(back["lambda"].values, grid["lambda"].values)
    import netCDF4

    with netCDF4.Dataset(path) as nc:
        f = nc["lambda"].filters()
        assert f["zlib"] and f["shuffle"]


def test_cache_derives_or_regenerates(tmp_path, monkeypatch):
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "c"))
    ds = cache.null_table(12, 3, stats="spectral", min_draws=N, seed=9)
    name = cache.table_filename(12, 3, ensemble="lowrank", stats="spectral", draws=N, seed=9,
                                dtype="float32")
    path = tmp_path / "c" / name
    # a cached table without one statistic but with its spectrum: derived, no regeneration
    write_table(read_table(path).drop_vars("npr"), path, replace="any")
    got = cache.null_table(12, 3, stats="spectral", min_draws=N, seed=9)
    _close(ds["npr"].values, got["npr"].values)
    assert "npr" not in read_table(path).data_vars
    # ... and without the spectrum too: stale, regenerated with a warning
    write_table(read_table(path).drop_vars("lambda"), path, replace="any")
    with pytest.warns(RuntimeWarning, match="ignoring cached table"):
        again = cache.null_table(12, 3, stats="spectral", min_draws=N, seed=9)
    # exact: the same call twice in one process: same compiled programs, same inputs
    np.testing.assert_array_equal(again["npr"].values, ds["npr"].values)
    assert "npr" in read_table(path).data_vars and "lambda" in read_table(path).data_vars


def test_float64_table_derived_in_float64():
    ds = baseline(12, 3, draws=20, seed=5, stats="spectral", dtype="float64", progress=False)
    assert ds["lambda"].dtype == np.float64
    got = spectral_from_table(ds.drop_vars("npr"))
    assert got["npr"].dtype == np.float64
    np.testing.assert_allclose(got["npr"].values, ds["npr"].values, rtol=1e-12)


def test_resume_block_without_spectrum_is_recomputed(tmp_path):
    from rmtbase.baseline.partial import PartialStore
    from rmtbase.baseline.tables import generate_blocks, make_spec

    spec = make_spec(draws=N, seed=5, stats="spectral")
    store = PartialStore(tmp_path / "t.nc", spec)
    full = generate_blocks(spec, 12, 3, store=store)
    assert full["qk.lambda"].shape == (N, 3)
    old = {k: v for k, v in full.items() if k != "qk.lambda"}  # a block stored before spectra
    store.save(12, 3, 0, old)
    again = generate_blocks(spec, 12, 3, store=store)
    for k, v in full.items():
        # exact: the same call twice in one process: same compiled programs, same inputs (a stored
        #  block recomputed by the same program)
        np.testing.assert_array_equal(again[k], v, err_msg=k)
    assert "qk.lambda" in store.load(12, 3, 0, N)
