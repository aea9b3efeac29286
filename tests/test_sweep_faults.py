"""The distributed path under faults: a worker killed mid-task, a scheduler that disappears, a
scheduler address nothing answers at.

A killed worker's tasks run again elsewhere under the same keys, so the sweep's table is the
single-process table bit for bit, each block taken once. A lost scheduler is one line naming
what was kept, and the same command then continues from the kept blocks. An address nothing
listens at is one line before any work, without Dask's 20 s of connection retries. The
clusters here are loopback only (127.0.0.1), two single-threaded worker processes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import xarray as xr

pytest.importorskip("distributed")

from rmtbase.baseline import block_jobs, tables  # noqa: E402
from rmtbase.cli import main  # noqa: E402
from rmtbase.errors import InputError  # noqa: E402

SRC = str(Path(__file__).resolve().parents[1] / "src")
NOWHERE = "tcp://127.0.0.1:1"  # loopback, a port nothing listens on
GRID = dict(d=16, d_h=4)
OPTS = dict(draws=6 * tables.DRAW_BLOCK, seed=11, stats="spectral")


def _one_line(capsys, code, *needles) -> str:
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("rmtbase: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for n in needles:
        assert n in err, (n, err)
    return err


@pytest.fixture
def no_work(monkeypatch):
    """Drawing or connecting through Dask fails the test: the refusal comes first."""
    import distributed

    def fail(*a, **k):
        raise AssertionError("work started before the scheduler was found unreachable")

    monkeypatch.setattr(tables, "generate_blocks", fail)
    monkeypatch.setattr(tables, "run_cells", fail)
    monkeypatch.setattr(distributed, "Client", fail)


# --- quick: an address nothing answers at -----------------------------------------------------

def test_sweep_to_a_scheduler_nowhere_is_one_line_before_any_work(tmp_path, capsys, no_work):
    out = tmp_path / "grid.nc"
    capsys.readouterr()
    code = main(["sweep", "--d", "16", "--dh", "4", "--draws", "300", "--stats", "spectral",
                 "--scheduler", NOWHERE, "--no-progress", "--out", str(out)])
    _one_line(capsys, code, f"cannot connect to the Dask scheduler at {NOWHERE}",
              "connection refused")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow  # 20 s: building and reading the model (the sweep's case above is quick)
def test_score_to_a_scheduler_nowhere_is_one_line_before_any_work(tmp_path, capsys, no_work):
    from _checkpoints import gpt2

    model = gpt2(tmp_path / "m")
    out = tmp_path / "o"
    capsys.readouterr()
    code = main(["score", str(model), str(model), "--scheduler", NOWHERE, "--draws", "50",
                 "--quiet", "--no-figures", "--out", str(out)])
    _one_line(capsys, code, f"cannot connect to the Dask scheduler at {NOWHERE}")
    assert not out.exists()


class _Future:
    """What a Dask future's ``result`` raises, without a cluster."""

    def __init__(self, exc, address="tcp://127.0.0.1:8786"):
        self.exc = exc
        self.client = type("C", (), {"scheduler": type("S", (), {"address": address})()})()

    def result(self):
        raise self.exc


def test_a_lost_scheduler_or_a_dying_task_is_a_cluster_error():
    from distributed import KilledWorker
    from distributed.client import FutureCancelledError

    from rmtbase.baseline.dask_client import ClusterError, result

    lost = FutureCancelledError("job_blocks-1", "scheduler-connection-lost", "Client lost ...")
    with pytest.raises(ClusterError, match=r"^lost the Dask scheduler at tcp://127.0.0.1:8786 "
                                           r"\(the connection was lost\)$"):
        result(_Future(lost))
    with pytest.raises(ClusterError, match="job_blocks-1 after 4 workers died"):
        result(_Future(KilledWorker("job_blocks-1", None, 3)))
    with pytest.raises(InputError, match="its own"):  # the task's own error, as it is
        result(_Future(InputError("its own")))


# --- slow: a worker killed mid-task; the scheduler lost ---------------------------------------

@pytest.fixture
def single():
    return tables.baseline(GRID["d"], GRID["d_h"], progress=False, **OPTS)


def _same(swept, single):
    # exact: the same compiled programs and keys, in a Dask task on this CPU
    xr.testing.assert_identical(swept.drop_attrs(deep=False).drop_encoding(),
                                single.drop_attrs(deep=False))


def _taken_once(monkeypatch) -> list:
    """Spy on :meth:`BlockJobs.add`: the (job, start) of every task result taken."""
    taken = []
    real = block_jobs.BlockJobs.add

    def add(self, job, start, blocks):
        taken.append((job, start))
        return real(self, job, start, blocks)

    monkeypatch.setattr(block_jobs.BlockJobs, "add", add)
    return taken


def _executing(dask_worker=None) -> int:
    return len(dask_worker.state.executing)


@pytest.mark.slow
def test_a_worker_killed_mid_task_changes_nothing(tmp_path, monkeypatch, single):
    import logging

    import distributed

    from rmtbase.baseline.sweep import NO_DASHBOARD, sweep

    taken = _taken_once(monkeypatch)
    out = tmp_path / "grid.nc"
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None,
                                  silence_logs=logging.CRITICAL,
                                  scheduler_kwargs=NO_DASHBOARD) as cluster, \
            distributed.Client(cluster) as client:
        pids = client.run(os.getpid)
        killed = []

        def kill_a_busy_worker():
            end = time.monotonic() + 300
            while time.monotonic() < end:
                busy = [a for a, n in client.run(_executing).items() if n]
                if busy:  # mid-task: it is executing one
                    os.kill(pids[busy[0]], signal.SIGKILL)
                    killed.append(busy[0])
                    return
                time.sleep(0.05)

        killer = threading.Thread(target=kill_a_busy_worker)
        killer.start()
        swept = sweep(GRID["d"], GRID["d_h"], client=client, progress=False, out=out, **OPTS)
        killer.join()
    assert killed, "no task was seen running"
    _same(swept, single)
    _same(tables.read_table(out), single)
    assert sorted(taken) == sorted(set(taken)) and len(taken) == 6  # none lost, none twice
    assert [p.name for p in tmp_path.iterdir()] == ["grid.nc"]  # the kept blocks removed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_a_lost_scheduler_is_one_line_and_the_same_command_continues(tmp_path, capsys,
                                                                       monkeypatch, single):
    """The scheduler is killed as the first block arrives: one line, the arrived blocks kept;
    the same command on a cluster that is there draws only the others."""
    from rmtbase.baseline import partial

    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = dict(os.environ, PYTHONPATH=SRC, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler",
                                  "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                                 env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers = None
    out = tmp_path / "grid.nc"
    argv = ["sweep", "--d", str(GRID["d"]), "--dh", str(GRID["d_h"]), "--draws",
            str(OPTS["draws"]), "--seed", str(OPTS["seed"]), "--stats", OPTS["stats"],
            "--no-progress", "--out", str(out)]
    real_save = partial.PartialStore.save

    def save_then_lose_the_scheduler(self, *a, **k):
        real_save(self, *a, **k)
        if scheduler.poll() is None:
            scheduler.kill()
            scheduler.wait(30)

    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        workers = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker",
                                    address, "--nworkers", "2", "--nthreads", "1",
                                    "--no-dashboard"], env=env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, start_new_session=True)
        monkeypatch.setattr(partial.PartialStore, "save", save_then_lose_the_scheduler)
        capsys.readouterr()
        code = main([*argv, "--scheduler", address])
        monkeypatch.undo()
        err = _one_line(capsys, code, f"lost the Dask scheduler at {address}",
                        "give the same command again")
        kept = list(tmp_path.glob(".grid.nc.partial-*/*.npz"))
        assert 1 <= len(kept) < 6, err
        assert f"{len(kept)} finished blocks" in err
        assert not out.exists()
    finally:
        scheduler.kill()
        if workers is not None:
            os.killpg(workers.pid, signal.SIGKILL)
            workers.wait(30)
        scheduler.wait(30)
    # the same command, on a cluster that is there: only the missing blocks are drawn
    capsys.readouterr()
    assert main([*argv, "--workers", "2"]) == 0, capsys.readouterr().err
    swept = tables.read_table(out)
    _same(swept, single)
    assert f"({len(kept)} of them from the blocks an interrupted run kept)" \
        in swept.attrs["history"]
