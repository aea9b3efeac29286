"""Work that a Dask task spreads over its own cluster: the null table (and profile null) a score
needs, drawn by every worker rather than the one that scores.

Inside a task, :func:`rmtbase.baseline.cache.null_table` and the profile null hand their draw
blocks to the cluster through :func:`task_client` (``distributed.worker_client``; the task
secedes while waiting). Draw i depends only on (seed, d, d_h, i), so the result is bit for bit
the task's own. Outside a task nothing changes and Dask is not imported."""

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
    """``[fn(*a) for a in args]`` as Dask tasks of ``client``, in order; pending ones are cancelled
    when one fails."""
    from .sweep import completed, result

    futures = {client.submit(fn, *a, pure=False): i for i, a in enumerate(args)}
    out = [None] * len(args)
    with contextlib.closing(completed(futures, client)) as finished:
        for fut in finished:
            out[futures[fut]] = result(fut)
    return out


def table_on_cluster(client, spec, cell):
    """The σ = 1 table :func:`rmtbase.baseline.tables.cell_table` would draw for ``spec`` at one
    cell, its blocks computed as tasks of ``client``, bit for bit the same."""
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
