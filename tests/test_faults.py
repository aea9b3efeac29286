"""Fault injection against the CLI and the table writer: hostile or impossible output
targets, full and read-only file systems, kills and interrupts at every write stage, poisoned
cache entries, extreme σ, memory limits and tracebacks that used to escape.

Every CLI error path checks the same contract (:func:`refused`): exit status 2, exactly one
line on stderr starting ``rmtbase: error:``, no traceback, and — where the case is about
validating early — no Monte Carlo draw at all (``run_cells`` is replaced by a function that
fails the test). Resumable runs, chunk sizes and progress are in ``tests/test_resume.py``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import rmtbase.baseline.tables as tables
from rmtbase.baseline import table_file
from rmtbase.baseline.table_file import read_table, write_table
from rmtbase.cli import main
from rmtbase.errors import InputError, TableError

SRC = str(Path(__file__).resolve().parents[1] / "src")
D, DH = 768, 64  # the spectral draws of tests/test_resume.py: compiled once per process
CD, CDH = 64, 8  # a cell no table is shipped for (cache tests)
SMALL = ["baseline", "--d", str(D), "--dh", str(DH), "--draws", "10", "--stats", "spectral",
         "--no-progress"]


def refused(capsys, argv, *needles) -> str:
    """Run the CLI in-process; assert exit 2 with one ``rmtbase: error:`` line naming every
    needle, and no traceback. Returns the message."""
    capsys.readouterr()
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == 2, (argv, err)
    assert err.startswith("rmtbase: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for n in needles:
        assert n in err, (n, err)
    return err


@pytest.fixture
def no_draws(monkeypatch):
    """Any Monte Carlo in this test is a failure: outputs must be validated first."""
    def fail(*a, **k):
        raise AssertionError("drew Monte Carlo samples before refusing")

    monkeypatch.setattr(tables, "run_cells", fail)
    monkeypatch.setattr(tables, "generate_blocks", fail)


def _table(path: Path, seed: int = 1) -> Path:
    """A real small table written through the library."""
    tables.baseline(D, DH, draws=10, seed=seed, stats="spectral", progress=False, out=path)
    return path


@contextlib.contextmanager
def tmpfs(where: Path, *opts: str):
    """A tmpfs mounted at ``where`` (skip when this process may not mount)."""
    where.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(opts or ("size=1m",)), "tmpfs",
                        str(where)], capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {r.stderr.strip()[:80]}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


# --- output targets that are not plain files --------------------------------------------------

def test_device_node_target_is_refused_and_kept(tmp_path, capsys, no_draws):
    node = tmp_path / "x"
    try:
        os.mknod(node, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # like /dev/null
    except PermissionError:
        pytest.skip("mknod needs root (CAP_MKNOD)")
    refused(capsys, [*SMALL, "--out", node], "not a regular file")
    assert stat.S_ISCHR(node.lstat().st_mode)


def test_fifo_socket_and_folder_targets_are_refused(tmp_path, capsys, no_draws):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    refused(capsys, [*SMALL, "--out", fifo], "not a regular file")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    refused(capsys, [*SMALL, "--out", tmp_path], "directory")
    refused(capsys, ["sweep", "--d", "16", "--dh", "4", "--workers", "1", "--out", fifo],
            "not a regular file")  # before any Dask cluster starts


def test_foreign_file_is_refused_earlier_table_replaced(tmp_path, capsys, no_draws):
    notes = tmp_path / "notes.nc"
    notes.write_text("my notes")
    refused(capsys, [*SMALL, "--out", notes], "not an rmtbase table")
    assert notes.read_text() == "my notes"


def test_earlier_table_is_replaced_through_a_link(tmp_path, capsys):
    real = _table(tmp_path / "real.nc", seed=1)
    link = tmp_path / "link.nc"
    link.symlink_to(real)
    assert main([*SMALL, "--seed", "2", "--out", str(link)]) == 0
    assert link.is_symlink() and read_table(real).attrs["seed"] == 2


def test_name_lengths(tmp_path, capsys, no_draws):
    """A legal 248-byte name is accepted (its temporary name is shortened to fit); a name over
    the file system's limit is refused before any draw."""
    refused(capsys, [*SMALL, "--out", tmp_path / ("n" * 256 + ".nc")], "bytes")
    path = table_file.check_output_file(tmp_path / ("n" * 245 + ".nc"))
    assert len(path.name) == 248
    tmp = table_file.tmp_name(path.name)
    assert len(os.fsencode(tmp)) <= 255 and tmp.endswith(".tmp")


def test_248_byte_name_is_written(tmp_path):
    path = tmp_path / ("n" * 245 + ".nc")
    _table(path)
    assert read_table(path).attrs["draws"] == 10
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_missing_folder_and_grid_without_out(tmp_path, capsys, no_draws):
    refused(capsys, [*SMALL, "--out", tmp_path / "nope" / "t.nc"], "not an existing directory")
    refused(capsys, ["baseline", "--d", "768", "1024", "--dh", "64", "--draws", "10"],
            "needs --out")


# --- file systems that do not take the table ---------------------------------------------------

def test_read_only_file_system_refused_up_front(tmp_path, capsys, no_draws):
    with tmpfs(tmp_path / "ro", "ro", "size=1m") as ro:
        refused(capsys, [*SMALL, "--out", ro / "t.nc"], "read-only")


def test_full_file_system_refused_up_front(tmp_path, capsys, no_draws):
    with tmpfs(tmp_path / "tiny", "size=64k") as tiny:
        refused(capsys, ["baseline", "--d", "16", "--dh", "4", "--draws", "20000",
                         "--stats", "spectral", "--out", tiny / "t.nc"], "needs about", "free")
        assert list(tiny.iterdir()) == []


def test_disk_filling_during_the_write(tmp_path, monkeypatch):
    """The space check passes (as when another process fills the disk meanwhile): the real
    ENOSPC from HDF5 is one TableError, the old table stays, no temporary file is left."""
    ds = read_table(_table(tmp_path / "src.nc"))
    n, rng = 40000, np.random.default_rng(0)  # random numbers: ~1.7 MB even compressed
    big = xr.Dataset({v: (("d", "d_h", "draw"), rng.random((1, 1, n)), ds[v].attrs)
                      for v in ds.data_vars},
                     coords={"d": ds["d"].values, "d_h": ds["d_h"].values, "draw": np.arange(n)},
                     attrs=dict(ds.attrs, draws=n))
    monkeypatch.setattr(table_file, "_free_bytes", lambda parent: 2**40)
    with tmpfs(tmp_path / "tiny", "size=64k") as tiny:
        with pytest.raises(TableError, match="cannot write"):
            write_table(big, tiny / "t.nc")
        assert list(tiny.iterdir()) == []


@pytest.mark.parametrize("exc", [OSError(errno.ENOSPC, "No space left on device"),
                                 RuntimeError("NetCDF: HDF error")])
def test_simulated_enospc_is_one_line_and_keeps_the_old_table(tmp_path, capsys, monkeypatch,
                                                                exc):
    out = _table(tmp_path / "t.nc", seed=1)
    before = out.read_bytes()

    def full(self, path, **kw):
        Path(path).write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 100)
        raise exc

    monkeypatch.setattr(xr.Dataset, "to_netcdf", full)
    refused(capsys, [*SMALL, "--seed", "2", "--out", out], "cannot write", "free")
    assert out.read_bytes() == before
    # no temporary file; the completed blocks are kept for the rerun once there is room
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names[-1] == "t.nc" and [n.split("-")[0] for n in names[:-1]] == [".t.nc.partial"]
    monkeypatch.undo()
    assert main([*SMALL, "--seed", "2", "--out", str(out)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.nc"]
    assert read_table(out).attrs["seed"] == 2


# --- kills and interrupts at every write stage ------------------------------------------------

_WRITE = """
import sys
from rmtbase.baseline.table_file import read_table, write_table
write_table(read_table(sys.argv[1]), sys.argv[2])
"""
STAGES = ("write:created", "write:data", "write:verified", "write:replaced")


@pytest.mark.parametrize("stage", STAGES)
def test_sigkill_at_each_write_stage(tmp_path, stage):
    """A process killed anywhere in a write leaves the old table or the new one, whole; the
    next write to the same target removes the dead run's temporary file."""
    old = _table(tmp_path / "t.nc", seed=1)
    new = _table(tmp_path / "new.nc", seed=2)
    before = old.read_bytes()
    env = dict(os.environ, RMTBASE_FAULT=f"{stage}:KILL", PYTHONPATH=SRC)
    r = subprocess.run([sys.executable, "-c", _WRITE, str(new), str(old)], env=env,
                       capture_output=True, timeout=120)
    assert r.returncode == -signal.SIGKILL, r.stderr[-500:]
    seed = read_table(old).attrs["seed"]  # always a whole table
    assert seed == (2 if stage == "write:replaced" else 1)
    if seed == 1:
        assert old.read_bytes() == before
    write_table(read_table(new), old)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.nc", "t.nc"]


@pytest.mark.parametrize("stage", STAGES[:3])
def test_interrupt_at_each_write_stage(tmp_path, monkeypatch, stage):
    old = _table(tmp_path / "t.nc", seed=1)
    before = old.read_bytes()
    ds = read_table(_table(tmp_path / "new.nc", seed=2))

    def hook(where):
        if where == stage:
            raise KeyboardInterrupt

    monkeypatch.setattr(table_file, "fault_point", hook)
    with pytest.raises(KeyboardInterrupt):
        write_table(ds, old)
    assert old.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.nc", "t.nc"]


def test_stale_temporary_files_are_removed(tmp_path):
    out = tmp_path / "t.nc"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    stale = tmp_path / f".t.nc.{dead}-0123abcd.tmp"
    live = tmp_path / f".t.nc.{os.getpid()}-0123abcd.tmp"  # a run still writing: kept
    old_style = tmp_path / ".t.nc.k2j4h5g6.tmp"  # mkstemp name of rmtbase 0.2, an hour old
    fresh_old_style = tmp_path / ".t.nc.a1b2c3d4.tmp"
    other = tmp_path / f".u.nc.{dead}-0123abcd.tmp"  # another target's: not ours to remove
    for p in (stale, live, old_style, fresh_old_style, other):
        p.write_bytes(b"\x89HDF")
    hour_ago = time.time() - 2 * 3600
    os.utime(old_style, (hour_ago, hour_ago))
    _table(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [out.name, live.name, fresh_old_style.name, other.name])


# --- poisoned cache entries and links that point elsewhere ------------------------------------

def test_cache_link_to_an_outside_file_is_not_followed(tmp_path, monkeypatch):
    """A table name in the cache that is a symbolic link to some other file: the table is
    regenerated and replaces the link; the file it pointed to is untouched."""
    from rmtbase.baseline import cache

    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me")
    name = cache.table_filename(CD, CDH, ensemble="lowrank", stats="spectral", draws=10, seed=0,
                                dtype="float32")
    (tmp_path / "cache" / name).symlink_to(outside)
    with pytest.warns(RuntimeWarning, match="ignoring cached table"):
        ds = cache.null_table(CD, CDH, stats="spectral", min_draws=10)
    assert ds.sizes["draw"] == 10 and outside.read_text() == "keep me"
    assert not (tmp_path / "cache" / name).is_symlink()
    assert read_table(tmp_path / "cache" / name).attrs["seed"] == 0


def test_cache_entry_that_is_a_fifo_does_not_hang(tmp_path, monkeypatch):
    from rmtbase.baseline import cache

    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path))
    name = cache.table_filename(CD, CDH, ensemble="lowrank", stats="spectral", draws=10, seed=0,
                                dtype="float32")
    os.mkfifo(tmp_path / name)
    with pytest.warns(RuntimeWarning) as record:
        ds = cache.null_table(CD, CDH, stats="spectral", min_draws=10)
    assert ds.sizes["draw"] == 10
    assert any("could not cache" in str(w.message) for w in record)
    assert stat.S_ISFIFO((tmp_path / name).lstat().st_mode)


def test_cache_entry_with_other_contents_is_regenerated(tmp_path, monkeypatch):
    """(Issue item 6, fixed elsewhere; kept here so it stays fixed.)"""
    from rmtbase.baseline import cache

    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path))
    name = cache.table_filename(CD, CDH, ensemble="lowrank", stats="spectral", draws=10, seed=0,
                                dtype="float32")
    tables.baseline(CD, CDH, draws=10, seed=5, stats="spectral", progress=False,
                    out=tmp_path / name)  # a real table, but of seed 5
    with pytest.warns(RuntimeWarning, match="seed"):
        ds = cache.null_table(CD, CDH, stats="spectral", min_draws=10)
    assert ds.attrs["seed"] == 0 and read_table(tmp_path / name).attrs["seed"] == 0


# --- extreme σ, memory, array size -------------------------------------------------------------

@pytest.mark.parametrize("sigma", ["1e-30", "1e15"])
def test_extreme_sigma_is_refused_before_drawing(tmp_path, capsys, no_draws, sigma):
    out = tmp_path / "t.nc"
    # beyond the bounds every σ option has (rmtbase.limits.SIGMA_RANGE), refused on parsing
    refused(capsys, [*SMALL, "--sigma", sigma, "--out", out], "--sigma must be in")
    assert not out.exists()


def test_out_of_range_draws_are_never_written():
    """The check on the draws themselves (behind the up-front one): a value that would become
    infinite or zero in the table's dtype is refused, not stored."""
    from rmtbase.baseline.sigma_range import scale_draws

    draws = {"qk.lambda_max": np.array([1.0, 2.0], np.float32),
             "qk.npr": np.array([0.5, 0.6], np.float32),
             "q.entropy": np.array([1.4, -0.2], np.float32)}
    with pytest.raises(InputError, match="lambda_max"):
        scale_draws(draws, 1e12, 1e12, "float32")
    with pytest.raises(InputError, match="lambda_max"):
        scale_draws(draws, 1e-12, 1e-12, "float32")
    ok = scale_draws(draws, 1e12, 1e12, "float64")
    assert np.all(np.isfinite(ok["qk.lambda_max"])) and ok["qk.npr"][0] == np.float64(0.5)
    assert ok["q.entropy"][0] == np.float64(np.float32(1.4)) + np.log(1e12)  # log rule, float64
    assert scale_draws(draws, 1.0, 1.0, "float32") is draws  # σ = 1: exactly as sampled


def test_sigma_tables_are_the_sigma_one_table_rescaled_exactly():
    """A table at σ is the σ = 1 draws times σ^p in float64, rounded once (bit for bit)."""
    from rmtbase.stats import STAT_INFO

    one = tables.baseline(D, DH, draws=10, seed=3, stats="spectral", progress=False)
    at = tables.baseline(D, DH, draws=10, seed=3, stats="spectral", sigma_q=0.02, sigma_k=3.0,
                         progress=False)
    for v in one.data_vars:
        stat = one[v].attrs["statistic"]  # "lambda": the stored spectrum, λ ∝ (σ_Qσ_K)²
        p = STAT_INFO[stat]["sigma_power"] if stat in STAT_INFO else one[v].attrs["sigma_power"]
        r = {"q": 0.02, "k": 3.0, "qk": 0.06}[one[v].attrs["matrix"]]
        want = (one[v].values.astype(np.float64) * r**p).astype(np.float32)
        # exact: the same sigma = 1 draws (one program), times sigma^p in float64, rounded once, in
        #  numpy on both sides
        np.testing.assert_array_equal(at[v].values, want, err_msg=v)


def test_rescale_refuses_what_the_dtype_cannot_hold():
    from rmtbase.baseline import rescale

    one = tables.baseline(D, DH, draws=10, seed=3, stats="spectral", progress=False)
    with pytest.raises(InputError, match="float32 range"):
        rescale(one, 1e9, 1e9)  # within SIGMA_RANGE, but λ ∝ σ⁴ overflows float32
    with pytest.raises(InputError, match=r"must be in \[1e-10, 1e\+10\]"):
        rescale(one, 1e15, 1e15)


def test_memory_per_draw_is_refused_up_front(capsys, monkeypatch, no_draws):
    monkeypatch.setenv("RMTBASE_MEMORY_LIMIT", "64M")
    refused(capsys, ["baseline", "--d", "4096", "--dh", "64", "--draws", "2", "--stats",
                     "elementwise"], "needs about", "64 MiB", "RMTBASE_MEMORY_LIMIT")
    monkeypatch.setenv("RMTBASE_MEMORY_LIMIT", "lots")
    refused(capsys, [*SMALL], "RMTBASE_MEMORY_LIMIT")
    monkeypatch.delenv("RMTBASE_MEMORY_LIMIT")
    refused(capsys, ["baseline", "--d", "200000", "--dh", "64", "--draws", "2"], "d <= 46340")


def test_null_draws_itself_refuses_a_draw_that_cannot_fit(monkeypatch):
    import jax

    from rmtbase.baseline.null import null_draws

    monkeypatch.setenv("RMTBASE_MEMORY_LIMIT", "16M")
    with pytest.raises(InputError, match="needs about"):
        null_draws(jax.random.key(0), 2048, 64, 2, stats="elementwise")


# --- tracebacks that used to escape -----------------------------------------------------------

def test_study_out_onto_a_file(tmp_path, capsys):
    f = tmp_path / "afile"
    f.write_text("x")
    refused(capsys, ["study", "weibull_anchor", "--quick", "--out", f], "not a folder")
    foreign = tmp_path / "out" / "weibull_anchor"
    foreign.mkdir(parents=True)
    (foreign / "mine.txt").write_text("x")
    refused(capsys, ["study", "weibull_anchor", "--quick", "--out", tmp_path / "out"],
            "not empty")


def test_sweep_scheduler_that_is_not_an_address(tmp_path, capsys):
    pytest.importorskip("distributed")
    refused(capsys, ["sweep", "--d", "16", "--dh", "4", "--draws", "10", "--scheduler",
                     "not a url", "--out", tmp_path / "t.nc"], "Dask scheduler address")
    _table(tmp_path / "after.nc")  # no client left behind to break a later write


def _poison_attr(path: Path, name: str, value) -> None:
    import netCDF4

    with netCDF4.Dataset(path, "a") as nc:
        nc.setncattr(name, value)


@pytest.mark.parametrize("attr,value,needle", [
    ("rmtbase_table_format", "one", "not integers"),
    ("draws", "many", "not integers"),
    ("analytic_reference_values", "{not json", "analytic_reference_values"),
    ("analytic_reference_values", "[1, 2]", "analytic_reference_values"),
])
def test_summary_of_malformed_attributes(tmp_path, capsys, attr, value, needle):
    path = _table(tmp_path / "t.nc")
    _poison_attr(path, attr, value)
    refused(capsys, ["baseline", "--summary", path], needle)


def test_summary_refuses_options_it_would_ignore(tmp_path, capsys):
    path = _table(tmp_path / "t.nc")
    refused(capsys, ["baseline", "--summary", path, "--draws", "5", "--out", tmp_path / "o.nc"],
            "--draws", "--out")
    assert not (tmp_path / "o.nc").exists()
    assert main(["baseline", "--summary", str(path), "--json"]) == 0


def test_closed_stdout_ends_quietly():
    """``rmtbase … | head -1``: the reader goes away; exit 141 and nothing on stderr."""
    env = dict(os.environ, PYTHONPATH=SRC, RMTBASE_NO_JIT_CACHE="1")
    p = subprocess.Popen([sys.executable, "-m", "rmtbase", "study", "--list"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # before the child writes anything
    _, err = p.communicate(timeout=120)
    assert p.returncode == 141, err
    assert err == b"", err


# --- undefined statistics, sizes before work, tracebacks, small --------------------------------

@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory):
    """A random-init GPT-2 (d = 64, 4 heads of d_h = 16, 2 layers) saved once."""
    from _checkpoints import gpt2

    return gpt2(tmp_path_factory.mktemp("gpt2") / "m")


@pytest.mark.slow
def test_q4_0_null_without_finite_weibull_draws_is_scored(tmp_path, capsys, monkeypatch,
                                                            tiny_gpt2):
    """The Q4_0 null has (almost) no finite Weibull draws (exact zeros among the fitted ranks):
    those statistics are left out and reported, the run ends 0, and the cache entry (which
    holds all-NaN columns) is accepted on the next run instead of regenerated."""
    import json
    import warnings

    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "cache"))
    argv = ["score", str(tiny_gpt2), "--quantized-null", "q4_0", "--draws", "200",
            "--no-figures", "--quiet", "--top", "1"]
    assert main([*argv, "--out", str(tmp_path / "a")]) == 0, capsys.readouterr().err
    ds = xr.open_dataset(tmp_path / "a" / "scores.nc")
    nan = json.loads(ds.attrs["nan_tests"])
    undefined = ds.attrs["undefined_under_null"].split(",")
    assert "q.weibull_k" in undefined and "q.weibull_k" in nan
    assert "undefined under the q4_0 null" in nan["q.weibull_k"]["reason"]
    assert "q.weibull_k" not in ds["stat"].values
    assert np.isfinite(ds["head_p_value"].values).all()
    assert "undefined under the q4_0 null" in (tmp_path / "a" / "summary.txt").read_text()
    cached = sorted((tmp_path / "cache").glob("*q4_0*.nc"))
    mtimes = [p.stat().st_mtime_ns for p in cached]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "ignoring cached table" would fail here
        assert main([*argv, "--out", str(tmp_path / "b")]) == 0
    assert [p.stat().st_mtime_ns for p in cached] == mtimes


def test_all_nan_weibull_columns_of_a_block_null_pass_verification(tmp_path):
    from rmtbase.baseline import cache

    ds = tables.baseline(CD, CDH, draws=10, seed=0, stats="elementwise", progress=False)
    entry = dict(d=CD, d_h=CDH, draws=10, seed=0, stats="elementwise", ensemble="lowrank",
                 dtype="float32", storage="q4_0")
    bad = ds.copy()
    bad.attrs["storage_dtype"] = "q4_0"
    bad["q_weibull_k"] = bad["q_weibull_k"] * np.nan
    cache.verify_table(bad, entry, tmp_path / "x.nc")  # undefined under Q4_0: accepted
    bad["q_excess_kurtosis"] = bad["q_excess_kurtosis"] * np.nan
    with pytest.raises(TableError, match="no finite draw"):
        cache.verify_table(bad, entry, tmp_path / "x.nc")
    float_entry = dict(entry, storage="float32")
    nan_float = ds.copy()
    nan_float["q_weibull_k"] = nan_float["q_weibull_k"] * np.nan
    with pytest.raises(TableError, match="no finite draw"):
        cache.verify_table(nan_float, float_entry, tmp_path / "x.nc")


def test_undefined_under_null_picks_mostly_nan_statistics():
    from rmtbase.scoring.nulls.checks import undefined_under_null

    n = 100
    joint = {"a": np.ones(n), "b": np.r_[np.ones(7), np.full(n - 7, np.nan)],
             "c": np.full(n, np.nan), "d": np.r_[np.ones(90), np.full(10, np.nan)]}
    assert undefined_under_null(joint, ["a", "b", "c", "d"]) == {"b": (7, n), "c": (0, n)}


@pytest.mark.bad_json_input  # a config.json with NaN or infinities: the refusal's input
@pytest.mark.parametrize("key,value", [("n_embd", "NaN"), ("n_layer", "Infinity"),
                                       ("n_head", "-Infinity")])
def test_non_finite_config_numbers(tmp_path, capsys, tiny_gpt2, key, value):
    from _checkpoints import copy_folder

    folder = copy_folder(tiny_gpt2, tmp_path / "m")
    cfg = (folder / "config.json").read_text()
    import json

    doc = json.loads(cfg)
    doc[key] = 0
    (folder / "config.json").write_text(json.dumps(doc).replace(f'"{key}": 0',
                                                                f'"{key}": {value}'))
    refused(capsys, ["score", folder, "--out", tmp_path / "o", "--quiet"], key,
            "not a positive integer")


def _scores_copy(tmp_path, src: Path, **attrs) -> Path:
    import netCDF4

    dst = tmp_path / "s.nc"
    dst.write_bytes(src.read_bytes())
    with netCDF4.Dataset(dst, "a") as nc:
        for k, v in attrs.items():
            nc.setncattr(k, v)
    return dst


@pytest.fixture(scope="module")
def scored(tmp_path_factory, tiny_gpt2):
    """scores.nc of the tiny GPT-2 (spectral statistics)."""
    out = tmp_path_factory.mktemp("scored") / "o"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RMTBASE_CACHE", str(tmp_path_factory.mktemp("cache")))
        assert main(["score", str(tiny_gpt2), "--stats", "spectral", "--no-figures",
                     "--quiet", "--out", str(out)]) == 0
    return out / "scores.nc"


@pytest.mark.parametrize("attrs,needle", [({"d": "abc"}, "d='abc'"),
                                          ({"d_h": "2.5"}, "d_h"),
                                          ({"d": 10**9}, "d must be at most"),
                                          ({"d_h": 8}, "16 eigenvalues")])
def test_compare_of_malformed_shape_attributes(tmp_path, capsys, scored, monkeypatch, no_draws,
                                               attrs, needle):
    """A crafted scores.nc: a shape that is not integers, or not the one the file was scored
    at, is refused before any null table is drawn (d = 10⁹ used to build and cache one)."""
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "cache"))
    src = _scores_copy(tmp_path, scored, **attrs)
    refused(capsys, ["compare", src, "--out", tmp_path / "c", "--no-figures"], needle)
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("gain", ["1e-300", "1e300"])
def test_product_network_at_extreme_gains(capsys, gain):
    refused(capsys, ["product-network", "--kind", "residual", "--depth", "3", "--gain", gain],
            "--gain must be in")  # rmtbase.limits.GAIN_RANGE, on parsing


@pytest.mark.parametrize("kind,gain,needle", [("residual", "1e300", "float64"),
                                              ("ginibre", "1e-300", "float64"),
                                              ("ginibre", "1e300", "float64")])
def test_network_sweep_refuses_gains_beyond_float64(tmp_path, capsys, no_draws, kind, gain,
                                                    needle):
    pytest.importorskip("distributed")
    out = tmp_path / "t.nc"
    refused(capsys, ["sweep", "--network", kind, "--d", "8", "--depth", "2", "--gain", gain,
                     "--draws", "4", "--workers", "1", "--out", out], "--gain must be in")
    assert not out.exists()
    with pytest.raises(InputError, match="gain must be in"):  # rmtbase.limits.GAIN_RANGE
        from rmtbase.baseline.network_tables import network_table

        network_table(8, 2, float(gain), kind=kind, draws=4, progress=False)


def test_sizes_are_checked_before_any_work(tmp_path, capsys, monkeypatch, no_draws, tiny_gpt2):
    """Every entry point refuses what cannot fit before drawing (or reading weights, or
    starting a Dask cluster): a 10¹²-draw null table, 10¹¹ component draws, a residual network
    at d = 10⁵ (80 GB matrices), a 10¹²-draw head table."""
    from rmtbase.baseline import matrix_null
    from rmtbase.models import loading

    def no_weights(*a, **k):
        raise AssertionError("read weights before refusing")

    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(matrix_null, "matrix_null_draws", no_weights)
    monkeypatch.setattr(loading, "load_heads", no_weights, raising=False)
    import rmtbase.models as models

    monkeypatch.setattr(models, "load_heads", no_weights)
    refused(capsys, ["score", tiny_gpt2, "--draws", "1000000000000", "--quiet",
                     "--out", tmp_path / "o"], "draws", "at most")  # the bound, on parsing
    refused(capsys, ["score", tiny_gpt2, "--null", "permutation", "--draws", "1000000000000",
                     "--quiet", "--out", tmp_path / "o"], "draws", "at most")
    refused(capsys, ["score", tiny_gpt2, tiny_gpt2, "--draws", "1000000000000", "--workers",
                     "2", "--quiet", "--out", tmp_path / "o"], "draws", "at most")
    refused(capsys, ["score", tiny_gpt2, "--components", "q", "--component-draws",
                     "100000000000", "--quiet", "--out", tmp_path / "o"], "component-draws",
            "at most")
    refused(capsys, ["baseline", "--d", "64", "--dh", "8", "--draws", "1000000000000",
                     "--stats", "spectral"], "draws", "at most")
    if __import__("importlib").util.find_spec("distributed"):
        refused(capsys, ["sweep", "--network", "residual", "--d", "100000", "--depth", "2",
                         "--draws", "20", "--workers", "1", "--out", tmp_path / "n.nc"],
                "d=100000", "memory")
    assert not (tmp_path / "o").exists()


@pytest.fixture
def no_weights(monkeypatch):
    """Reading a model's weights in this test is a failure: options are validated first."""
    import rmtbase.models as models

    def fail(*a, **k):
        raise AssertionError("read weights before refusing")

    monkeypatch.setattr(models, "load_heads", fail)


@pytest.mark.parametrize("opts", [("ro", "size=1m"), ("size=1m",)])
def test_out_on_a_mount_point_is_refused_before_scoring(tmp_path, capsys, no_weights,
                                                        tiny_gpt2, opts):
    """An empty mount point (read-only or not) as --out: the swap at the end would fail with
    EBUSY after all the work; refused up front instead."""
    with tmpfs(tmp_path / "mnt", *opts) as mnt:
        refused(capsys, ["score", tiny_gpt2, "--quiet", "--out", mnt], "mount point")
        assert list(mnt.iterdir()) == []


def test_out_under_a_read_only_mount_is_refused_before_scoring(tmp_path, capsys, no_weights,
                                                               tiny_gpt2):
    with tmpfs(tmp_path / "ro", "ro", "size=1m") as ro:
        refused(capsys, ["score", tiny_gpt2, "--quiet", "--out", ro / "o"], "cannot write")


def test_out_whose_parent_takes_no_folder(tmp_path, capsys, no_weights, tiny_gpt2, monkeypatch):
    """What ``os.access`` cannot see (root on a read-only bind mount): the parent is probed by
    creating a folder."""
    real = Path.mkdir

    def erofs(self, *a, **k):
        if self.parent == tmp_path and ".probe-" in self.name:
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        return real(self, *a, **k)

    monkeypatch.setattr(Path, "mkdir", erofs)
    refused(capsys, ["score", tiny_gpt2, "--quiet", "--out", tmp_path / "o"], "read-only")


@pytest.mark.parametrize("n", ["0", "5"])
def test_element_draws_too_few_for_the_permutation_null(tmp_path, capsys, no_weights,
                                                        tiny_gpt2, n):
    refused(capsys, ["score", tiny_gpt2, "--null", "permutation", "--element-draws", n,
                     "--quiet", "--out", tmp_path / "o"], "--element-draws", "--stats spectral")


def test_warnings_are_one_line_from_the_executable(tmp_path):
    """A warning met by the rmtbase executable is one line on stderr (Python's default adds
    the file, line and source text of the ``warnings.warn`` call)."""
    code = ("import sys, warnings\n"
            "import rmtbase.cli as c\n"
            "def fake(argv=None, **kw):\n"
            "    warnings.warn('rmtbase: ignoring cached table: x.nc is damaged', RuntimeWarning)\n"
            "    warnings.warn('second', UserWarning)\n"
            "    return 0\n"
            "c.main = fake\n"
            "sys.exit(c.console_main())\n")
    env = dict(os.environ, PYTHONPATH=SRC, RMTBASE_NO_JIT_CACHE="1")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == ["rmtbase: warning: ignoring cached table: x.nc is damaged",
                                     "rmtbase: warning: second"], r.stderr
    import warnings

    assert warnings.formatwarning.__module__ == "warnings"  # importing the CLI changed nothing


def test_offline_hub_error_names_offline_mode(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    err = refused(capsys, ["score", "someone/not-cached-model", "--quiet", "--out",
                           tmp_path / "o"], "offline mode is on", "HF_HUB_OFFLINE")
    assert "connection" not in err
