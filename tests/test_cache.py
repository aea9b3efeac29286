"""User cache, shipped tables and exact σ rescaling."""

import json
import math
from importlib import resources

import numpy as np
import pytest
import xarray as xr

import rmtbase.baseline.tables
from rmtbase.baseline import cache
from rmtbase.baseline import shipped as shipped_data
from rmtbase.baseline.tables import TABLE_FORMAT, baseline, read_table
from rmtbase.errors import InputError, TableError


@pytest.fixture
def user_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_cache_dir_env_and_default(monkeypatch, tmp_path):
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "x"))
    assert cache.cache_dir() == tmp_path / "x"
    monkeypatch.delenv("RMTBASE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "xdg" / "rmtbase"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.cache_dir() == tmp_path / "home" / ".cache" / "rmtbase"


def test_filename_spells_out_every_key():
    name = cache.table_filename(768, 64, ensemble="lowrank", stats="spectral", draws=2000,
                                seed=7, dtype="float32")
    assert name == f"lowrank-d768-dh64-spectral-n2000-seed7-float32-v{TABLE_FORMAT}.nc"


def test_generated_then_cached(user_cache, monkeypatch):
    first = cache.null_table(16, 4, stats="all", min_draws=64, seed=7)
    files = list(user_cache.iterdir())
    assert [f.name for f in files] == [cache.table_filename(
        16, 4, ensemble="lowrank", stats="all", draws=64, seed=7, dtype="float32")]
    assert first.attrs["sigma_q"] == 1.0 and first.sizes["draw"] == 64

    def no_generation(*a, **k):
        raise AssertionError("should have come from the cache")

    monkeypatch.setattr(rmtbase.baseline.tables, "cell_table", no_generation)
    second = cache.null_table(16, 4, stats="all", min_draws=30, seed=7)
    # a request for fewer draws gets exactly its draws, the first 30
    assert second.sizes["draw"] == 30 and second.attrs["draws"] == 30
    first30 = first.isel(draw=slice(0, 30)).assign_attrs(draws=30)
    # exact: the cached file holds this process's own draws of the same program, read back losslessly
    xr.testing.assert_identical(second.drop_encoding(), first30)
    # a cached "all" table serves only "all": a spectral or element request is drawn as its
    #  own table, so what the cache holds never changes a score (a spectral table's draws are
    #  not an all table's)
    for stats in ("spectral", "elementwise"):
        with pytest.raises(AssertionError, match="cache"):
            cache.null_table(16, 4, stats=stats, min_draws=64, seed=7)
    with pytest.raises(AssertionError, match="cache"):  # other seed, more draws: not served
        cache.null_table(16, 4, stats="all", min_draws=64, seed=8)
    with pytest.raises(AssertionError, match="cache"):
        cache.null_table(16, 4, stats="all", min_draws=65, seed=7)


def test_matching_rules():
    e = {"d": 8, "d_h": 2, "ensemble": "lowrank", "seed": 0, "dtype": "float32",
         "format": TABLE_FORMAT, "stats": "spectral", "draws": 100, "storage": "float32"}
    from dataclasses import replace

    from rmtbase.stats.storage import storage_record

    key = cache.TableKey(d=8, d_h=2, stats="spectral", min_draws=100, seed=0,
                         ensemble="lowrank", dtype="float32", storage=storage_record("float32"))
    assert cache._matches(e, key)
    for change in (dict(stats="all"), dict(stats="elementwise"), dict(min_draws=101),
                   dict(seed=1), dict(dtype="float64"), dict(d=9), dict(d_h=3),
                   dict(storage=storage_record("bfloat16"))):
        assert not cache._matches(e, replace(key, **change)), change
    assert not cache._matches({**e, "format": TABLE_FORMAT + 1}, key)
    assert cache._matches({**e, "stats": "all"}, replace(key, stats="elementwise"))
    no_storage = {k: v for k, v in e.items() if k != "storage"}  # v0.2 index entries
    assert cache._matches(no_storage, key)
    # the request's key: validated, the storage looked up once (a float storage of a spectral
    # request shares the float32 null), a block format kept for any statistic set
    assert cache.table_key(8, 2, stats="spectral", min_draws=100, storage="BFLOAT16") == key
    assert cache.table_key(64, 2, storage="q8_0").storage is storage_record("q8_0")
    with pytest.raises(InputError, match="storage must be one of"):
        cache.table_key(8, 2, storage="q9_9")


def test_damaged_cache_file_is_regenerated(user_cache):
    good = cache.null_table(16, 4, stats="all", min_draws=64, seed=2)
    (path,) = user_cache.iterdir()
    path.write_bytes(path.read_bytes()[:200])
    with pytest.warns(RuntimeWarning, match="not a readable netCDF4"):
        again = cache.null_table(16, 4, stats="all", min_draws=64, seed=2)
    # exact: the same call twice in one process: same compiled programs, same inputs
    np.testing.assert_array_equal(again["npr"].values, good["npr"].values)
    read_table(path)  # rewritten whole


@pytest.mark.parametrize("poison", ["fewer draws", "other seed", "other sigma", "other cell",
                                    "elementwise only", "other storage"])
def test_cache_contents_are_checked_against_the_name(user_cache, poison):
    """A file whose contents disagree with its name is never used: it is reported (one
    warning naming the file) and regenerated; the result equals a clean generation."""
    import shutil

    from rmtbase.baseline.tables import write_table

    clean = baseline(16, 4, draws=64, seed=3, stats="all", progress=False)
    make = {"fewer draws": dict(draws=10, seed=3), "other seed": dict(draws=64, seed=4),
            "other sigma": dict(draws=64, seed=3, sigma=2.0),
            "other cell": dict(draws=64, seed=3, d=(20, 4)),
            "elementwise only": dict(draws=64, seed=3, stats="elementwise"),
            "other storage": dict(draws=64, seed=3, storage="bfloat16")}[poison]
    d, d_h = make.pop("d", (16, 4))
    make.setdefault("stats", "all")
    bad = baseline(d, d_h, progress=False, **make)
    name = cache.table_filename(16, 4, ensemble="lowrank", stats="all", draws=64, seed=3,
                                dtype="float32")
    user_cache.mkdir(exist_ok=True)
    write_table(bad, user_cache / name)
    with pytest.warns(RuntimeWarning, match=name.replace(".", r"\.")):
        got = cache.null_table(16, 4, stats="all", min_draws=64, seed=3)
    # exact: the same call twice in one process: same compiled programs, same inputs
    np.testing.assert_array_equal(got["npr"].values, clean["npr"].values)
    # exact: the same call twice in one process: same compiled programs, same inputs
    np.testing.assert_array_equal(got["q_entropy"].values, clean["q_entropy"].values)
    shutil.rmtree(user_cache)


def test_storage_tables_are_keyed_and_float_spectral_requests_share_float32(user_cache):
    # 16 x 4 (was 32 x 4): the bfloat16 "all" program is then that of
    # test_cache_contents_are_checked_against_the_name[other storage], compiled once; Q4_1
    # needs d a multiple of its 32-value block
    a = cache.null_table(16, 4, stats="all", min_draws=40, seed=5, storage="bfloat16")
    assert a.attrs["storage_dtype"] == "bfloat16" and "bfloat16" in a.attrs["sampler"]
    b = cache.null_table(16, 4, stats="spectral", min_draws=40, seed=5, storage="float16")
    assert b.attrs.get("storage_dtype", "float32") == "float32"
    names = sorted(p.name for p in user_cache.iterdir())
    assert names == sorted([
        cache.table_filename(16, 4, ensemble="lowrank", stats="all", draws=40, seed=5,
                             dtype="float32", storage="bfloat16"),
        cache.table_filename(16, 4, ensemble="lowrank", stats="spectral", draws=40, seed=5,
                             dtype="float32")])
    q = cache.null_table(32, 4, stats="spectral", min_draws=40, seed=5, storage="q4_1")
    assert q.attrs["storage_dtype"] == "q4_1"


def test_bad_requests(user_cache):
    with pytest.raises(InputError):
        cache.null_table(4, 8)
    with pytest.raises(InputError, match="stats"):
        cache.null_table(8, 4, stats="nope")


def test_shipped_index_entries_are_readable_and_match():
    entries = shipped_data.shipped_index()
    data = resources.files("rmtbase").joinpath("data")
    total = 0
    for e in entries:
        ref = data.joinpath(e["file"])
        with resources.as_file(ref) as path:
            ds = read_table(path)
            total += path.stat().st_size
        assert e["file"] == cache.table_filename(e["d"], e["d_h"], ensemble=e["ensemble"],
                                                 stats=e["stats"], draws=e["draws"],
                                                 seed=e["seed"], dtype=e["dtype"],
                                                 storage=e["storage"])
        assert ds.attrs.get("storage_dtype", "float32") == e["storage"]
        assert (int(ds["d"][0]), int(ds["d_h"][0])) == (e["d"], e["d_h"])
        assert ds.sizes["draw"] == e["draws"] >= 2000
        assert (ds.attrs["seed"], ds.attrs["stats"], ds.attrs["dtype"]) == (
            e["seed"], e["stats"], e["dtype"])
        if e["stats"] in ("spectral", "all") and "lambda" in ds.data_vars:
            # the stored spectrum (sims/add_spectra.py) serves every spectral statistic
            assert ds["lambda"].dims == ("d", "d_h", "draw", "eig")
            assert ds.sizes["eig"] == e["d_h"]
    # ~18 MB of statistics + ~32 MB of stored spectra; the tracked tree must stay
    # under ~55 MB in all
    assert total < 52e6


def test_shipped_table_served_without_generation(monkeypatch, user_cache):
    entries = [e for e in shipped_data.shipped_index() if e["stats"] in ("spectral", "all")]
    if not entries:
        pytest.skip("no shipped tables in this checkout")
    e = min(entries, key=lambda e: e["d"])

    def no_generation(*a, **k):
        raise AssertionError("shipped table not used")

    monkeypatch.setattr(rmtbase.baseline.tables, "cell_table", no_generation)
    ds = cache.null_table(e["d"], e["d_h"], stats="spectral", min_draws=1000, seed=e["seed"])
    best = max(x["draws"] for x in entries if (x["d"], x["d_h"]) == (e["d"], e["d_h"])
               and not x.get("extension"))
    assert ds.sizes["draw"] == best and not user_cache.exists()
    assert {"npr", "q_rms"} <= set(ds.data_vars) and "qk_std" not in ds.data_vars


def test_extension_table_serves_only_longer_requests(monkeypatch, user_cache):
    """MiniLM's (384, 32) ships a 100,000-draw spectral extension table: an ordinary request
    still gets the ordinary table, the sequential extension's ×5 requests get the long one,
    and nothing is generated or cached."""
    ext = [e for e in shipped_data.shipped_index() if e.get("extension")]
    assert {(e["d"], e["d_h"], e["stats"]) for e in ext} == {(384, 32, "spectral")}

    def no_generation(*a, **k):
        raise AssertionError("shipped table not used")

    monkeypatch.setattr(rmtbase.baseline.tables, "cell_table", no_generation)
    assert cache.null_table(384, 32, stats="spectral", min_draws=1000).sizes["draw"] == 4000
    for n in (20_000, 100_000):
        ds = cache.null_table(384, 32, stats="spectral", min_draws=n)
        assert ds.sizes["draw"] == 100_000
    assert not user_cache.exists()


def test_shipped_bands():
    from rmtbase.scoring.score import SPECTRUM_QUANTILES, _drawn_spectrum_band

    band = shipped_data.shipped_band(384, 32, 200, 0, SPECTRUM_QUANTILES)
    assert band.shape == (3, 32) and np.all(np.diff(band, axis=0) >= 0)
    assert shipped_data.shipped_band(384, 32, 201, 0, SPECTRUM_QUANTILES) is None
    assert shipped_data.shipped_band(384, 32, 200, 1, SPECTRUM_QUANTILES) is None
    # the shipped numbers are what the draws give (another CPU's float32 rounding allowed)
    np.testing.assert_allclose(band, _drawn_spectrum_band(384, 32, 200, 0), rtol=1e-5)


def _hand_table():
    attrs = lambda m, p, s: {"sigma_power": p, "scaling": s, "matrix": m,  # noqa: E731
                             "sigma_of": {"q": "sigma_q", "k": "sigma_k",
                                          "qk": "sigma_q*sigma_k"}[m]}
    x = np.linspace(1.0, 2.0, 5).reshape(1, 1, 5)
    ds = xr.Dataset({"lambda_max": (("d", "d_h", "draw"), x, attrs("qk", 2, "power")),
                     "npr": (("d", "d_h", "draw"), x, attrs("qk", 0, "power")),
                     "q_std": (("d", "d_h", "draw"), x, attrs("q", 1, "power")),
                     "k_entropy": (("d", "d_h", "draw"), x, attrs("k", 1, "log"))},
                    coords={"d": [16], "d_h": [4], "draw": np.arange(5)})
    ds.attrs = {"sigma_q": 1.0, "sigma_k": 1.0, "ensemble": "lowrank", "cells": "16x4"}
    return ds


def test_rescale_by_hand():
    ds = _hand_table()
    out = cache.rescale(ds, 3.0, 0.5)
    x = ds["npr"].values
    np.testing.assert_allclose(out["lambda_max"].values, x * 1.5**2, rtol=1e-15)
    # exact: npr is scale-free, so rescale copies it untouched
    np.testing.assert_array_equal(out["npr"].values, x)
    np.testing.assert_allclose(out["q_std"].values, 3 * x, rtol=1e-15)
    np.testing.assert_allclose(out["k_entropy"].values, x + math.log(0.5), rtol=1e-15)
    assert (out.attrs["sigma_q"], out.attrs["sigma_k"]) == (3.0, 0.5)
    refs = json.loads(out.attrs["analytic_reference_values"])["16x4"]
    if "sum_lambda" in refs:
        assert refs["sum_lambda"] == pytest.approx(16**2 * 4 * 1.5**2, rel=1e-12)
    back = cache.rescale(out, 1.0, 1.0)
    np.testing.assert_allclose(back["lambda_max"].values, x, rtol=1e-15)
    with pytest.raises(InputError):
        cache.rescale(ds, 0.0, 1.0)
    with pytest.raises(TableError):
        cache.rescale(ds.drop_attrs(deep=False), 1.0, 2.0)


def test_rescale_equals_direct_generation():
    """σ-rescaled σ = 1 table equals the table generated at σ (same Gaussians times σ), to
    float32 rounding; the analytic references follow."""
    ones = baseline(16, 4, draws=64, seed=4, progress=False)
    direct = baseline(16, 4, draws=64, seed=4, sigma_q=0.3, sigma_k=2.5, progress=False)
    out = cache.rescale(ones, 0.3, 2.5)
    for v in ones.data_vars:
        assert out[v].dtype == np.float32
        # float32 rounding; the shape statistics near 0 (skewness, kurtosis) need an atol
        np.testing.assert_allclose(out[v].values, direct[v].values, rtol=2e-5, atol=2e-5,
                                   err_msg=v)
    assert out.attrs["analytic_reference_values"] == direct.attrs["analytic_reference_values"]


def test_shipped_tables_match_exact_moments():
    """Each shipped table's mean Σλ and Σλ² agree with the exact finite-(d, d_h) moments at
    |z| < 5: E Σλ = d² d_h and E Σλ² = d² d_h [(d+1)(d+d_h+1) + d d_h + 2] at σ = 1."""
    data = resources.files("rmtbase").joinpath("data")
    for e in shipped_data.shipped_index():
        if e["stats"] not in ("all", "spectral"):
            continue
        with resources.as_file(data.joinpath(e["file"])) as path:
            ds = read_table(path)
        d, h = e["d"], e["d_h"]
        for name, exact in (("sum_lambda", d * d * h),
                            ("sum_lambda2", d * d * h * ((d + 1) * (d + h + 1) + d * h + 2))):
            x = ds[name].values.astype(np.float64).ravel()
            z = (x.mean() - exact) / (x.std(ddof=1) / math.sqrt(x.size))
            assert abs(z) < 5, (e["file"], name, z)


def test_shipped_spectral_table_regenerates_from_its_seed():
    """The smallest shipped spectral table is what ``baseline`` makes today from its recorded seed
    (rtol 1e-3 allows another CPU's float32 rounding; a changed sampler gives other draws
    entirely). A sampler change must regenerate the shipped tables and bump the version."""
    entries = [e for e in shipped_data.shipped_index() if e["stats"] == "spectral"]
    e = min(entries, key=lambda e: e["d"] * e["d_h"])
    with resources.as_file(resources.files("rmtbase").joinpath("data", e["file"])) as path:
        shipped = read_table(path)
    again = baseline(e["d"], e["d_h"], draws=e["draws"], seed=e["seed"], stats="spectral",
                     progress=False)
    for v in shipped.data_vars:
        np.testing.assert_allclose(again[v].values, shipped[v].values, rtol=1e-3, err_msg=v)
    assert again.attrs["sampler"] == shipped.attrs["sampler"]
