"""JAX samplers of the null ensembles (pure functions of explicit keys) and the chunked driver.

Every sampler is a pure function ``f(key, ...) -> array``: jit- and vmap-able, no global state.
Sub-keys are derived **by name** (:func:`named_key`, ``fold_in`` with a fixed CRC-32 of the
name), so adding a new named stream never changes the numbers of the existing ones.

Shapes follow ``docs/conventions.md``: W_Q, W_K are ``(d_h, d)`` with i.i.d. N(0, σ²) entries
(σ the entry standard deviation); W_QK = W_Qᵀ W_K.

Residual-path products (seed 004; Veit, Wilber & Belongie 2016): M_L = (I + W_L)⋯(I + W_1) with
W_l i.i.d. N(0, σ²) entries. Expanding the product gives a sum over the 2^L paths; each path
through j blocks contributes (σ² d)^j to E‖M x‖²/‖x‖², so E‖M_L x‖² = (1 + σ² d)^L ‖x‖² and
E[M Mᵀ] = (1 + σ² d)^L I. The default critical σ² = 1/d makes every path length contribute
equally (growth exactly 2 per layer, finite for every depth: neither vanishing nor exploding
paths); any other σ² > 0 is allowed.

:func:`map_draws` runs ``fn(key_i)`` for draws i = 0..n−1 with key_i = ``fold_in(key, i)``, in
chunks (bounded memory), sharded over the draw axis when JAX sees several devices; draw i gets
the same key whatever the chunk size or device count.
"""

from __future__ import annotations

import zlib
from functools import lru_cache

import jax
import jax.numpy as jnp
import numpy as np

from .errors import InputError, check_dims, check_positive_int, check_sigma


def named_key(key, name: str):
    """Sub-key of ``key`` for the named stream ``name`` (``fold_in`` with CRC-32 of the name)."""
    return jax.random.fold_in(key, zlib.crc32(name.encode()) & 0x7FFFFFFF)


def gaussian(key, shape, sigma=1.0, dtype=jnp.float32):
    """i.i.d. N(0, σ²) array of ``shape`` (σ the entry standard deviation)."""
    return sigma * jax.random.normal(key, tuple(shape), dtype)


def lowrank_factors(key, d, d_h, sigma_q=1.0, sigma_k=1.0, dtype=jnp.float32):
    """One draw of the low-rank head: (W_Q, W_K), each ``(d_h, d)`` with i.i.d. N(0, σ²) entries.

    W_Q uses ``named_key(key, "wq")``, W_K ``named_key(key, "wk")``. Batch with
    ``vmap(lambda k: lowrank_factors(k, d, d_h))(keys)``.
    """
    d, d_h = check_dims(d, d_h)
    wq = gaussian(named_key(key, "wq"), (d_h, d), sigma_q, dtype)
    wk = gaussian(named_key(key, "wk"), (d_h, d), sigma_k, dtype)
    return wq, wk


def _residual_args(d, depth, sigma2):
    d = check_positive_int(d, "d")
    depth = check_positive_int(depth, "depth")
    s2 = 1.0 / d if sigma2 is None else check_sigma(sigma2, "sigma2")
    return d, depth, s2


def _layer_noise(key, layer, d, s2, dtype):
    """W_layer (1-based layer index) of the residual product: N(0, s2) entries."""
    return jnp.sqrt(jnp.asarray(s2, dtype)) * jax.random.normal(
        jax.random.fold_in(named_key(key, "layers"), layer), (d, d), dtype)


def residual_product(key, d, depth, sigma2=None, dtype=jnp.float32):
    """M_L = (I + W_L)⋯(I + W_1), ``(d, d)``; W_l entries N(0, sigma2), default sigma2 = 1/d.

    W_l uses ``fold_in(named_key(key, "layers"), l)`` (l = 1..L), so M_L for different depths
    from the same key share their first layers. E[M Mᵀ] = (1 + sigma2·d)^L I (2^L at the
    critical default). Cost O(L d³).
    """
    d, depth, s2 = _residual_args(d, depth, sigma2)

    def step(m, layer):
        return m + _layer_noise(key, layer, d, s2, dtype) @ m, None

    m, _ = jax.lax.scan(step, jnp.eye(d, dtype=dtype), jnp.arange(1, depth + 1))
    return m


def residual_rows(key, d, depth, rows, sigma2=None, dtype=jnp.float32):
    """The first ``rows`` rows of :func:`residual_product` (same key: same matrix), O(L rows d²).

    Computed as E (I + W_L)⋯(I + W_1) with E the first ``rows`` rows of the identity.
    """
    d, depth, s2 = _residual_args(d, depth, sigma2)
    rows = check_positive_int(rows, "rows")
    if rows > d:
        raise InputError(f"rows must not exceed d, got rows={rows}, d={d}")

    def step(r, layer):
        return r + r @ _layer_noise(key, layer, d, s2, dtype), None

    r, _ = jax.lax.scan(step, jnp.eye(rows, d, dtype=dtype), jnp.arange(depth, 0, -1))
    return r


def residual_stream(key, d, depth, sigma2=None, dtype=jnp.float32):
    """Residual-stream output M_L x for x ~ N(0, I_d) (``named_key(key, "x")``), ``(d,)``.

    Same W_l as :func:`residual_product` with the same key; x_l = x_{l-1} + W_l x_{l-1},
    O(L d²). E‖M_L x‖² = (1 + sigma2·d)^L d.
    """
    d, depth, s2 = _residual_args(d, depth, sigma2)
    x0 = jax.random.normal(named_key(key, "x"), (d,), dtype)

    def step(x, layer):
        return x + _layer_noise(key, layer, d, s2, dtype) @ x, None

    x, _ = jax.lax.scan(step, x0, jnp.arange(1, depth + 1))
    return x


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
    :func:`rmtbase.null.null_draws` block by block) compile once.
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
