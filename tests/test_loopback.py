"""A loopback cluster puts one worker on each GPU where there are GPUs
(:mod:`rmtbase.baseline.loopback`); the GPU ids come from ``CUDA_VISIBLE_DEVICES`` or
``nvidia-smi``, so the assignment is tested here without a GPU."""

from __future__ import annotations

import os

import numpy as np
import pytest

from rmtbase.baseline.loopback import gpu_ids, worker_envs


@pytest.mark.parametrize("visible, ids", [("0,1", ["0", "1"]), ("2", ["2"]), ("", []),
                                          ("-1", []), (" 3 , 5 ", ["3", "5"]),
                                          ("GPU-8f2e", ["GPU-8f2e"])])
def test_gpu_ids_follow_cuda_visible_devices(visible, ids):
    assert gpu_ids({"CUDA_VISIBLE_DEVICES": visible}) == ids


def test_no_nvidia_smi_no_gpus(monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: None)
    assert gpu_ids({}) == []


def test_nvidia_smi_lists_the_gpus(monkeypatch, tmp_path):
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\nprintf '0\\n1\\n2\\n'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert gpu_ids({}) == ["0", "1", "2"]
    smi.write_text("#!/bin/sh\nexit 9\n")  # a failing nvidia-smi: no GPUs, no error
    assert gpu_ids({}) == []


def test_one_worker_per_gpu():
    base = {"OMP_NUM_THREADS": "1"}
    envs = worker_envs(2, base, ["0", "1"])
    assert [e["CUDA_VISIBLE_DEVICES"] for e in envs] == ["0", "1"]
    assert all(e["OMP_NUM_THREADS"] == "1" and "XLA_PYTHON_CLIENT_PREALLOCATE" not in e
               for e in envs)
    shared = worker_envs(3, base, ["0", "1"])  # more workers than GPUs: they share memory
    assert [e["CUDA_VISIBLE_DEVICES"] for e in shared] == ["0", "1", "0"]
    assert all(e["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false" for e in shared)
    assert worker_envs(2, base, []) == [base, base]


@pytest.mark.slow
def test_a_sweep_on_per_gpu_workers_is_the_one_process_table(monkeypatch):
    """With two (pretend) GPUs visible, ``--workers 2`` starts one worker per GPU, each seeing
    only its own, and their sweep is the one-process table bit for bit (JAX here is CPU-only,
    so the variable changes only where they would run on a GPU machine)."""
    pytest.importorskip("distributed")
    from rmtbase.baseline.sweep import cluster_client, sweep
    from rmtbase.baseline.tables import baseline

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    with cluster_client(workers=2) as c:
        seen = sorted(c.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES")).values())
        ds = sweep(24, 4, client=c, draws=300, stats="spectral", progress=False)
    assert seen == ["0", "1"]
    one = baseline(24, 4, draws=300, stats="spectral", progress=False)
    for v in one.data_vars:
        # exact: the same compiled programs (fixed batch width) and keys, in a Dask task on this CPU
        #  instead of this process
        np.testing.assert_array_equal(ds[v].values, one[v].values, err_msg=v)


def test_quiet_start_spawns_in_a_new_session_and_falls_back_to_ignoring(monkeypatch):
    """Inside ``quiet_start`` multiprocessing spawns through ``_spawn_in_own_session`` (a
    spawned child is its own session leader, its passed pipe works) and SIGINT is held; where
    setsid spawning is unavailable, SIGINT is ignored for the block instead (the former way);
    both restore what they changed."""
    import multiprocessing.util as mp_util
    import signal
    import sys

    from rmtbase.baseline import loopback

    if not loopback._setsid_spawn():
        pytest.skip("no POSIX_SPAWN_SETSID here")
    spawn = mp_util.spawnv_passfds
    r, w = os.pipe()
    try:
        with loopback.quiet_start():
            assert mp_util.spawnv_passfds is loopback._spawn_in_own_session
            code = f"import os; os.write({w}, str(os.getsid(0) == os.getpid()).encode())"
            pid = mp_util.spawnv_passfds(sys.executable, [sys.executable, "-c", code], [w])
            assert os.waitpid(pid, 0)[1] == 0
            assert not os.get_inheritable(w)  # made inheritable for the spawn only
        os.close(w)
        w = None
        assert os.read(r, 16) == b"True"
    finally:
        os.close(r)
        if w is not None:
            os.close(w)
    assert mp_util.spawnv_passfds is spawn
    monkeypatch.setattr(loopback, "_setsid_spawn", lambda: False)
    with loopback.quiet_start():
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert mp_util.spawnv_passfds is spawn
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
