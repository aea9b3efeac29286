"""The chunked draw driver: ``map_draws(fn, key, n_draws)`` runs a per-draw sampler in batches.

Draw i gets key ``fold_in(key, i)`` whatever the chunk size or device count; chunks bound the
memory and are sharded over several accelerators. With ``method="vmap"`` every compiled
evaluation vectorises exactly ``batch`` draws (the last padded), so draw i is the same bits in
every call; ``method="map"`` compiles the one-draw function once as a loop body."""

from __future__ import annotations

from functools import lru_cache

import jax
import jax.numpy as jnp
import numpy as np

from .._compiled import many_calls
from ..errors import InputError, check_positive_int
from .threefry import fold_in_words

_fold = jax.jit(jax.vmap(jax.random.fold_in, in_axes=(None, 0)))  # keys of a chunk of draws


def _chunk_keys(key, start: int, size: int):
    """``fold_in(key, i)`` for i = start … start + size − 1, of ``key``'s kind; a threefry key's
    are hashed on the host (:func:`rmtbase.ensembles.threefry.fold_in_words`), others by JAX."""
    words = fold_in_words(key, np.arange(start, start + size, dtype=np.uint32))
    if words is None:
        return _fold(key, jnp.arange(start, start + size, dtype=jnp.uint32))
    words = jax.device_put(words)  # (jnp.asarray would compile a 'stage' program per shape)
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        return jax.random.wrap_key_data(words, impl="threefry2x32")
    return words


def _draw_devices() -> tuple:
    """Devices a chunk is sharded over: all accelerators, but one device on CPU (concurrent CPU
    executions with LAPACK calls deadlock on a small host)."""
    if jax.default_backend() == "cpu":
        return tuple(jax.devices()[:1])
    return tuple(jax.devices())


def _batched(fn, width: int):
    """``keys (m·width,) -> pytree``: ``vmap(fn)`` over batches of exactly ``width`` keys, looped
    with ``lax.map`` when m > 1 (each batch is then the same computation as a lone one)."""
    one = jax.vmap(fn)

    def inner(ks):
        m = ks.shape[0] // width
        if m == 1:
            return one(ks)
        out = jax.lax.map(one, ks.reshape(m, width, *ks.shape[1:]))
        return jax.tree_util.tree_map(lambda a: a.reshape(m * width, *a.shape[2:]), out)
    return inner


@lru_cache(maxsize=64)
def _chunk_runner(fn, chunk: int, method: str, devices: tuple, width: int | None = None):
    """jit-compiled ``keys (chunk,) -> pytree`` over the draw axis, sharded if several devices.

    ``check_vma=False``: per-draw ``while_loop`` carries become draw-varying; draws are
    independent, nothing crosses shards. ``width`` (``"vmap"``): draws per vectorised batch per
    device. Cached on (fn, chunk, method, devices, width)."""
    if method == "vmap":
        inner = _batched(fn, width or max(1, chunk // len(devices)))
    else:
        inner = lambda ks: jax.lax.map(fn, ks)  # noqa: E731
    if len(devices) > 1 and chunk % len(devices) == 0:
        from jax.sharding import Mesh, PartitionSpec

        mesh = Mesh(np.array(devices), ("draw",))
        inner = jax.shard_map(inner, mesh=mesh, in_specs=PartitionSpec("draw"),
                              out_specs=PartitionSpec("draw"), check_vma=False)
    return jax.jit(inner, compiler_options=many_calls())


#: Default vectorised width of ``method="vmap"`` (see the module docstring).
DEFAULT_BATCH = 128


def map_draws(fn, key, n_draws, chunk_size=None, *, method="vmap", batch=None, progress=False):
    """Run ``fn(key_i)`` for i = 0..n_draws−1, key_i = ``fold_in(key, i)``; numpy pytree out.

    fn: pure function of one key returning a pytree of arrays. method: ``"vmap"`` (accelerators,
    spectral fast path) or ``"map"`` (a loop per compiled call; scatter-heavy work on CPU). batch
    (``"vmap"``): fixed vectorised width per device. chunk_size: draws per compiled call, rounded
    up to a multiple of batch × devices (``"vmap"``) or of the device count (``"map"``, default
    min(n_draws, 256)). progress: ``True`` for :func:`rmtbase.progress.progress_bar`'s policy, or
    an object with ``update(n)``. Results have a leading axis n_draws."""
    n = check_positive_int(n_draws, "n_draws")
    if method not in ("vmap", "map"):
        raise InputError(f"method must be 'vmap' or 'map', got {method!r}")
    devices = _draw_devices()
    if method == "vmap":
        width = DEFAULT_BATCH if batch is None else check_positive_int(batch, "batch")
        unit = width * len(devices)
        chunk = unit if chunk_size is None else check_positive_int(chunk_size, "chunk_size")
        chunk = -(-min(chunk, -(-n // unit) * unit) // unit) * unit
    else:
        width = None
        chunk = min(n, 256) if chunk_size is None else check_positive_int(chunk_size, "chunk_size")
        chunk = -(-chunk // len(devices)) * len(devices)
    run = _chunk_runner(fn, chunk, method, devices, width)
    own_bar = progress is None or isinstance(progress, bool | int)
    if own_bar:
        from ..progress import progress_bar

        bar = progress_bar(n, desc="rmtbase draws", unit="draw", enabled=bool(progress))
    else:
        bar = progress  # the caller's reporter
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
            nxt = (start, run(_chunk_keys(key, start, chunk)))
            if pending is not None:
                store(*pending)
            pending = nxt
        store(*pending)
    finally:
        if own_bar:
            bar.close()
    return out
