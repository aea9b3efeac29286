"""``rmtbase baseline``: make a table, summarise it, one-line errors."""

import json
import subprocess
import sys

import numpy as np
import pytest
import xarray as xr

from rmtbase.baseline.tables import read_table
from rmtbase.cli import main

ARGS = ["baseline", "--d", "16", "--dh", "4", "--draws", "64", "--seed", "7", "--no-progress"]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "t.nc"
    assert main([*ARGS, "--out", str(out)]) == 0
    return out


def test_table_opens_in_plain_xarray(table):
    with xr.open_dataset(table) as ds:
        assert {"npr", "lambda_max", "spectral_entropy", "qk_std", "q_weibull_k"} <= set(
            ds.data_vars)
        assert ds.attrs["seed"] == 7 and ds.attrs["draws"] == 64
        assert ds["npr"].attrs["units"] == "1"


def test_same_seed_same_file_contents(table, tmp_path):
    out = tmp_path / "again.nc"
    assert main([*ARGS, "--out", str(out)]) == 0
    with xr.open_dataset(table) as a, xr.open_dataset(out) as b:
        # exact: the same call twice in one process: same compiled programs, same inputs (two CLI
        #  runs, same seed)
        xr.testing.assert_identical(a.drop_attrs(deep=False), b.drop_attrs(deep=False))


def test_summary_json(table, capsys):
    capsys.readouterr()
    assert main(["baseline", "--summary", str(table), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    for name in ("npr", "spectral_entropy", "condition_number", "lambda_max", "sum_lambda",
                 "sum_lambda2", "stable_rank", "qk_excess_kurtosis"):
        assert {"mean", "std", "q0.1", "q99.9"} <= set(s[name]), name
    with xr.open_dataset(table) as ds:
        x = ds["npr"].values.astype(np.float64).ravel()
    assert s["npr"]["mean"] == pytest.approx(x.mean(), rel=1e-12)
    assert s["npr"]["analytic"] == pytest.approx(1 / (1 + 2 * 4 / 16), rel=1e-12)
    assert s["qk_std"]["analytic"] == pytest.approx(2.0, rel=1e-12)


def test_summary_text_shows_analytic_beside(table, capsys):
    capsys.readouterr()
    assert main(["baseline", "--summary", str(table)]) == 0
    text = capsys.readouterr().out
    assert "analytic" in text.splitlines()[1]
    npr_line = next(line for line in text.splitlines() if line.startswith("npr "))
    assert "0.66667" in npr_line


def test_errors_are_one_line_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.nc"
    bad.write_text("hello")
    cases = [
        (["baseline", "--summary", str(bad)], "bad.nc"),
        (["baseline", "--d", "4", "--dh", "8", "--draws", "10", "--out", str(tmp_path / "x.nc")],
         "d_h must not exceed d"),
        (["baseline", "--d", "8", "--dh", "4", "--sigma", "-2", "--out", str(tmp_path / "x.nc")],
         "--sigma"),
        (["baseline", "--d", "8"], "--dh"),
    ]
    for argv, msg in cases:
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("rmtbase: error:") and msg in err and err.count("\n") == 1, err
    assert not (tmp_path / "x.nc").exists()


def test_entry_point_exit_status(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "rmtbase", "baseline", "--d", "3", "--dh", "5",
                           "--out", str(tmp_path / "y.nc")], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr


@pytest.mark.slow
def test_residual_ensemble_depth_is_part_of_the_key(tmp_path):
    tables = {}
    for depth in ("1", "2"):
        out = tmp_path / f"r{depth}.nc"
        assert main(["baseline", "--d", "16", "--dh", "4", "--ensemble", "residual", "--depth",
                     depth, "--stats", "spectral", "--draws", "8", "--no-progress",
                     "--out", str(out)]) == 0
        tables[depth] = read_table(out)
    assert tables["1"].attrs["depth"] == 1 and tables["1"].attrs["ensemble"] == "residual"
    assert "analytic_reference_values" in tables["1"].attrs
    assert not np.array_equal(tables["1"]["npr"].values, tables["2"]["npr"].values)


_CONSOLE = "import sys; from rmtbase.cli import console_main; sys.exit(console_main())"


@pytest.mark.parametrize("off", [pytest.param(False, marks=pytest.mark.slow), True])
def test_executable_keeps_compiled_programs_in_the_user_cache(tmp_path, off):
    """The ``rmtbase`` executable turns on JAX's persistent compilation cache under
    ``$RMTBASE_CACHE/jax`` (and not with RMTBASE_NO_JIT_CACHE=1); ``main`` alone does not."""
    import os

    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("JAX_COMPILATION_CACHE", "JAX_PERSISTENT_CACHE"))}
    env["RMTBASE_CACHE"] = str(tmp_path / "cache")
    if off:
        env["RMTBASE_NO_JIT_CACHE"] = "1"
    out = subprocess.run([sys.executable, "-c", _CONSOLE, "baseline", "--d", "16", "--dh", "4",
                          "--draws", "20", "--stats", "spectral", "--no-progress",
                          "--out", str(tmp_path / "t.nc")], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    jit_dir = tmp_path / "cache" / "jax"
    assert (jit_dir.is_dir() and any(jit_dir.iterdir())) != off
