"""Dask sweeps: the combined table equals the single-process table bit for bit."""

import subprocess
import sys

import pytest
import xarray as xr

from rmtbase.baseline.tables import DRAW_BLOCK, baseline, read_table
from rmtbase.cli import main

pytest.importorskip("distributed")

OPTS = dict(draws=2 * DRAW_BLOCK + 64, seed=7, stats="all")  # the configuration of the other tests: compiled once


def test_import_does_not_need_dask():
    code = "import sys, rmtbase.baseline.sweep; assert 'distributed' not in sys.modules and 'dask' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_dask_clear_error(monkeypatch):
    from rmtbase.baseline.sweep import MissingDependency, sweep

    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(MissingDependency, match="pip install"):
        sweep(8, 2, workers=1, draws=10)


def test_needs_exactly_one_place_to_run():
    from rmtbase.baseline.sweep import sweep
    from rmtbase.errors import InputError

    with pytest.raises(InputError, match="exactly one"):
        sweep(8, 2, draws=10, progress=False)


@pytest.mark.slow
def test_cli_sweep_two_workers_equals_single_process(tmp_path, capsys):
    out = tmp_path / "grid.nc"
    rc = main(["sweep", "--d", "3", "16", "--dh", "4", "--workers", "2", "--blocks-per-task", "2",
               "--draws", str(OPTS["draws"]), "--seed", "7", "--stats", "all", "--no-progress", "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    swept = read_table(out)
    single = baseline([3, 16], 4, progress=False, **OPTS)
    # exact: the same compiled programs (fixed batch width) and keys, in a Dask task on this CPU
    #  instead of this process
    xr.testing.assert_identical(swept.drop_attrs(deep=False).drop_encoding(),
                                single.drop_attrs(deep=False))
    assert swept.attrs["cells"] == single.attrs["cells"] == "16x4"
    assert "Dask tasks" in swept.attrs["history"]


@pytest.mark.slow
def test_sweep_on_an_existing_scheduler_address():
    """The ``--scheduler ADDRESS`` path against a real scheduler (a loopback LocalCluster started
    here): same numbers as one process."""
    import logging

    import distributed

    from rmtbase.baseline.sweep import NO_DASHBOARD, sweep

    opts = dict(draws=DRAW_BLOCK + 10, seed=3, stats="spectral")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=None, silence_logs=logging.ERROR,
                                  scheduler_kwargs=NO_DASHBOARD) as cluster:
        swept = sweep(16, 4, scheduler=cluster.scheduler_address, progress=False, **opts)
    single = baseline(16, 4, progress=False, **opts)
    # exact: the same compiled programs (fixed batch width) and keys, in a Dask task on this CPU
    #  instead of this process
    xr.testing.assert_identical(swept.drop_attrs(deep=False), single.drop_attrs(deep=False))
