"""A full disk named for what it is, in one line.

netCDF-C reports a file it cannot create or extend on a full disk as EACCES ("Permission
denied"), and JAX warns once per compiled program it cannot keep. Without a real full disk the
file system's room is ``os.statvfs`` (patched) and the writers raise what they raise on one;
where this process may mount a tmpfs, one real full disk is tried too (slow tier)."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from rmtbase.files import atomic, disk_space, user_cache

SRC = str(Path(__file__).resolve().parents[1] / "src")


class _Full:
    f_bavail, f_frsize = 0, 4096


class _Roomy:
    f_bavail, f_frsize = 2**30, 4096


@pytest.fixture(autouse=True)
def _fresh_state():
    user_cache.forget()
    yield
    user_cache.forget()


@pytest.fixture
def full_disk(monkeypatch):
    monkeypatch.setattr(os, "statvfs", lambda path: _Full())


def _netcdf_on_a_full_disk(tmp):
    """What netCDF-C raises when HDF5 cannot create the file for lack of room."""
    raise PermissionError(errno.EACCES, "Permission denied")


def test_netcdf_permission_error_on_a_full_disk_is_no_space(tmp_path, full_disk):
    target = tmp_path / "t.nc"
    with pytest.raises(OSError) as got:
        atomic.write_atomic(target, _netcdf_on_a_full_disk)
    assert got.value.errno == errno.ENOSPC and got.value.filename == str(target)
    assert disk_space.reason(got.value) == "no space left on device"
    assert list(tmp_path.iterdir()) == []


def test_a_real_permission_error_with_room_stays_one(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "statvfs", lambda path: _Roomy())
    with pytest.raises(PermissionError) as got:
        atomic.write_atomic(tmp_path / "t.nc", _netcdf_on_a_full_disk)
    assert got.value.errno == errno.EACCES and got.value.filename == str(tmp_path / "t.nc")
    assert disk_space.reason(got.value, tmp_path) == "permission denied"


def test_the_partial_file_s_room_does_not_hide_a_full_disk(tmp_path, monkeypatch):
    """The room is read before the partial file is removed (which frees what it held)."""
    free = {"bytes": 0}

    class Stat:
        f_frsize = 1

        @property
        def f_bavail(self):
            return free["bytes"]

    monkeypatch.setattr(os, "statvfs", lambda path: Stat())
    real_unlink = Path.unlink

    def unlink(self, missing_ok=False):
        free["bytes"] = 2**30  # the partial file held a GiB
        return real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", unlink)

    def fill(tmp):
        tmp.write_bytes(b"x")
        raise RuntimeError("NetCDF: HDF error")

    with pytest.raises(OSError) as got:
        atomic.write_atomic(tmp_path / "t.nc", fill)
    assert got.value.errno == errno.ENOSPC


def test_the_cache_line_says_no_space(tmp_path, full_disk):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        user_cache.unwritable(tmp_path, PermissionError(errno.EACCES, "Permission denied"))
    [said] = [str(w.message) for w in record]
    assert "no space left on device" in said and "Permission" not in said


def test_a_table_write_on_a_full_disk_says_no_space(tmp_path, monkeypatch):
    """The table writer's own check sees room (another process fills the disk meanwhile):
    HDF5's error is one TableError saying so."""
    import xarray as xr

    from rmtbase.baseline import table_file
    from rmtbase.errors import TableError

    ds = xr.Dataset({"x": (("draw",), [1.0, 2.0])}, attrs={"rmtbase_table_format": 1})
    monkeypatch.setattr(table_file, "_free_bytes", lambda parent: 2**40)
    monkeypatch.setattr(os, "statvfs", lambda path: _Full())

    def full(self, path, **kw):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(xr.Dataset, "to_netcdf", full)
    monkeypatch.setattr(table_file, "encode_table", lambda d: d)
    monkeypatch.setattr(table_file, "table_checksum", lambda d: "0")
    with pytest.raises(TableError, match="no space left on device") as got:
        table_file.write_table(ds, tmp_path / "t.nc")
    assert "Permission" not in str(got.value)


def test_the_cli_names_a_full_disk_in_one_line(tmp_path, monkeypatch, capsys):
    """An OSError the command lets through: ``cannot write PATH: no space left on device``."""
    from rmtbase import cli
    from rmtbase.cli import constants

    where = tmp_path / "o" / "scores.nc"

    def run(args):
        raise OSError(errno.ENOSPC, "No space left on device", str(where))

    monkeypatch.setattr(constants, "run", run)
    capsys.readouterr()
    assert cli.main(["constants"]) == 2
    err = capsys.readouterr().err
    assert err == f"rmtbase: error: cannot write {where}: no space left on device\n"


_JAX_WRITE = ("Error writing persistent compilation cache entry for '{}': OSError: [Errno 28] "
              "No space left on device")
_JAX_READ = ("Error reading persistent compilation cache entry for '{}': error: Error -5 while "
             "decompressing data: incomplete or truncated stream")
_PROGRAMS = ("jit_layer_stats", "jit__lambda", "jit_finished", "jit_factor_profile_jax",
             "jit_stage", "jit_multiply", "jit__reduce_sum", "jit_true_divide",
             "jit_broadcast_in_dim", "jit_subtract", "jit_swapaxes", "jit_matmul")


@contextlib.contextmanager
def _executable_warnings():
    """The warning display of the ``rmtbase`` executable (:func:`rmtbase.cli.console_main`)."""
    from rmtbase import cli

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.formatwarning = cli._one_line_warning
        warnings.showwarning = cli._show_warning
        yield


def test_jax_cache_warnings_fold_into_the_one_cache_line(tmp_path, monkeypatch, capsys,
                                                         full_disk):
    """The twelve JAX lines of a scored model on a full disk, then rmtbase's own null cache
    failing there (netCDF's "Permission denied"): one line, "no space left on device"."""
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "cache" / "jax"))
    capsys.readouterr()
    with _executable_warnings():
        for name in _PROGRAMS:
            warnings.warn(_JAX_WRITE.format(name), UserWarning, stacklevel=1)
        for name in _PROGRAMS[:4]:
            warnings.warn(_JAX_READ.format(name), UserWarning, stacklevel=1)
        user_cache.unwritable(tmp_path / "cache",
                              PermissionError(errno.EACCES, "Permission denied"))
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("rmtbase: warning: could not cache in ")
    assert f"{tmp_path / 'cache'} (no space left on device)" in err[0]


def test_other_jax_cache_failures_are_one_line_each_kind(tmp_path, monkeypatch, capsys):
    """With room, JAX's read failures (entries truncated by an earlier full disk) are one line
    of their own, and rmtbase's caches are not called unwritable."""
    monkeypatch.setattr(os, "statvfs", lambda path: _Roomy())
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "cache" / "jax"))
    capsys.readouterr()
    with _executable_warnings():
        for name in _PROGRAMS:
            warnings.warn(_JAX_READ.format(name), UserWarning, stacklevel=1)
        warnings.warn("something else", UserWarning, stacklevel=1)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2, err
    assert "ignoring unreadable entries of JAX's compiled-program cache" in err[0]
    assert "truncated stream" in err[0] and err[1] == "rmtbase: warning: something else"
    assert not user_cache.said_unwritable()


def test_no_jax_cache_on_a_full_disk(tmp_path, monkeypatch, full_disk):
    """On a disk without room JAX's cache is not turned on: no warning per program, and no
    truncated entries for later runs to fail on."""
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    monkeypatch.delenv("RMTBASE_NO_JIT_CACHE", raising=False)
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "cache"))
    from rmtbase.cli import _use_compilation_cache

    _use_compilation_cache()
    assert "JAX_COMPILATION_CACHE_DIR" not in os.environ
    monkeypatch.setattr(os, "statvfs", lambda path: _Roomy())
    _use_compilation_cache()
    assert os.environ["JAX_COMPILATION_CACHE_DIR"] == str(tmp_path / "cache" / "jax")


# --- a real full disk (a tmpfs; needs the right to mount) --------------------------------------

@contextlib.contextmanager
def _full_tmpfs(where: Path):
    where.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(where)],
                       capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {r.stderr.strip()[:80]}")
    try:
        fd = os.open(where / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
        try:  # fill it
            with contextlib.suppress(OSError):
                while os.write(fd, b"\0" * 4096):
                    pass
        finally:
            os.close(fd)
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def test_netcdf_on_a_real_full_disk(tmp_path):
    import numpy as np
    import xarray as xr

    with _full_tmpfs(tmp_path / "full") as full:
        ds = xr.Dataset({"a": (("x",), np.arange(1000.0))})
        with pytest.raises(OSError) as got:
            atomic.write_netcdf(ds, full / "a.nc")
        assert got.value.errno == errno.ENOSPC, got.value
        assert sorted(p.name for p in full.iterdir()) == ["filler"]


@pytest.mark.slow
def test_a_score_with_its_cache_on_a_full_disk_says_so_once(tmp_path):
    """The executable end to end, its cache on a real full disk: the output is written, and
    stderr holds one warning, "no space left on device", and none of JAX's lines."""
    from _checkpoints import gpt2

    model = gpt2(tmp_path / "m")
    with _full_tmpfs(tmp_path / "full") as full:
        env = dict(os.environ, RMTBASE_CACHE=str(full / "cache"), PYTHONPATH=SRC)
        env.pop("JAX_COMPILATION_CACHE_DIR", None)
        r = subprocess.run([sys.executable, "-m", "rmtbase", "score", str(model), "--draws",
                            "50", "--no-figures", "--quiet", "--out", str(tmp_path / "o")],
                           env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    warned = [s for s in r.stderr.splitlines() if s.startswith("rmtbase: warning:")]
    assert len(warned) == 1 and "no space left on device" in warned[0], r.stderr
    assert "persistent compilation cache" not in r.stderr
    assert (tmp_path / "o" / "scores.nc").exists()
