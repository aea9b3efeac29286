"""Long runs: the numbers do not depend on the chunk size or the draw count, bit for bit; an
interrupted or killed ``rmtbase baseline --out`` continues from its completed blocks and writes
the table an uninterrupted run writes; progress is a bar on a terminal and plain lines
elsewhere."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
import xarray as xr

import rmtbase.baseline.null as null
import rmtbase.baseline.tables as tables
from rmtbase.baseline import table_file
from rmtbase.baseline.partial import PartialStore
from rmtbase.baseline.table_file import read_table
from rmtbase.cli import main
from rmtbase.progress import progress_bar
from rmtbase.reporters import LogLines

SRC = str(Path(__file__).resolve().parents[1] / "src")
D, DH = 768, 64  # one compiled draw function serves the whole module (and tests/test_faults.py)
ARGS = ["baseline", "--d", str(D), "--dh", str(DH), "--draws", "1000", "--seed", "4", "--stats",
        "spectral", "--no-progress"]


def _same(a: xr.Dataset, b: xr.Dataset) -> None:
    assert set(a.data_vars) == set(b.data_vars)
    for v in a.data_vars:
        # exact: a resumed run keeps the stored blocks and draws the rest by the same program (fixed
        #  batch width)
        np.testing.assert_array_equal(a[v].values, b[v].values, err_msg=v)


# --- item 7: chunk size and draw count never change a number ----------------------------------

@pytest.mark.parametrize("d,d_h", [pytest.param(D, DH, marks=pytest.mark.slow), (128, 64)])
def test_spectral_null_is_bitwise_independent_of_chunk_size(d, d_h):  # "eigh", "svd" routes
    """XLA compiles a vectorised draw differently for other batch widths (row sums in another
    order under 64 rows, scalar log/exp at width 1: up to 1.3e-6 relative before the fix);
    a fixed batch makes every chunk size give the same bits."""
    key = jax.random.key(11)
    ref = null.null_draws(key, d, d_h, 260, stats="spectral", dtype=np.float32)
    for chunk in (1, 7, 64, 250):
        out = null.null_draws(key, d, d_h, 260, stats="spectral", chunk_size=chunk,
                              dtype=np.float32)
        for k in ref:
            # exact: one compiled program: every chunk size and draw count runs the fixed batch
            #  width, draw i keyed by fold_in(key, i)
            np.testing.assert_array_equal(out[k], ref[k], err_msg=f"chunk {chunk}: {k}")
    short = null.null_draws(key, d, d_h, 7, stats="spectral", dtype=np.float32)
    for k in ref:  # a shorter run is a prefix of a longer one
        # exact: one compiled program: every chunk size and draw count runs the fixed batch width,
        #  draw i keyed by fold_in(key, i)
        np.testing.assert_array_equal(short[k], ref[k][:7], err_msg=k)


def test_table_prefix_and_chunk_size_bitwise():
    """A 300-draw table (last block 50 draws) is the first 300 draws of a 500-draw table, and
    ``chunk_size`` changes nothing; float32, as the CLI makes it."""
    a = tables.baseline(D, DH, draws=300, seed=2, stats="spectral", progress=False)
    b = tables.baseline(D, DH, draws=500, seed=2, stats="spectral", progress=False,
                        chunk_size=7)
    _same(a, b.isel(draw=slice(0, 300)))


# --- item 9: resume after an interrupt or a kill ----------------------------------------------

@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("ref") / "t.nc"
    assert main([*ARGS, "--out", str(out)]) == 0
    assert [p.name for p in out.parent.iterdir()] == ["t.nc"]  # the store is gone
    return read_table(out)


def _interrupt_after(monkeypatch, k: int):
    def hook(stage):
        if stage == f"block:{k}":
            raise KeyboardInterrupt

    monkeypatch.setattr(table_file, "fault_point", hook)


def _count_draw_calls(monkeypatch) -> list:
    calls = []
    real = null.null_draws

    def counting(*a, **kw):
        calls.append(a[3])
        return real(*a, **kw)

    monkeypatch.setattr(null, "null_draws", counting)
    return calls


def test_interrupt_then_rerun_continues(tmp_path, monkeypatch, capsys, uninterrupted):
    out = tmp_path / "t.nc"
    _interrupt_after(monkeypatch, 2)
    assert main([*ARGS, "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert "run the same command again" in err and "Traceback" not in err
    assert not out.exists()
    (store,) = [p for p in tmp_path.iterdir() if p.name.startswith(".t.nc.partial-")]
    assert len(list(store.glob("*.npz"))) == 2
    monkeypatch.undo()
    calls = _count_draw_calls(monkeypatch)
    assert main([*ARGS, "--out", str(out)]) == 0
    assert calls == [250, 250]  # only the two missing blocks were drawn
    _same(read_table(out), uninterrupted)
    assert [p.name for p in tmp_path.iterdir()] == ["t.nc"]


def test_sigkill_then_rerun_continues(tmp_path, uninterrupted):
    out = tmp_path / "t.nc"
    env = dict(os.environ, PYTHONPATH=SRC, RMTBASE_FAULT="block:3:KILL",
               RMTBASE_NO_JIT_CACHE="1")
    r = subprocess.run([sys.executable, "-m", "rmtbase", *ARGS, "--out", str(out)], env=env,
                       capture_output=True, timeout=300)
    assert r.returncode == -signal.SIGKILL, r.stderr[-1000:]
    assert not out.exists()
    assert main([*ARGS, "--out", str(out)]) == 0
    _same(read_table(out), uninterrupted)
    assert [p.name for p in tmp_path.iterdir()] == ["t.nc"]


def test_stored_blocks_serve_another_sigma_and_more_draws(tmp_path, monkeypatch):
    """The store holds σ = 1 draws keyed without σ or the draw count."""
    out = tmp_path / "t.nc"
    _interrupt_after(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt):
        tables.baseline(D, DH, draws=500, seed=4, stats="spectral", progress=False, out=out)
    monkeypatch.undo()
    calls = _count_draw_calls(monkeypatch)
    ds = tables.baseline(D, DH, draws=600, seed=4, stats="spectral", progress=False, out=out,
                         sigma=0.5)
    assert calls == [100]
    ref = tables.baseline(D, DH, draws=600, seed=4, stats="spectral", progress=False,
                          sigma=0.5)
    _same(ds, ref)


def test_poisoned_blocks_are_drawn_again(tmp_path, monkeypatch):
    out = tmp_path / "t.nc"
    _interrupt_after(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt):
        tables.baseline(D, DH, draws=500, seed=4, stats="spectral", progress=False, out=out)
    monkeypatch.undo()
    spec = tables.make_spec(draws=500, seed=4, stats="spectral")
    store = PartialStore(out, spec)
    b0, b1 = sorted(store.dir.glob("*.npz"))
    b0.write_bytes(b"not a zip file")
    with np.load(b1) as z:  # right shapes, wrong key: a block of another run copied in
        np.savez(b1, **{k: z[k] for k in z.files if k != "__key__"}, __key__="0" * 16)
    with pytest.warns(RuntimeWarning, match="ignoring stored block"):
        ds = tables.baseline(D, DH, draws=500, seed=4, stats="spectral", progress=False,
                             out=out)
    _same(ds, tables.baseline(D, DH, draws=500, seed=4, stats="spectral", progress=False))


def test_other_settings_leave_no_store_behind(tmp_path, monkeypatch):
    out = tmp_path / "t.nc"
    _interrupt_after(monkeypatch, 1)
    with pytest.raises(KeyboardInterrupt):
        tables.baseline(D, DH, draws=500, seed=9, stats="spectral", progress=False, out=out)
    monkeypatch.undo()
    assert len([p for p in tmp_path.iterdir() if ".partial-" in p.name]) == 1
    tables.baseline(D, DH, draws=300, seed=4, stats="spectral", progress=False, out=out)
    assert [p.name for p in tmp_path.iterdir()] == ["t.nc"]


# --- item 9: progress ---------------------------------------------------------------------------

class _Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_log_lines_every_interval_and_nothing_for_short_runs():
    clock, stream = _Clock(), io.StringIO()
    p = LogLines(1000, "rmtbase baseline", "draw", stream=stream, interval=30, clock=clock)
    for _ in range(10):
        clock.t += 10
        p.update(100)
    p.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 4  # at 30, 60, 90 s, and the final line
    assert lines[0].startswith("rmtbase baseline: 300/1000 draws (30%), 30 s elapsed, about 70")
    assert lines[-1].endswith("done")
    short = LogLines(10, "x", "draw", stream=io.StringIO(), interval=30, clock=_Clock())
    short.update(10)
    short.close()
    assert short.stream.getvalue() == ""


def test_policy_bar_only_on_a_terminal():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    assert isinstance(progress_bar(5, stream=io.StringIO()), LogLines)
    bar = progress_bar(5, stream=Tty())
    assert type(bar).__name__ == "TerminalBar"  # a tqdm bar in the channel (rmtbase.progress)
    bar.close()
    silent = progress_bar(5, enabled=False, stream=Tty())
    silent.update(5)
    silent.close()


def test_api_default_draws_no_bar_into_a_log(capsys, monkeypatch):
    """``baseline(progress=True)`` with stderr not a terminal: plain lines, no tqdm bar."""
    monkeypatch.setenv("RMTBASE_PROGRESS_INTERVAL", "0")
    tables.baseline(D, DH, draws=500, seed=4, stats="spectral")
    err = capsys.readouterr().err
    assert "\r" not in err and "it/s" not in err
    assert "rmtbase baseline: 250/500 draws (50%)" in err and err.rstrip().endswith("done")


def test_missing_null_table_is_announced(tmp_path, capsys, monkeypatch):
    from rmtbase.baseline import cache

    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path))
    cache.null_table(64, 8, stats="spectral", min_draws=10, progress=True)
    err = capsys.readouterr().err
    assert err.startswith("rmtbase: generating the null table d=64, d_h=8")
