"""Every study runs in quick mode into tmp_path and writes its figures and data; the registry
and CLI list them; the Weibull verdict helpers reproduce independent numbers."""

import importlib.util
import math
from pathlib import Path

import mpmath as mp
import pytest

from rmtbase import studies
from rmtbase.cli import main
from rmtbase.errors import InputError


def _check_outputs(result, out):
    assert result["figures"] and result["data"]
    for p in result["figures"] + result["data"]:
        p = Path(p)
        assert p.is_file() and p.stat().st_size > 0 and out in p.parents
    for p in result["figures"]:
        assert Path(p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("name", [pytest.param("random_baselines", marks=pytest.mark.slow),
                                  "product_spectrum",
                                  pytest.param("residual_paths", marks=pytest.mark.slow),
                                  pytest.param("minilm", marks=pytest.mark.slow)])
def test_study_quick(name, tmp_path):
    result = studies.run(name, tmp_path, quick=True, seed=0)
    _check_outputs(result, tmp_path)
    for p in result["data"]:
        if p.endswith(".nc"):
            _check_cf(p, name)


def _check_cf(path, name):
    """A study's netCDF file carries CF attributes like scores.nc (rmtbase.files.cf), read by
    netCDF4's attribute API (not xarray): Conventions, title, history naming the study,
    source, references; long_name and a UDUNITS units on every variable and coordinate."""
    netCDF4 = pytest.importorskip("netCDF4")
    with netCDF4.Dataset(path) as nc:
        glob = {k: nc.getncattr(k) for k in nc.ncattrs()}
        assert glob["Conventions"] == "CF-1.10"
        assert str(glob["title"]).strip() and ".tmp-" not in glob["title"], glob["title"]
        assert f"rmtbase study {name} " in glob["history"], glob["history"]  # who wrote it
        for key in ("source", "references"):
            assert str(glob[key]).strip(), key
        missing = [v for v in nc.variables if not {"long_name", "units"} <= set(nc[v].ncattrs())]
        assert not missing, missing
        assert {nc[v].units for v in nc.variables} <= {"1", "s", "bytes", "byte", "percent"}


@pytest.mark.slow
def test_product_networks_quick(tmp_path):
    """The study's CSVs carry the exact curves of rmtbase.analytic.network_finite; at L = 1 the
    entries are Gaussian (marginal kurtosis 0) and the Monte Carlo agrees within 4 SE."""
    import csv

    from rmtbase.analytic import network_finite as nf

    result = studies.run("product_networks", tmp_path, quick=True, seed=0)
    _check_outputs(result, tmp_path)
    for p in result["data"]:
        if p.endswith(".nc"):
            _check_cf(p, "product_networks")
    folder = tmp_path / "product_networks"
    names = {Path(p).name for p in result["figures"]}
    assert names == {"spectra.png", "moments_vs_depth.png", "kurtosis_vs_depth.png",
                     "residual_stream.png", "lyapunov.png"}
    with open(folder / "kurtosis_vs_depth.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        exact = nf.kurtosis_curve(r["kind"], int(r["d"]), [int(r["depth"])])[0]
        assert float(r["analytic_marginal"]) == pytest.approx(exact, rel=1e-12, abs=1e-15)
        if r["depth"] == "1":
            assert abs(float(r["mc_pooled"])) < 4 * float(r["mc_pooled_se"])
    with open(folder / "residual_stream.csv", encoding="utf-8") as fh:
        stream = list(csv.DictReader(fh))
    assert float(stream[-1]["analytic"]) == pytest.approx(
        float(nf.stream_kurtosis("residual", int(stream[-1]["d"]), int(stream[-1]["depth"]), 1)))


@pytest.mark.slow
def test_weibull_anchor_quick(tmp_path):
    if importlib.util.find_spec("rmtbase.analytic.weibull") is None:
        pytest.skip("rmtbase.analytic.weibull not in this checkout yet")
    result = studies.run("weibull_anchor", tmp_path, quick=True, seed=0)
    _check_outputs(result, tmp_path)
    md = (tmp_path / "weibull_anchor" / "weibull_verdicts.md").read_text()
    assert "| claim |" in md and "6.5" in md
    assert abs(result["summary"]["k0"] - 1.2054343) < 1e-6


def test_registry_and_cli(capsys):
    assert studies.names() == list(studies.STUDIES)
    assert main(["study", "--list"]) == 0
    assert capsys.readouterr().out.split() == studies.names()
    with pytest.raises(InputError):
        studies.get("nope")
    assert main(["study", "nope", "--out", "x"]) == 2


def _anchor_mp(a, b):
    """Seed 002 eq. (1) by mpmath quadrature, independent of the study's Gauss–Legendre code."""
    mp.mp.dps = 20
    g = lambda F: mp.log(mp.sqrt(2) * mp.erfinv(F))  # noqa: E731
    y = lambda F: mp.log(-mp.log(1 - F))  # noqa: E731
    L = b - a
    E = lambda f: mp.quad(f, [a, (a + b) / 2, b]) / L  # noqa: E731
    mg, my = E(g), E(y)
    k = E(lambda F: (g(F) - mg) * (y(F) - my)) / E(lambda F: (g(F) - mg) ** 2)
    return float(k), float(mp.exp(mg - my / k))


@pytest.mark.parametrize("a,b", [(0.1, 0.9), (0.05, 0.95), (0.0, 1.0)])
def test_mixture_anchor_single_component_matches_mpmath(a, b):
    from rmtbase.studies.weibull_anchor import mixture_anchor

    k, lam = mixture_anchor([1.0], [1.0], a, b)
    k_ref, lam_ref = _anchor_mp(mp.mpf(a), mp.mpf(b))
    assert k == pytest.approx(k_ref, abs=2e-7)
    assert lam == pytest.approx(lam_ref, abs=2e-7)


def test_mixture_anchor_is_scale_free_and_weights_matter():
    from rmtbase.studies.weibull_anchor import mixture_anchor

    k1, l1 = mixture_anchor([4, 5], [6 / math.sqrt(10), 1.0])
    k2, l2 = mixture_anchor([4, 5], [12 / math.sqrt(10), 2.0])
    assert k1 == pytest.approx(k2, rel=1e-9) and l2 == pytest.approx(2 * l1, rel=1e-9)
    assert k1 < 1.2054 - 0.03  # a scale mixture lowers k


def test_noise_curve_minimum_and_ratio():
    from rmtbase.studies.weibull_anchor import noise_curve

    mp.mp.dps = 30
    V = lambda p: p / ((1 - p) * mp.log(1 - p) ** 2)  # noqa: E731
    p_star = mp.re(mp.findroot(lambda p: mp.diff(V, p), mp.mpf("0.8")))
    assert float(noise_curve(0.1) / noise_curve(float(p_star))) == pytest.approx(
        float(V(mp.mpf("0.1")) / V(p_star)), rel=1e-12)
    assert float(p_star) == pytest.approx(0.7968121300, abs=1e-9)


def test_verdict_arithmetic_rows_hold():
    from rmtbase.studies import _weibull_verdicts as v

    rows = {r["id"]: r for r in v._arithmetic_rows()}
    assert rows["pythia_scaling"]["holds"] == "yes"
    assert rows["table5_ratios"]["holds"] == "yes"
    md = v.markdown(list(rows.values()), quick=True)
    assert md.count("\n|") == len(rows) + 2


# --- a study's files are written all or nothing -----------------------------------------------

def _old_study_file(tmp_path):
    import numpy as np
    import xarray as xr

    from rmtbase.studies import _output as io

    old = io.write_netcdf(xr.Dataset({"a": ("x", np.arange(3.0))}), tmp_path / "stats.nc")
    return old, old.read_bytes(), xr.Dataset({"a": ("x", np.arange(5.0) + 7)})


def test_study_netcdf_interrupted_mid_write_keeps_the_old_file(tmp_path, monkeypatch):
    """A KeyboardInterrupt raised half-way through the netCDF write: the earlier file is
    intact and no temporary file is left beside it."""
    import xarray as xr

    from rmtbase.studies import _output as io

    old, before, new = _old_study_file(tmp_path)

    def half(self, path, *args, **kwargs):
        Path(path).write_bytes(b"\x89HDF\r\n\x1a\n half a file")
        raise KeyboardInterrupt

    monkeypatch.setattr(xr.Dataset, "to_netcdf", half)
    with pytest.raises(KeyboardInterrupt):
        io.write_netcdf(new, old)
    assert old.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["stats.nc"]


def test_ctrl_c_during_a_study_write_waits_for_the_file(tmp_path, monkeypatch):
    """A real SIGINT arriving inside the write is held until the write ends (files.interrupts
    .deferred), then raised before the rename: the old file stays, nothing else is left."""
    import os
    import signal

    import xarray as xr

    from rmtbase.studies import _output as io

    old, before, new = _old_study_file(tmp_path)
    real = xr.Dataset.to_netcdf
    finished = []

    def interrupted(self, path, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # would raise here without deferred
        real(self, path, *args, **kwargs)
        finished.append(path)

    monkeypatch.setattr(xr.Dataset, "to_netcdf", interrupted)
    with pytest.raises(KeyboardInterrupt):
        io.write_netcdf(new, old)
    assert finished  # the write ran to its end before the interrupt was raised
    assert old.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["stats.nc"]
    monkeypatch.undo()
    io.write_netcdf(new, old)  # and a write that is not interrupted replaces it
    assert xr.load_dataset(old)["a"].values.tolist() == [7.0, 8.0, 9.0, 10.0, 11.0]


@pytest.mark.parametrize("writer", ["csv", "text", "figure"])
def test_study_write_interrupted_before_the_rename(tmp_path, monkeypatch, writer):
    """An interrupt at the last step before the rename (fault point ``file:written``) keeps
    the earlier CSV, text or figure and removes the temporary file."""
    from rmtbase.files import atomic
    from rmtbase.studies import _output as io

    def hook(stage):
        if stage == "file:written":
            raise KeyboardInterrupt

    name = {"csv": "t.csv", "text": "t.md", "figure": "t.png"}[writer]
    target = tmp_path / name
    target.write_bytes(b"earlier output")
    fig, axes = io.figure()
    axes[0, 0].plot([0, 1])
    write = {"csv": lambda: io.write_csv([{"a": 1}], target),
             "text": lambda: io.write_text("new\n", target),
             "figure": lambda: io.save_figure(fig, target)}[writer]
    monkeypatch.setattr(atomic, "fault_point", hook)
    with pytest.raises(KeyboardInterrupt):
        write()
    assert target.read_bytes() == b"earlier output"
    assert [p.name for p in tmp_path.iterdir()] == [name]
    monkeypatch.undo()
    write()
    assert target.read_bytes() != b"earlier output"
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_stale_temporary_file_of_a_killed_study_write_is_removed(tmp_path):
    import subprocess
    import sys

    from rmtbase.studies import _output as io

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    (tmp_path / f".t.csv.{dead}-0123abcd.tmp").write_text("half")
    io.write_csv([{"a": 1}], tmp_path / "t.csv")
    assert [p.name for p in tmp_path.iterdir()] == ["t.csv"]
