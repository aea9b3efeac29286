"""Where the workers of a loopback Dask cluster (``--workers N``) run: one GPU each where the
machine has GPUs, else a share of the cores.

On a CPU machine the N worker processes share the cores (:func:`rmtbase.baseline.sweep.
worker_env` pins their BLAS/OpenMP pools). On a machine with GPUs, N processes that each see
every GPU would all put their JAX arrays on the first one and each preallocate 75 % of its
memory (JAX's default), so the second to start fails or all crawl. :func:`gpu_ids` lists the
GPUs this process may use and :func:`worker_envs` gives worker i ``CUDA_VISIBLE_DEVICES`` =
GPU ``i mod G``: one worker per GPU when N = G (the intended use, as ``dask-cuda``'s
``LocalCUDACluster`` does it); with N > G the workers sharing a GPU get
``XLA_PYTHON_CLIENT_PREALLOCATE=false`` so that they can share its memory. The draws do not
depend on which device computes them beyond the backend's own rounding (GPU = CPU is tested
on a device, ``tests/test_device.py``).
"""

from __future__ import annotations

import os
import shutil
import subprocess


def gpu_ids(environ=None) -> list[str]:
    """The GPUs this process may use: ``CUDA_VISIBLE_DEVICES`` where it is set (empty or
    ``-1``: none), else the indices ``nvidia-smi`` lists (none where it is absent or fails
    within 10 s). Nothing is imported and no device is initialised."""
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
    """A loopback cluster of one single-threaded worker process per entry of ``envs``, each
    started with its own environment (``distributed.SpecCluster`` of ``Nanny`` workers; a
    ``LocalCluster`` gives every worker the same environment)."""
    workers = {i: {"cls": dist.Nanny,
                   "options": {"nthreads": 1, "host": "127.0.0.1", "env": env,
                               "silence_logs": silence_logs}}
               for i, env in enumerate(envs)}
    scheduler = {"cls": dist.Scheduler,
                 "options": {"host": "127.0.0.1", **scheduler_options}}
    return dist.SpecCluster(workers=workers, scheduler=scheduler, silence_logs=silence_logs)


__all__ = ["gpu_cluster", "gpu_ids", "worker_envs"]
