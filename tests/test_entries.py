"""Resumable collections: each entry written when it completes, a rerun reuses finished
entries, `rmtbase combine` assembles entries into the same collection; Dask tasks retried,
waited on by polling (Ctrl-C delivered, tasks cancelled)."""

from __future__ import annotations

import os
import signal
import threading

import numpy as np
import pytest
import xarray as xr
from _checkpoints import trajectory

import rmtbase.scoring.collection.runs as runs
import rmtbase.scoring.collection.trajectory as traj
from rmtbase.cli import main
from rmtbase.scoring.collection.entries import entries_dir, entry_key, entry_path, load_entries
from rmtbase.scoring.collection.trajectory import score_collection

OPTS = dict(draws=300, stats="spectral")
REAL_SCORE_ONE = traj.score_one


@pytest.fixture(scope="module")
def steps(tmp_path_factory, score_cache):
    return trajectory(tmp_path_factory.mktemp("entries"))


def _same(a: xr.Dataset, b: xr.Dataset):
    a, b = a.copy(), b.copy()
    for ds in (a, b):
        for k in ("created", "computed_by", "history"):  # when, by which run (CF's history)
            ds.attrs.pop(k, None)
    # exact: the same call twice in one process: same compiled programs, same inputs (entries
    #  written and read back, netCDF lossless)
    xr.testing.assert_identical(a, b)


def _counting(monkeypatch, stop_at=None):
    calls = []
    real = REAL_SCORE_ONE

    def one(model, revision, options, x64):
        if stop_at is not None and len(calls) == stop_at:
            raise KeyboardInterrupt
        calls.append(os.path.basename(str(model)))
        return real(model, revision, options, x64)

    monkeypatch.setattr(runs, "score_one", one)  # what the runners call
    return calls


def _resume(paths, tmp_path, monkeypatch, capsys, done):
    """Interrupt a collection after ``done`` entries, resume it, and compare it with a rerun
    (nothing scored) and with a run into fresh entry files."""
    store = tmp_path / "run.entries"
    calls = _counting(monkeypatch, stop_at=done)
    with pytest.raises(KeyboardInterrupt):
        score_collection(paths, entries=store, **OPTS)
    assert len(calls) == done and len(list(store.glob("*.nc"))) == done
    assert f"{done} finished entries are kept in" in capsys.readouterr().err
    calls = _counting(monkeypatch)
    resumed = score_collection(paths, entries=store, **OPTS)
    # the others first; the stored ones again only where another entry enlarged the null
    assert sorted(calls[:len(paths) - done]) == sorted(os.path.basename(p)
                                                       for p in paths[done:])
    again = _counting(monkeypatch)
    rerun = score_collection(paths, entries=store, progress=False, **OPTS)
    assert again == []  # everything finished: nothing scored
    _same(rerun, resumed)
    fresh = score_collection(paths, entries=tmp_path / "other", progress=False, **OPTS)
    _same(fresh, resumed)


def test_interrupted_collection_resumes_identical(steps, tmp_path, monkeypatch, capsys):
    """Interrupted after 1 of 2 entries: the rerun scores only the other one and the
    collection equals one scored without interruption."""
    _resume([str(p) for p in steps[2:]], tmp_path, monkeypatch, capsys, 1)


@pytest.mark.slow
def test_four_checkpoints_killed_after_two_resume_identical(steps, tmp_path, monkeypatch,
                                                            capsys):
    """Killed after 2 of 4 entries: the 2 are on disk, the rerun scores only the other 2 and
    the collection equals one scored without interruption."""
    _resume([str(p) for p in steps], tmp_path, monkeypatch, capsys, 2)


def test_other_options_or_changed_weights_are_scored_again(steps, tmp_path):
    key = entry_key(str(steps[0]), None, OPTS, True)
    assert key == entry_key(str(steps[0]), None, dict(OPTS), True)
    assert key != entry_key(str(steps[0]), None, dict(OPTS, draws=400), True)
    assert key != entry_key(str(steps[0]), None, OPTS, False)
    assert key != entry_key(str(steps[1]), None, OPTS, True)
    w = next(p for p in steps[0].iterdir() if p.suffix == ".safetensors")
    st = w.stat()
    os.utime(w, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert entry_key(str(steps[0]), None, OPTS, True) != key
    assert entry_path(tmp_path, "a/checkpoint-100").name == "a%2Fcheckpoint-100.nc"


def test_combine_assembles_the_collection(steps, tmp_path, capsys):
    """`rmtbase score A B C D` leaves OUT.entries; `rmtbase combine OUT.entries` writes the same
    collection; combining score outputs of the models scored one by one gives the same entries
    where their nulls agree, and warns where they do not (one null per shape is the collection's:
    it re-scores step0 from the null sizes step1 needed, a single score keeps its own)."""
    args = ["--draws", "300", "--stats", "spectral", "--quiet", "--no-figures"]
    out = tmp_path / "all"
    assert main(["score", *map(str, steps[:2]), *args, "--out", str(out)]) == 0
    assert sorted(p.name for p in entries_dir(out).iterdir()) == ["step0.nc", "step1.nc"]
    assert main(["combine", str(entries_dir(out)), "--no-figures",
                 "--out", str(tmp_path / "c")]) == 0
    singles = []
    for p in steps[:2]:
        singles.append(tmp_path / f"one-{p.name}")
        assert main(["score", str(p), *args, "--out", str(singles[-1])]) == 0
    assert main(["combine", *map(str, singles), "--no-figures",
                 "--out", str(tmp_path / "s")]) == 0
    assert "nulls of different sizes" in capsys.readouterr().err  # the singles' combine only
    with xr.open_dataset(out / "scores.nc") as a, xr.open_dataset(tmp_path / "c/scores.nc") as b:
        _same(a.load(), b.load())
    with xr.open_dataset(out / "scores.nc") as a, xr.open_dataset(tmp_path / "s/scores.nc") as b:
        a, b = a.load(), b.load()
        assert list(b["checkpoint"].values) == ["step0", "step1"]
        assert "joint_null_draws" in a.attrs and "joint_null_draws" not in b.attrs
        a, b = a.sel(checkpoint="step1"), b.sel(checkpoint="step1")
        for v in ("value", "p_value", "head_p_value", "qk_spectrum", "null_spectrum"):
            # exact: the same call twice in one process: same compiled programs, same inputs, read
            #  back losslessly
            np.testing.assert_array_equal(a[v].values, b[v].values)
        # exact: integers / booleans
        np.testing.assert_array_equal(a["head_flag"].values, b["head_flag"].values)
    assert [lab for lab, _ in load_entries([entries_dir(out)])] == ["step0", "step1"]
    assert main(["combine", str(singles[0]), "--out", str(tmp_path / "x")]) == 2
    assert "at least two entries" in capsys.readouterr().err


class _Future:
    def __init__(self):
        self.ready = False

    def done(self):
        return self.ready


class _Client:
    def __init__(self):
        self.kw, self.cancelled = [], []

    def submit(self, fn, *args, **kw):
        self.kw.append(kw)
        return _Future()

    def cancel(self, futures, force=False):
        self.cancelled.extend(futures)


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="signals reach the main thread")
def test_dask_wait_polls_so_ctrl_c_lands_and_cancels(steps):
    """The driver waits by polling: a SIGINT while no task has finished raises at once, and
    every pending task is cancelled; tasks are submitted with retries."""
    specs = traj.make_specs([str(p) for p in steps[:2]])
    run = runs.DaskRunner(specs, OPTS, True, False, None, None, None, None)
    run.client = _Client()
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run.run([[0, 1]])
    finally:
        timer.cancel()
    assert all(kw["retries"] == runs.RETRIES for kw in run.client.kw)
    assert len(run.client.cancelled) == 2


def test_worker_threads_are_pinned():
    from rmtbase.baseline.sweep import worker_env

    env = worker_env(2, cores=2)
    assert env["OPENBLAS_NUM_THREADS"] == "1" and env["MKL_NUM_THREADS"] == "1"
    env = worker_env(2, cores=16)
    assert env["OMP_NUM_THREADS"] == "8"
    # XLA's pool is not pinned: --xla_cpu_multi_thread_eigen=false changes float32 bits, and
    # a sweep must equal one process (test_sweep)
    assert "XLA_FLAGS" not in env and "XLA_FLAGS" not in worker_env(2, cores=2)


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["tasks:submitted:INT", "tasks:submitted:INT*"])
def test_ctrl_c_during_a_two_worker_collection_ends_it(steps, tmp_path, fault):
    """`score A B C D --workers 2` with one Ctrl-C (or a terminal's burst)
    while the driver waits on its tasks: exit 130 with one line, no hang, no output."""
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("distributed")
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = dict(os.environ, PYTHONPATH=src, RMTBASE_FAULT=fault,
               RMTBASE_CACHE=os.environ.get("RMTBASE_CACHE", str(tmp_path / "cache")),
               RMTBASE_NO_JIT_CACHE="1", HF_HUB_OFFLINE="1")
    out = tmp_path / "coll"
    p = subprocess.Popen([sys.executable, "-m", "rmtbase", "score", *map(str, steps),
                          "--stats", "spectral", "--draws", "300", "--quiet", "--no-figures",
                          "--workers", "2", "--out", str(out)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        _, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        p.communicate()
        pytest.fail(f"score --workers 2 hung after {fault}")
    assert p.returncode == 130, err[-2000:]
    assert err == "rmtbase: interrupted\n", err[-2000:]
    assert not out.exists()
