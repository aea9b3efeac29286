"""The scorer's null tables built ahead of time on Dask: ``rmtbase sweep --into-cache``.

:func:`score_requests` lists the tables a Gaussian-null ``rmtbase score`` of a shape and storage
asks :func:`rmtbase.baseline.cache.null_table` for; :func:`sweep_into_cache` computes the
missing ones and writes exactly the file ``null_table`` would (same name, same bits). The
spectral extension is not built here; the profile null comes through ``then``."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import InputError, check_keywords
from .cache import TABLE_DRAWS

#: Fewest draws of the spectral reference of an all-statistics score: a table's default
#: (``max(draws, SPECTRAL_REFERENCE_DRAWS)`` in
#: :meth:`rmtbase.scoring.heads.reference.TableReference.start_spectral`).
SPECTRAL_REFERENCE_DRAWS = TABLE_DRAWS
#: :func:`sweep_into_cache`'s keywords for the tables (besides the dispatch's).
CACHE_KEYWORDS = ("stats", "draws", "seed", "chunk_size")


def default_draws() -> int:
    """Draws of a score's table when it gives none (:data:`~rmtbase.baseline.cache.TABLE_DRAWS`)."""
    return TABLE_DRAWS


def score_requests(stats: str = "all", draws: int | None = None,
                   storage: str = "float32") -> list[dict]:
    """The ``null_table`` requests ``{"stats", "draws", "storage"}`` of a Gaussian-null score of
    layers stored at ``storage``, a request another one serves left out."""
    from ..stats.storage import storage_record
    from .table_contents import SERVES, fast_spectral

    if stats not in SERVES:
        raise InputError(f"stats must be one of all, spectral, elementwise, got {stats!r}")
    storage = storage_record(storage)  # the name looked up once, here
    n = default_draws() if draws is None else int(draws)
    wanted = [(stats, n)]
    if stats == "all":
        wanted.append(("spectral", max(n, SPECTRAL_REFERENCE_DRAWS)))
    reqs = [{"stats": s, "draws": k,
             "storage": "float32" if fast_spectral(s, "lowrank", storage) else storage.name}
            for s, k in wanted]
    return [r for i, r in enumerate(reqs)
            if not any(j != i and o["storage"] == r["storage"] and r["stats"] in SERVES[o["stats"]]
                       and o["draws"] >= r["draws"] for j, o in enumerate(reqs))]


def plan(cells, storages, *, stats="all", draws=None, seed=0, chunk_size=None,
         resume=True) -> tuple[dict, list[Path]]:
    """({job: (spec, cell, store)} of the tables to build, [cache files that already serve a
    request]); jobs are keyed (target path, d, d_h), one per distinct target."""
    from .cache import key_target, lookup_key, table_key
    from .partial import PartialStore

    jobs, found = {}, []
    for cell in cells:
        for storage in storages:
            for r in score_requests(stats, draws, storage):
                key = table_key(*cell, stats=r["stats"], min_draws=r["draws"], seed=seed,
                                storage=r["storage"])
                target = key_target(key)
                if (target, *cell) in jobs or target in found:
                    continue
                if lookup_key(key) is not None:
                    found.append(target)
                    continue
                spec = key.spec(chunk_size)
                jobs[(target, *cell)] = (spec, cell, PartialStore(target, spec) if resume
                                         else None)
    return jobs, found


def sweep_into_cache(d, d_h, *, storages=("float32",), dispatch=None, blocks_per_task: int = 1,
                     resume: bool = True, then=None, **options) -> dict[str, list[Path]]:
    """Build into the user cache, as Dask tasks, the null tables a Gaussian-null score of each cell
    of ``d`` × ``d_h`` at each of ``storages`` reads; ``options``: the score's ``stats``,
    ``draws``, ``seed``, ``chunk_size`` and the fields of ``dispatch`` (as :func:`~.sweep.sweep`'s).
    ``then(client)`` runs once the tables are written, before the cluster closes. Returns
    ``{"written": [...], "found": [...]}`` (cache files)."""
    from .block_jobs import BlockJobs, job_blocks
    from .limits import check_cells
    from .sweep import (
        Dispatch,
        check_blocks_per_task,
        check_scheduler,
        cluster_client,
        dispatch_of,
        keeping,
        require_distributed,
        run_jobs,
    )
    from .table_dataset import assemble
    from .tables import grid_cells, write_table

    where = dispatch_of(dispatch, options, "sweep_into_cache")
    check_keywords(options, CACHE_KEYWORDS, "sweep_into_cache")
    cells, storages = grid_cells(d, d_h), _check_request(storages, options.get("draws"))
    per = check_blocks_per_task(blocks_per_task)
    if where.client is None:
        require_distributed()
    check_scheduler(where.scheduler)  # an address nothing answers at: one line before any work
    jobs, found = plan(cells, storages, resume=resume, **options)  # plan's defaults: the score's
    for spec, cell, _ in jobs.values():
        check_cells(spec, [cell], memory=where.scheduler is None and where.client is None)
    written = []
    if jobs:
        _writable_cache()
    specs = {job[0]: spec for job, (spec, _, _) in jobs.items()}  # job[0]: its target
    blocks = BlockJobs(jobs, per)

    def write(job):
        spec, cell, store = jobs[job]
        ds = assemble(spec, [cell], {cell: blocks.draws(job)})
        ds.attrs["history"] = ("computed by rmtbase sweep --into-cache as Dask tasks of up to "
                               f"{per} blocks")
        write_table(ds, job[0], replace="any")
        blocks.release(job)  # a grid of cells need not be held in memory
        if store is not None:
            store.finish()
        written.append(job[0])

    from functools import partial

    with keeping([s for _, _, s in jobs.values()], lambda: f"; {len(written)} null tables "
                 "were written"), cluster_client(where.scheduler, where.workers,
                                                 where.client) as c:
        run_jobs(blocks, partial(job_blocks, specs), Dispatch(client=c, progress=where.progress),
                 on_complete=write)
        if then is not None:
            then(c)
    return {"written": written, "found": found}


def _check_request(storages, draws) -> tuple:
    """``storages`` as a tuple (one name alone too), and ``draws`` checked: InputError for no
    storage or draws that are not an integer >= 2 (None: the score's default)."""
    if isinstance(storages, str):
        storages = (storages,)
    if not storages:
        raise InputError("give at least one storage")
    if draws is not None and (isinstance(draws, bool) or int(draws) != draws or draws < 2):
        raise InputError(f"draws must be an integer >= 2, got {draws!r}")
    return tuple(storages)


def _writable_cache() -> None:
    """Create the user cache folder (:func:`rmtbase.files.user_cache.cache_dir`) or refuse in
    one line, before any task: it cannot be made, or it is not writable."""
    from ..files.user_cache import cache_dir

    directory = cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the cache folder {directory}: {exc}") from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise InputError(f"the cache folder {directory} is not writable")


__all__ = ["SPECTRAL_REFERENCE_DRAWS", "default_draws", "plan", "score_requests",
           "sweep_into_cache"]
