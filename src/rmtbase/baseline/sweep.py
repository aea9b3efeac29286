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
way (``rmtbase sweep --into-cache``). Every Dask driver waits through :func:`completed`; the
client, the loopback cluster and that wait live in :mod:`rmtbase.baseline.dask_client`.

:func:`network_sweep` does the same for product-network tables over (d, depth, gain)
(:mod:`rmtbase.baseline.network_tables`): a task is (d, range of draw blocks), all depths and
gains of a draw in one task (they are one chain and one set of normal variates); the table equals
:func:`rmtbase.baseline.network_tables.network_table`'s bit for bit.

Dask is optional (``pip install -e '.[distributed]'`` in a clone): importing this module does not import
it; :func:`sweep` raises :class:`MissingDependency` with an install hint when it is absent.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from .dask_client import (  # noqa: F401 - re-exported: callers import them from here
    INSTALL_DISTRIBUTED,
    NO_DASHBOARD,
    POLL_S,
    MissingDependency,
    _client,
    _distributed,
    completed,
    worker_env,
)


def check_blocks_per_task(per) -> int:
    """``blocks_per_task`` as an int, or a one-line :class:`InputError`."""
    if isinstance(per, bool) or not isinstance(per, int | np.integer) or per < 1:
        raise InputError(f"blocks_per_task must be a positive integer, got {per!r}")
    return int(per)


@dataclass(frozen=True)
class Dispatch:
    """Where a sweep's Dask tasks run and how they are counted: a ``scheduler`` address, a
    number of local ``workers`` or a ``client`` (one of them; :func:`_client`), and
    ``progress`` (a bar over the tasks, or a reporter of the caller's)."""

    scheduler: str | None = None
    workers: int | None = None
    client: object = None
    progress: object = True


def run_jobs(jobs, fn, dispatch: Dispatch, on_complete=None):
    """Compute the missing blocks of ``jobs`` (:class:`rmtbase.baseline.block_jobs.BlockJobs`)
    as Dask tasks ``fn(job, start, stop)`` as ``dispatch`` says; ``on_complete(job)`` is
    called as each job's last block arrives (and at once for jobs stored whole). Nothing is
    started when nothing is missing. Returns the number of tasks run."""
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

    _run_tasks(tasks, fn, dispatch, take)
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

    from .table_dataset import assemble
    from .tables import (
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
    n_tasks = run_jobs(jobs, partial(job_blocks, {0: spec}),
                       Dispatch(scheduler, workers, client, progress))
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


def _run_tasks(tasks, fn, dispatch: Dispatch, take=None):
    """{(cell, start): fn(cell, start, stop)} computed as Dask tasks as ``dispatch`` says (or,
    with ``take``, each result handed to ``take((cell, start), result)`` as it arrives and
    nothing kept)."""
    from ..files.interrupts import fault_point
    from .tables import _progress

    if dispatch.client is None:
        _distributed()
    parts = {}
    with _client(dispatch.scheduler, dispatch.workers, dispatch.client) as c, \
            _progress(len(tasks), dispatch.progress, "rmtbase sweep", unit="task") as bar:
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

    from .network_spec import check_network_cells
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
    parts = _run_tasks(tasks, partial(_network_blocks, spec, gains),
                       Dispatch(scheduler, workers, client, progress))
    results = {}
    for w in widths:
        chunks = [parts[(w, start)] for (w_, start) in sorted(parts) if w_ == w]
        results[w] = {k: np.concatenate([ch[k] for ch in chunks]) for k in chunks[0]}
    ds = assemble_network(spec, widths, gains, results)
    ds.attrs["history"] = f"computed as {len(tasks)} Dask tasks of up to {per} blocks"
    if out is not None:
        write_table(ds, out)
    return ds
