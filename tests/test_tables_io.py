"""Table files: atomic writes, clear errors on foreign/truncated files, summaries.

These tests build small tables by hand (no Monte Carlo), so they check the file layer alone.
"""

import json
import os
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from rmtbase.baseline.tables import QUANTILES, TABLE_FORMAT, read_table, summary, write_table
from rmtbase.errors import InputError, TableError


def _table(draws=50, seed=0):
    rng = np.random.default_rng(seed)
    attrs = {"long_name": "normalised participation ratio", "units": "1", "definition": "PR/d_h",
             "sigma_power": 0, "scaling": "power", "matrix": "qk", "sigma_of": "sigma_q*sigma_k"}
    ds = xr.Dataset(
        {"npr": (("d", "d_h", "draw"), rng.uniform(0.5, 0.9, (1, 1, draws)), attrs)},
        coords={"d": [16], "d_h": [4], "draw": np.arange(draws)},
    )
    ds.attrs = {"rmtbase_table_format": TABLE_FORMAT, "draws": draws, "sigma_q": 1.0,
                "sigma_k": 1.0, "ensemble": "lowrank", "cells": "16x4",
                "analytic_reference_values": json.dumps({"16x4": {"npr": 2 / 3}})}
    return ds


def test_roundtrip_plain_xarray(tmp_path):
    ds = _table()
    path = write_table(ds, tmp_path / "t.nc")
    with xr.open_dataset(path) as plain:  # any xarray user can open it
        # exact: a file round trip of these arrays (lossless), or one read of one file
        np.testing.assert_array_equal(plain["npr"].values, ds["npr"].values)
        assert plain["npr"].attrs["long_name"] == "normalised participation ratio"
        assert plain.attrs["rmtbase_table_format"] == TABLE_FORMAT
    back = read_table(path)
    # exact: a file round trip of these arrays (lossless), or one read of one file
    xr.testing.assert_identical(back.drop_encoding(), ds)
    assert [p.name for p in tmp_path.iterdir()] == ["t.nc"]  # no temporary file left


def test_foreign_files_raise_table_error_naming_file(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a table\n")
    with pytest.raises(TableError, match="notes.txt"):
        read_table(text)
    with pytest.raises(TableError, match="missing.nc"):
        read_table(tmp_path / "missing.nc")
    foreign = tmp_path / "foreign.nc"
    xr.Dataset({"x": ("t", np.arange(3.0))}).to_netcdf(foreign, engine="netcdf4")
    with pytest.raises(TableError, match="foreign.nc is not an rmtbase table"):
        read_table(foreign)


def test_truncated_file_raises_table_error(tmp_path):
    path = write_table(_table(draws=2000), tmp_path / "t.nc")
    data = path.read_bytes()
    cut = tmp_path / "cut.nc"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(TableError, match="cut.nc") as info:
        read_table(cut)
    assert "\n" not in str(info.value)


def test_newer_format_refused(tmp_path):
    ds = _table()
    ds.attrs["rmtbase_table_format"] = TABLE_FORMAT + 1
    path = tmp_path / "new.nc"
    ds.to_netcdf(path, engine="netcdf4")
    with pytest.raises(TableError, match="format"):
        read_table(path)


@pytest.mark.parametrize("exc", [RuntimeError("disk on fire"), KeyboardInterrupt()])
def test_failed_write_keeps_good_file(tmp_path, monkeypatch, exc):
    good = write_table(_table(seed=1), tmp_path / "t.nc")
    before = good.read_bytes()
    ds = _table(seed=2)

    def boom(self, path, **kw):
        with open(path, "wb") as f:  # leave a half-written temporary file behind
            f.write(b"\x89HDF\r\n")
        raise exc

    monkeypatch.setattr(xr.Dataset, "to_netcdf", boom)
    # netCDF reports a full disk as RuntimeError("NetCDF: HDF error"): a one-line TableError
    with pytest.raises(TableError if isinstance(exc, RuntimeError) else type(exc)):
        write_table(ds, good)
    assert good.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["t.nc"]


def test_write_refuses_missing_directory(tmp_path):
    with pytest.raises(TableError, match="cannot write"):
        write_table(_table(), tmp_path / "nope" / "t.nc")


def test_summary_values_against_numpy():
    ds = _table(draws=101)
    x = ds["npr"].values.ravel()
    s = summary(ds)["npr"]
    assert s["n"] == 101
    assert s["mean"] == pytest.approx(np.mean(x), rel=1e-15)
    assert s["std"] == pytest.approx(np.std(x, ddof=1), rel=1e-15)
    # with 101 draws the 5 % and 50 % quantiles are order statistics 5 and 50
    xs = np.sort(x)
    assert s["q50"] == xs[50] and s["q5"] == xs[5]
    assert {f"q{q:g}" for q in QUANTILES} <= set(s)
    assert s["analytic"] == pytest.approx(2 / 3)


def test_summary_of_grid_needs_a_cell():
    ds = xr.concat([_table(), _table().assign_coords(d_h=[8])], dim="d_h")
    ds.attrs = _table().attrs
    with pytest.raises(InputError, match="16x4, 16x8"):
        summary(ds)
    assert summary(ds, 16, 8)["npr"]["n"] == 50
    assert "analytic" not in summary(ds, 16, 8)["npr"]


def test_permissions_follow_umask(tmp_path):
    path = write_table(_table(), tmp_path / "t.nc")
    umask = os.umask(0)
    os.umask(umask)
    assert (path.stat().st_mode & 0o777) == (0o666 & ~umask)


def test_baseline_checks_out_path_before_computing(tmp_path, monkeypatch):
    import rmtbase.baseline.tables

    def no_compute(*a, **k):
        raise AssertionError("computed before checking the output path")

    monkeypatch.setattr(rmtbase.baseline.tables, "run_cells", no_compute)
    with pytest.raises(TableError, match="nope"):
        rmtbase.baseline.tables.baseline(16, 4, draws=64, out=tmp_path / "nope" / "t.nc", progress=False)


def test_netcdf_writer_is_xarrays_file_without_its_scheduler_search(tmp_path):
    """``files.atomic.to_netcdf`` writes the bytes ``Dataset.to_netcdf`` writes, without the
    dask.distributed import xarray's scheduler search makes (a fresh process: distributed
    stays unimported), xarray's own search restored after; a chunked Dataset goes to xarray
    untouched."""
    import subprocess
    import sys

    code = """
import sys
import numpy as np, xarray as xr
from xarray.backends import locks, writers
from rmtbase.files.atomic import to_netcdf
ds = xr.Dataset({"x": (("a", "b"), np.arange(12.0).reshape(3, 4))}, coords={"a": [1, 2, 3]},
                attrs={"t": "u"})
before = locks.get_dask_scheduler, writers.get_dask_scheduler
to_netcdf(ds, sys.argv[1])
print("distributed" in sys.modules, (locks.get_dask_scheduler, writers.get_dask_scheduler) == before)
ds.to_netcdf(sys.argv[2])
to_netcdf(ds.chunk({"a": 1}), sys.argv[3])
"""
    paths = [str(tmp_path / f"{k}.nc") for k in ("ours", "xarray", "chunked")]
    out = subprocess.run([sys.executable, "-c", code, *paths], capture_output=True, text=True,
                         timeout=300, check=True).stdout.split()
    assert out == ["False", "True"], out
    assert Path(paths[0]).read_bytes() == Path(paths[1]).read_bytes()  # exact: the same file, byte for byte
    with xr.open_dataset(paths[2]) as back:
        # exact: float64 written and read back, no arithmetic
        np.testing.assert_array_equal(back["x"].values, np.arange(12.0).reshape(3, 4))
