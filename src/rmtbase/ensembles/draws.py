"""The chunked draw driver: ``map_draws(fn, key, n_draws)`` runs a per-draw sampler in batches.

:func:`map_draws` runs ``fn(key_i)`` for draws i = 0..n−1 with key_i = ``fold_in(key, i)``, in
chunks (bounded memory), sharded over the draw axis when JAX sees several accelerator devices;
draw i gets the same key whatever the chunk size or device count.
"""

from __future__ import annotations

from functools import lru_cache

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import InputError, check_positive_int

_fold = jax.jit(jax.vmap(jax.random.fold_in, in_axes=(None, 0)))  # keys of a chunk of draws


def _draw_devices() -> tuple:
    """Devices a chunk is sharded over: all accelerators, but one device on CPU.

    Several CPU devices (``--xla_force_host_platform_device_count`` or ``jax_num_cpu_devices``)
    are not used: with jaxlib's CPU runtime, concurrent executions that contain LAPACK calls
    (SVD, tridiagonalisation) deadlock on a small host (reproduced on 2 cores, jax 0.10.2:
    ``null_draws(..., stats="spectral")`` hangs with two CPU devices and runs with one).
    """
    if jax.default_backend() == "cpu":
        return tuple(jax.devices()[:1])
    return tuple(jax.devices())


@lru_cache(maxsize=64)
def _chunk_runner(fn, chunk: int, method: str, devices: tuple):
    """jit-compiled ``keys (chunk,) -> pytree`` over the draw axis, sharded if several devices.

    ``check_vma=False``: per-draw ``while_loop`` carries (the χ² sampler) start replicated and
    become draw-varying, which the default check rejects; every draw is independent, so
    nothing is communicated across the shards.

    Cached on (fn, chunk, method, devices): repeated calls with the same draw function (e.g.
    :func:`rmtbase.baseline.null.null_draws` block by block) compile once.
    """
    inner = jax.vmap(fn) if method == "vmap" else (lambda ks: jax.lax.map(fn, ks))
    if len(devices) > 1 and chunk % len(devices) == 0:
        from jax.sharding import Mesh, PartitionSpec

        mesh = Mesh(np.array(devices), ("draw",))
        inner = jax.shard_map(inner, mesh=mesh, in_specs=PartitionSpec("draw"),
                              out_specs=PartitionSpec("draw"), check_vma=False)
    return jax.jit(inner)


def map_draws(fn, key, n_draws, chunk_size=None, *, method="vmap", progress=False):
    """Run ``fn(key_i)`` for i = 0..n_draws−1, key_i = ``fold_in(key, i)``; numpy pytree out.

    fn: pure function of one key returning a pytree of arrays. chunk_size: draws per compiled
    call (default min(n_draws, 256)); rounded up to a multiple of the device count, the last
    chunk padded (extra draws discarded) so one compilation serves all chunks. method:
    ``"vmap"`` (vectorise a chunk; best on accelerators) or ``"map"`` (loop inside the chunk;
    best for scatter-heavy element statistics on CPU). Results have a leading axis n_draws and
    do not depend on chunk_size: draw i is a function of fold_in(key, i) only. progress: show a
    tqdm bar over draws.
    """
    n = check_positive_int(n_draws, "n_draws")
    if method not in ("vmap", "map"):
        raise InputError(f"method must be 'vmap' or 'map', got {method!r}")
    chunk = min(n, 256) if chunk_size is None else min(check_positive_int(chunk_size, "chunk_size"), n)
    devices = _draw_devices()
    chunk = -(-chunk // len(devices)) * len(devices)
    run = _chunk_runner(fn, chunk, method, devices)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=n, unit="draw")
    out = None

    def store(start, dev_res):
        nonlocal out
        res = jax.tree_util.tree_map(np.asarray, dev_res)
        take = min(chunk, n - start)
        if out is None:
            out = jax.tree_util.tree_map(lambda a: np.empty((n, *a.shape[1:]), dtype=a.dtype), res)
        for o, r in zip(jax.tree_util.tree_leaves(out), jax.tree_util.tree_leaves(res), strict=True):
            o[start:start + take] = r[:take]
        if bar is not None:
            bar.update(take)

    try:
        # One chunk in flight ahead: chunk i+1 is dispatched (asynchronously) before chunk i is
        # copied to the host, so the device never waits on the transfer. Executions still run
        # one after another (one dispatching thread), the same numbers as a plain loop.
        pending = None
        for start in range(0, n, chunk):
            nxt = (start, run(_fold(key, jnp.arange(start, start + chunk, dtype=jnp.uint32))))
            if pending is not None:
                store(*pending)
            pending = nxt
        store(*pending)
    finally:
        if bar is not None:
            bar.close()
    return out
