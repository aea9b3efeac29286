"""Grid sweeps of null tables as tasks on Dask distributed.

Each task is a (cell (d, d_h), range of draw blocks, seed) triple and runs
:func:`rmtbase.baseline.tables.generate_blocks` on a worker; the key of every draw is derived from the seed
and the draw's (d, d_h, index) alone (see :mod:`rmtbase.baseline.tables`), so the table assembled here is
identical, bit for bit, to :func:`rmtbase.baseline.tables.baseline` over the same grid and seed on the same
backend, whatever the number of workers or ``blocks_per_task`` (blocks run under
``jax.enable_x64(dtype == "float64")`` everywhere, whatever a process's own JAX setting).
A task returns its σ = 1 blocks (:mod:`rmtbase.baseline.block_jobs`); with ``out`` they are
kept beside it as they arrive, so the same call after an interrupt or a kill submits only the
missing blocks. :mod:`rmtbase.baseline.sweep_cache` builds the scorer's cache tables the same
way (``rmtbase sweep --into-cache``). Every Dask driver waits through :func:`completed`.

:func:`network_sweep` does the same for product-network tables over (d, depth, gain)
(:mod:`rmtbase.baseline.network_tables`): a task is (d, range of draw blocks), all depths and
gains of a draw in one task (they are one chain and one set of normal variates); the table equals
:func:`rmtbase.baseline.network_tables.network_table`'s bit for bit.

Dask is optional (``pip install -e '.[distributed]'`` in a clone): importing this module does not import
it; :func:`sweep` raises :class:`MissingDependency` with an install hint when it is absent.
"""

from __future__ import annotations

import contextlib
import logging

import numpy as np

from ..errors import InputError, RmtbaseError

#: Scheduler options of the loopback cluster: no dashboard, and its HTTP server on a free port
#: (by default it takes 8787 and warns when another Dask or Jupyter process holds that port).
NO_DASHBOARD = {"dashboard": False, "dashboard_address": "127.0.0.1:0"}


class MissingDependency(RmtbaseError, ImportError):
    """An optional dependency (dask.distributed) is not installed."""


#: What to install for the optional extras, as it works in a clone of the repository (rmtbase
#: is not on the public package index).
INSTALL_DISTRIBUTED = "pip install -e '.[distributed]' in the rmtbase clone (or pip install 'dask[distributed]')"


def _distributed(what: str = "rmtbase sweep"):
    try:
        import distributed
    except ImportError as exc:
        raise MissingDependency(f"{what} needs dask.distributed: {INSTALL_DISTRIBUTED}") from exc
    return distributed


#: Seconds between looks at the futures while none has completed (an interrupt is noticed
#: within this, also one a library swallowed: :func:`rmtbase.files.interrupts.check`).
POLL_S = 0.1


def completed(futures, client=None, *, poll_s: float | None = None):
    """The Dask ``futures`` (an iterable or a dict keyed by them) as they complete, the one
    wait of every Dask driver (sweeps, collections: :mod:`rmtbase.scoring.trajectory`).

    The main thread never blocks inside Dask: it asks each pending future ``done()`` itself
    and sleeps ``poll_s`` (default :data:`POLL_S`) s between looks, where a Ctrl-C is raised
    at once (issue 35: under load 2 of 12 interrupts were lost with the main thread idle in
    ``as_completed``). When the generator ends early — ``KeyboardInterrupt``, an error in a
    task's result or the caller's loop, or ``close()`` — the tasks still pending are
    cancelled through ``client`` (default: the futures' own ``client``), so a cluster is
    not left computing for nobody; close it with :func:`contextlib.closing` where the loop
    may be left by ``break``."""
    import time

    from ..files.interrupts import check

    pending = list(dict.fromkeys(futures))
    poll_s = POLL_S if poll_s is None else float(poll_s)
    try:
        while pending:
            done = [f for f in pending if f.done()]
            if not done:
                check()
                time.sleep(poll_s)
                continue
            for f in done:
                pending.remove(f)
                yield f
    finally:
        if pending:
            _cancel(pending, client)


def _cancel(futures, client) -> None:
    """Cancel ``futures`` (best effort: a closed client has nothing left to cancel)."""
    client = client if client is not None else getattr(futures[0], "client", None)
    if client is None:
        return
    try:
        client.cancel(list(futures), force=True)
    except Exception:  # noqa: BLE001 - the scheduler may be gone already; nothing to stop
        pass


def worker_env(workers: int, cores: int | None = None) -> dict:
    """Environment of a loopback worker process: BLAS/OpenMP pools of its share of the cores
    (N processes that each start a pool of every core would oversubscribe the machine N
    times). XLA's own CPU pool is left as it is: ``--xla_cpu_multi_thread_eigen=false``
    changes float32 results in the last bits (119 of 300 NPR draws at 16 × 4, measured), and
    a sweep or collection must equal one process bit for bit."""
    import os

    share = max(1, (cores or os.cpu_count() or 1) // max(1, int(workers)))
    return {k: str(share) for k in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                                    "OMP_NUM_THREADS")}


def _check_address(scheduler) -> None:
    """InputError unless ``scheduler`` parses as a Dask address of a known scheme. Checked
    before ``Client``: a Client that fails on a malformed address stays registered as the
    process's default client and breaks later dask-aware calls (xarray's ``to_netcdf``)."""
    from distributed.comm.addressing import parse_address, parse_host_port
    from distributed.comm.registry import get_backend

    try:
        proto, loc = parse_address(str(scheduler))
        get_backend(proto)
        if proto in ("tcp", "tls"):
            parse_host_port(loc)
    except (ValueError, TypeError) as exc:
        why = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputError(f"{scheduler!r} is not a Dask scheduler address such as "
                         f"tcp://host:8786 ({why})") from None


@contextlib.contextmanager
def _client(scheduler=None, workers=None, client=None):
    """A Client: the one given, one connected to ``scheduler``, or a loopback cluster of
    ``workers`` processes with one thread each (closed on exit), each on its own GPU where
    the machine has GPUs (:mod:`rmtbase.baseline.loopback`)."""
    if client is not None:
        yield client
        return
    if (scheduler is None) == (workers is None):
        raise InputError("give exactly one of a scheduler address or a number of workers")
    dist = _distributed()
    if scheduler is not None:
        _check_address(scheduler)
        try:
            c = dist.Client(scheduler, timeout="20s")
        except (OSError, TimeoutError, ValueError, TypeError) as exc:  # ValueError: not an address
            why = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise InputError(f"cannot connect to the Dask scheduler at {scheduler}: {why}") from exc
        with c:
            yield c
        return
    if isinstance(workers, bool) or not isinstance(workers, int | np.integer) or workers < 1:
        raise InputError(f"workers must be a positive integer, got {workers!r}")
    from .loopback import gpu_cluster, gpu_ids, quiet_start, worker_envs

    gpus = gpu_ids()
    cluster = None
    try:
        with quiet_start():  # workers in their own session; a Ctrl-C meanwhile is held
            cluster = gpu_cluster(dist, worker_envs(int(workers), worker_env(workers), gpus),
                                  NO_DASHBOARD, logging.CRITICAL) if gpus else \
                dist.LocalCluster(n_workers=int(workers), threads_per_worker=1,
                                  processes=True, host="127.0.0.1", dashboard_address=None,
                                  scheduler_kwargs=NO_DASHBOARD,
                                  silence_logs=logging.CRITICAL, env=worker_env(workers))
    except KeyboardInterrupt:  # held through the start: the cluster is whole, close it
        if cluster is not None:
            cluster.close()
        raise
    with cluster, dist.Client(cluster) as c:
        yield c


def check_blocks_per_task(per) -> int:
    """``blocks_per_task`` as an int, or a one-line :class:`InputError`."""
    if isinstance(per, bool) or not isinstance(per, int | np.integer) or per < 1:
        raise InputError(f"blocks_per_task must be a positive integer, got {per!r}")
    return int(per)


def run_jobs(jobs, fn, scheduler, workers, client, progress, on_complete=None):
    """Compute the missing blocks of ``jobs`` (:class:`rmtbase.baseline.block_jobs.BlockJobs`)
    as Dask tasks ``fn(job, start, stop)``; ``on_complete(job)`` is called as each job's last
    block arrives (and at once for jobs stored whole). Nothing is started when nothing is
    missing. Returns the number of tasks run."""
    tasks = jobs.tasks()
    if on_complete is not None:
        for job in jobs.jobs:
            if jobs.complete(job):
                on_complete(job)
    if not tasks:
        return 0

    def take(key, result):
        if jobs.add(key[0], key[1], result) and on_complete is not None:
            on_complete(key[0])

    _run_tasks(tasks, fn, scheduler, workers, client, progress, take)
    return len(tasks)


def sweep(d, d_h, *, scheduler: str | None = None, workers: int | None = None, client=None,
          blocks_per_task: int = 1, out=None, progress: bool = True, resume: bool = True,
          **options):
    """Null table over the grid ``d`` × ``d_h`` (ints or sequences; cells with d_h ≤ d), computed
    as Dask tasks. ``options`` are those of :func:`rmtbase.baseline.tables.baseline` (``sigma``,
    ``sigma_q``, ``sigma_k``, ``ensemble``, ``draws``, ``seed``, ``stats``, ``depth``, ``dtype``,
    ``chunk_size``, ``storage``). Give one of ``scheduler`` (address), ``workers`` (local
    processes) or a ``client``. Each task computes ``blocks_per_task`` blocks of
    :data:`rmtbase.baseline.tables.DRAW_BLOCK` = 250 draws of one cell. Returns the Dataset, written
    atomically to ``out`` when given; with ``resume``, the blocks of finished tasks are kept
    beside ``out`` as they arrive (the store of ``rmtbase baseline``,
    :mod:`rmtbase.baseline.partial`), so the same call after an interrupt submits only the
    missing ones and writes the same table. For the scorer's cache tables see
    :func:`rmtbase.baseline.sweep_cache.sweep_into_cache`."""
    from functools import partial

    from .tables import (
        assemble,
        check_cells,
        check_output_file,
        grid_cells,
        make_spec,
        table_size,
        write_table,
    )

    spec = make_spec(**options)
    cells = grid_cells(d, d_h)
    # memory is checked here only for local workers; remote workers check their own
    check_cells(spec, cells, memory=scheduler is None and client is None)
    per = check_blocks_per_task(blocks_per_task)
    store = None
    if out is not None:
        out = check_output_file(out, size=2 * table_size(spec, cells))
        if resume:
            from .partial import PartialStore

            store = PartialStore(out, spec)
    if client is None:
        _distributed()
    from .block_jobs import BlockJobs, job_blocks

    jobs = BlockJobs({(0, *cell): (spec, cell, store) for cell in cells}, per)
    n_tasks = run_jobs(jobs, partial(job_blocks, {0: spec}), scheduler, workers, client,
                       progress)
    ds = assemble(spec, cells, {cell: jobs.draws((0, *cell)) for cell in cells})
    n_all = len(cells) * -(-spec.n_blocks() // per)
    ds.attrs["history"] = f"computed as {n_all} Dask tasks of up to {per} blocks" + (
        f" ({n_all - n_tasks} of them from the blocks an interrupted run kept)"
        if n_tasks < n_all else "")
    if out is not None:
        write_table(ds, out)
        if store is not None:
            store.finish()
    return ds


def _run_tasks(tasks, fn, scheduler, workers, client, progress, take=None):
    """{(cell, start): fn(cell, start, stop)} computed as Dask tasks (or, with ``take``, each
    result handed to ``take((cell, start), result)`` as it arrives and nothing kept)."""
    from ..files.interrupts import fault_point
    from .tables import _progress

    if client is None:
        _distributed()
    parts = {}
    with _client(scheduler, workers, client) as c, \
            _progress(len(tasks), progress, "rmtbase sweep", unit="task") as bar:
        futures = {c.submit(fn, cell, start, stop, pure=False): (cell, start)
                   for cell, start, stop in tasks}
        fault_point("tasks:submitted")
        with contextlib.closing(completed(futures, c)) as finished:
            for fut in finished:
                if take is None:
                    parts[futures[fut]] = fut.result()
                else:
                    take(futures[fut], fut.result())
                bar.update(1)
    return parts


def _network_blocks(spec, gains, d, start, stop):
    from .network_tables import generate_network_blocks

    return generate_network_blocks(spec, d, gains, start, stop)


def network_sweep(d, depth, gain=1.0, *, kind="residual", draws=200, seed=0, stats="all",
                  chunk_size=None, scheduler: str | None = None, workers: int | None = None,
                  client=None, blocks_per_task: int = 1, out=None, progress: bool = True):
    """Product-network table over widths ``d``, depths ``depth`` and gains ``gain`` computed as
    Dask tasks of ``blocks_per_task`` blocks of 250 draws of one width; the same Dataset as
    :func:`rmtbase.baseline.network_tables.network_table` with the same arguments (``history``
    attribute aside), written atomically to ``out`` when given."""
    from functools import partial

    from .limits import check_network_cells
    from .network_tables import assemble_network, make_network_spec, network_grid
    from .table_file import check_output_file, table_bytes, write_table

    spec = make_network_spec(kind=kind, depth=depth, draws=draws, seed=seed, stats=stats,
                             chunk_size=chunk_size)
    widths, gains = network_grid(d, gain)
    check_network_cells(spec.kind, widths, spec.depths, gains)  # before any cluster starts
    if out is not None:
        n_values = len(widths) * len(spec.depths) * len(gains) * spec.draws * 32
        out = check_output_file(out, size=table_bytes(n_values, 8))
    per = check_blocks_per_task(blocks_per_task)
    tasks = [(w, a, min(a + per, spec.n_blocks()))
             for w in widths for a in range(0, spec.n_blocks(), per)]
    parts = _run_tasks(tasks, partial(_network_blocks, spec, gains), scheduler, workers, client,
                       progress)
    results = {}
    for w in widths:
        chunks = [parts[(w, start)] for (w_, start) in sorted(parts) if w_ == w]
        results[w] = {k: np.concatenate([ch[k] for ch in chunks]) for k in chunks[0]}
    ds = assemble_network(spec, widths, gains, results)
    ds.attrs["history"] = f"computed as {len(tasks)} Dask tasks of up to {per} blocks"
    if out is not None:
        write_table(ds, out)
    return ds
