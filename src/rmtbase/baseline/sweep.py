"""Grid sweeps of null tables as tasks on Dask distributed: each task a (cell, draw-block range,
seed) of :func:`rmtbase.baseline.tables.generate_blocks`, so the table is bit for bit
:func:`rmtbase.baseline.tables.baseline`'s whatever the workers; with ``out`` completed blocks
are kept for a rerun. :func:`network_sweep`: the same for product networks. Without Dask
:func:`sweep` raises :class:`MissingDependency`."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np

from ..errors import InputError, check_keywords, with_keywords
from .dask_client import (  # noqa: F401 - re-exported: callers import them from here
    INSTALL_DISTRIBUTED,
    NO_DASHBOARD,
    POLL_S,
    ClusterError,
    MissingDependency,
    check_scheduler,
    cluster_client,
    completed,
    require_distributed,
    result,
    worker_env,
)

#: The keywords that build a :class:`Dispatch`.
DISPATCH_FIELDS = ("scheduler", "workers", "client", "progress")


def check_blocks_per_task(per) -> int:
    """``blocks_per_task`` as an int, or a one-line :class:`InputError`."""
    if isinstance(per, bool) or not isinstance(per, int | np.integer) or per < 1:
        raise InputError(f"blocks_per_task must be a positive integer, got {per!r}")
    return int(per)


@dataclass(frozen=True)
class Dispatch:
    """Where a sweep's tasks run (one of ``scheduler``, ``workers``, ``client``) and ``progress`` (a
    bar over the tasks, or a reporter)."""

    scheduler: str | None = None
    workers: int | None = None
    client: object = None
    progress: object = True


def dispatch_of(dispatch: Dispatch | None, options: dict, caller: str) -> Dispatch:
    """``dispatch`` (None: in-process defaults) with the :class:`Dispatch` fields ``options``
    names, which are taken out of ``options``; InputError for a ``dispatch`` of another type."""
    where = {f: options.pop(f) for f in DISPATCH_FIELDS if f in options}
    return with_keywords(Dispatch, dispatch, where, caller)


def run_jobs(jobs, fn, dispatch: Dispatch, on_complete=None):
    """Compute the missing blocks of ``jobs`` as Dask tasks ``fn(job, start, stop)``;
    ``on_complete(job)`` runs as each job's last block arrives (at once for jobs stored whole).
    Returns the number of tasks run."""
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


def sweep(d, d_h, *, dispatch: Dispatch | None = None, spec=None, blocks_per_task: int = 1,
          out=None, resume: bool = True, **options):
    """Null table over ``d`` × ``d_h`` (cells with d_h ≤ d) as Dask tasks of ``blocks_per_task``
    blocks. ``dispatch``: where the tasks run (:class:`Dispatch`: give one of ``scheduler``,
    ``workers`` or ``client``; ``progress``); ``spec`` and the other ``options``:
    :func:`rmtbase.baseline.tables.baseline`'s; ``options`` may also name the dispatch's
    fields. Returns the Dataset, written atomically to ``out`` if given (``resume`` keeps
    finished blocks)."""
    from functools import partial

    from .table_dataset import assemble
    from .tables import (
        check_cells,
        check_output_file,
        grid_cells,
        spec_with,
        table_size,
        write_table,
    )

    where = dispatch_of(dispatch, options, "sweep")
    scheduler, client = where.scheduler, where.client
    spec = spec_with(spec, options, "sweep")
    cells = grid_cells(d, d_h)
    # memory is checked here only for local workers; remote workers check their own
    check_cells(spec, cells, memory=scheduler is None and client is None)
    per = check_blocks_per_task(blocks_per_task)
    check_scheduler(scheduler)  # an address nothing answers at: one line before any work
    store = None
    if out is not None:
        out = check_output_file(out, size=2 * table_size(spec, cells))
        if resume:
            from .partial import PartialStore

            store = PartialStore(out, spec)
    if client is None:
        require_distributed()
    from .block_jobs import BlockJobs, job_blocks

    jobs = BlockJobs({(0, *cell): (spec, cell, store) for cell in cells}, per)
    with keeping([store]):  # a lost cluster: the blocks that arrived are kept, and said
        n_tasks = run_jobs(jobs, partial(job_blocks, {0: spec}), where)
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


def kept_blocks(*stores) -> str:
    """``"; N finished blocks of 250 draws are kept in FOLDER: give the same command again …"``
    for the partial stores of a run that lost its cluster; without a store (no ``out``, or
    ``resume=False``) that none were kept."""
    from .tables import DRAW_BLOCK

    stores = [s for s in stores if s is not None and s.enabled]
    if not stores:
        return "; no finished blocks were kept to continue from"
    n = sum(s.blocks() for s in stores)
    where = stores[0].dir.parent
    return (f"; {n} finished blocks of {DRAW_BLOCK} draws are kept in {where}: give the same command "
            "again to continue from them")


@contextlib.contextmanager
def keeping(stores, said=lambda: ""):
    """A :class:`ClusterError` inside, raised again naming what the run kept: ``said()`` and the
    finished blocks of ``stores`` (:func:`kept_blocks`), from which the same call continues."""
    try:
        yield
    except ClusterError as exc:
        raise ClusterError(f"{exc}{said()}{kept_blocks(*stores)}") from None


def _run_tasks(tasks, fn, dispatch: Dispatch, take=None):
    """{(cell, start): fn(cell, start, stop)} computed as Dask tasks (with ``take``, each result
    handed to ``take((cell, start), result)`` as it arrives and nothing kept)."""
    from ..files.interrupts import fault_point
    from .tables import _progress

    if dispatch.client is None:
        require_distributed()
    parts = {}
    with cluster_client(dispatch.scheduler, dispatch.workers, dispatch.client) as c, \
            _progress(len(tasks), dispatch.progress, "rmtbase sweep", unit="task") as bar:
        futures = {c.submit(fn, cell, start, stop, pure=False): (cell, start)
                   for cell, start, stop in tasks}
        fault_point("tasks:submitted")
        with contextlib.closing(completed(futures, c)) as finished:
            for fut in finished:
                if take is None:
                    parts[futures[fut]] = result(fut)
                else:
                    take(futures[fut], result(fut))
                bar.update(1)
    return parts


def _network_blocks(spec, gains, d, start, stop):
    from .network_tables import generate_network_blocks

    return generate_network_blocks(spec, d, gains, start, stop)


def network_sweep(d, depth, gain=1.0, *, dispatch: Dispatch | None = None,
                  blocks_per_task: int = 1, out=None, **options):
    """Product-network table over ``d``, ``depth`` and ``gain`` as Dask tasks of ``blocks_per_task``
    blocks of one width: :func:`rmtbase.baseline.network_tables.network_table`'s Dataset
    (``history`` aside), written atomically to ``out`` when given. ``dispatch``: as
    :func:`sweep`'s; ``options``: its fields and :func:`~.network_spec.make_network_spec`'s
    ``kind``, ``draws``, ``seed``, ``stats``, ``chunk_size``."""
    from functools import partial

    from .network_spec import NETWORK_KEYWORDS, check_network_cells
    from .network_tables import assemble_network, make_network_spec, network_grid
    from .table_file import check_output_file, table_bytes, write_table

    where = dispatch_of(dispatch, options, "network_sweep")
    check_keywords(options, NETWORK_KEYWORDS, "network_sweep")
    spec = make_network_spec(depth=depth, **options)
    widths, gains = network_grid(d, gain)
    check_network_cells(spec.kind, widths, spec.depths, gains)  # before any cluster starts
    if out is not None:
        n_values = len(widths) * len(spec.depths) * len(gains) * spec.draws * 32
        out = check_output_file(out, size=table_bytes(n_values, 8))
    per = check_blocks_per_task(blocks_per_task)
    check_scheduler(where.scheduler)  # an address nothing answers at: one line before any work
    tasks = [(w, a, min(a + per, spec.n_blocks()))
             for w in widths for a in range(0, spec.n_blocks(), per)]
    parts = _run_tasks(tasks, partial(_network_blocks, spec, gains), where)
    results = {}
    for w in widths:
        chunks = [parts[(w, start)] for (w_, start) in sorted(parts) if w_ == w]
        results[w] = {k: np.concatenate([ch[k] for ch in chunks]) for k in chunks[0]}
    ds = assemble_network(spec, widths, gains, results)
    ds.attrs["history"] = f"computed as {len(tasks)} Dask tasks of up to {per} blocks"
    if out is not None:
        write_table(ds, out)
    return ds


__all__ = ["DISPATCH_FIELDS", "INSTALL_DISTRIBUTED", "NO_DASHBOARD", "POLL_S", "ClusterError",
           "Dispatch", "MissingDependency", "check_blocks_per_task", "check_scheduler",
           "cluster_client", "completed", "dispatch_of", "keeping", "kept_blocks", "network_sweep",
           "require_distributed", "result", "run_jobs", "sweep", "worker_env"]
