"""Work that a Dask task spreads over its own cluster: the null table (and the profile null) a
score needs, drawn by every worker rather than by the one that scores.

A collection scored as Dask tasks (``rmtbase score A B … --workers N``,
:mod:`rmtbase.scoring.trajectory`) scores the first entry of a new shape alone, so that its null
tables are cached before the entries that share them start. :func:`rmtbase.baseline.cache.null_table`
and :func:`rmtbase.scoring.profile.profile_null`, when they run inside a Dask task, hand their
blocks of draws to the task's cluster through :func:`task_client` (``distributed.worker_client``:
the task secedes from its worker's thread pool while it waits, so that worker computes blocks
too) and assemble what returns. Draw ``i`` of a table depends only on (seed, d, d_h, i)
(:mod:`rmtbase.baseline.tables`) and chunk ``i`` of a profile null only on (seed, i), so the
result is bit for bit what the task would have drawn alone (the sweep's tests, and
``tests/test_task_cluster.py`` for these two). Outside a Dask task nothing changes, and nothing
of Dask is imported.
"""

from __future__ import annotations

import contextlib
import sys


def in_dask_task() -> bool:
    """Whether this code runs inside a task on a Dask worker (``distributed`` is not imported
    to find out: a process that never imported it runs no task)."""
    dist = sys.modules.get("distributed")
    if dist is None:
        return False
    try:
        dist.get_worker()
    except ValueError:  # "No worker found": not inside a task
        return False
    return True


@contextlib.contextmanager
def task_client():
    """A client of the running task's own cluster (the task seceded while it is open), or None
    outside a Dask task."""
    if not in_dask_task():
        yield None
        return
    import distributed

    with distributed.worker_client(separate_thread=True) as client:
        yield client


def map_in_order(client, fn, args: list[tuple]) -> list:
    """``[fn(*a) for a in args]`` as Dask tasks of ``client``, in the order of ``args``, waited
    on through :func:`rmtbase.baseline.sweep.completed` (what is pending is cancelled when one
    fails)."""
    from .sweep import completed

    futures = {client.submit(fn, *a, pure=False): i for i, a in enumerate(args)}
    out = [None] * len(args)
    with contextlib.closing(completed(futures, client)) as finished:
        for fut in finished:
            out[futures[fut]] = fut.result()
    return out


def table_on_cluster(client, spec, cell):
    """The σ = 1 table :func:`rmtbase.baseline.tables.cell_table` would draw for ``spec``
    (:class:`rmtbase.baseline.table_spec.TableSpec`) at the one cell (d, d_h), its blocks of
    :data:`rmtbase.baseline.tables.DRAW_BLOCK` draws computed as tasks of ``client`` and
    assembled here, bit for bit the same."""
    from functools import partial

    from .block_jobs import BlockJobs, job_blocks
    from .sweep import Dispatch, run_jobs
    from .table_dataset import assemble
    from .tables import check_cells

    cell = (int(cell[0]), int(cell[1]))
    check_cells(spec, [cell])
    jobs = BlockJobs({(0, *cell): (spec, cell, None)}, 1)
    n = run_jobs(jobs, partial(job_blocks, {0: spec}), Dispatch(client=client, progress=False))
    ds = assemble(spec, [cell], {cell: jobs.draws((0, *cell))})
    ds.attrs["history"] = (f"drawn by a Dask task of rmtbase score as {n} tasks of one block on "
                           "its cluster")
    return ds


__all__ = ["in_dask_task", "map_in_order", "table_on_cluster", "task_client"]
