"""Where the workers of a loopback Dask cluster (``--workers N``) run: worker i on GPU ``i mod
G`` where the machine has GPUs (:func:`worker_envs`), else a share of the cores;
:func:`quiet_start` spawns them in their own session, so Ctrl-C reaches this process alone."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess


def gpu_ids(environ=None) -> list[str]:
    """The GPUs this process may use: ``CUDA_VISIBLE_DEVICES`` where set (empty or ``-1``: none),
    else what ``nvidia-smi`` lists within 10 s. Initialises no device."""
    environ = os.environ if environ is None else environ
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [x.strip() for x in visible.split(",") if x.strip()]
        return [] if not ids or ids[0] == "-1" else ids
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run([smi, "--query-gpu=index", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [x.strip() for x in out.splitlines() if x.strip().isdigit()]


def worker_envs(workers: int, base: dict, gpus: list[str]) -> list[dict]:
    """The environment of each of ``workers`` loopback workers: ``base`` (the thread pins),
    plus, where there are ``gpus``, worker i's own GPU (module docstring)."""
    if not gpus:
        return [dict(base) for _ in range(workers)]
    shared = workers > len(gpus)
    out = []
    for i in range(workers):
        env = dict(base, CUDA_VISIBLE_DEVICES=gpus[i % len(gpus)])
        if shared:
            env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
        out.append(env)
    return out


def gpu_cluster(dist, envs: list[dict], scheduler_options: dict, silence_logs: int):
    """A loopback cluster of one single-threaded worker process per entry of ``envs``, each with its
    own environment."""
    workers = {i: {"cls": dist.Nanny,
                   "options": {"nthreads": 1, "host": "127.0.0.1", "env": env,
                               "silence_logs": silence_logs}}
               for i, env in enumerate(envs)}
    scheduler = {"cls": dist.Scheduler,
                 "options": {"host": "127.0.0.1", **scheduler_options}}
    return dist.SpecCluster(workers=workers, scheduler=scheduler, silence_logs=silence_logs)


def _spawn_in_own_session(path, args, passfds):
    """``multiprocessing.util.spawnv_passfds`` with the child in a new session; returns its pid."""
    fds = sorted({int(f) for f in passfds})
    was = [os.get_inheritable(f) for f in fds]
    try:
        for f in fds:
            os.set_inheritable(f, True)
        return os.posix_spawn(path, list(args), os.environ, setsid=True)
    finally:
        for f, w in zip(fds, was, strict=True):
            os.set_inheritable(f, w)


def _setsid_spawn() -> bool:
    """Whether :func:`_spawn_in_own_session` works here (one ``true`` spawned and reaped)."""
    true = shutil.which("true")
    if true is None:
        return False
    try:
        pid = os.posix_spawn(true, [true], os.environ, setsid=True)
        os.waitpid(pid, 0)
    except (AttributeError, NotImplementedError, OSError, TypeError):
        return False
    return True


@contextlib.contextmanager
def quiet_start():
    """The block that starts a loopback cluster: workers in their own session, a Ctrl-C meanwhile
    held and raised at the end. Outside the main thread it changes nothing."""
    import multiprocessing.util as mp_util
    import signal
    import threading

    from ..files.interrupts import deferred

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if _setsid_spawn():
        original = mp_util.spawnv_passfds
        mp_util.spawnv_passfds = _spawn_in_own_session
        try:
            with deferred():
                yield
        finally:
            mp_util.spawnv_passfds = original
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)  # the workers inherit "ignore"
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


__all__ = ["gpu_cluster", "gpu_ids", "quiet_start", "worker_envs"]
