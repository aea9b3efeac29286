"""σ = 1 null tables on demand: shipped package data, then the user cache, else generated.

:func:`null_table` looks in ``rmtbase/data`` (``data/index.json``), then the user cache, else
draws (:func:`rmtbase.baseline.tables.baseline`) and caches atomically (in memory if unwritable).
A table matches when ensemble, seed, dtype, storage and format agree, it has ≥ ``min_draws``
draws and covers the statistics asked for; missing spectral statistics come from its ``lambda``
(:func:`rmtbase.baseline.spectra.spectral_from_table`). float16/bfloat16 spectral requests use
the float32 table. Cache names spell every key (draws version included), formatted and read back
by one record, :class:`~rmtbase.baseline.table_name.TableName`; a file failing its name
or checksum (:func:`verify_table`) is warned about, removed and regenerated. Draw ``i`` depends
only on (seed, d, d_h, i), so a cached table is read truncated to ``min_draws`` and a shorter
one (cached, in memory or shipped) grows (:mod:`.table_growth`); a shipped one is used whole;
``"extension": true`` entries serve only where no ordinary one suffices. The cache keeps one file per request
(every key but the draws): the largest; a grown table is renamed into place and the shorter one
removed, and a cache holding several is compacted on first use (:mod:`.cache_rungs`). A file
another user wrote or could rewrite is not read (:mod:`rmtbase.files.cache_trust`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

import numpy as np

from ..errors import InputError, TableError, check_dims
from ..files.user_cache import cache_dir
from ..stats.storage import FLOAT32, Storage, storage_record
from .rescaling import rescale  # noqa: F401 - re-exported (rmtbase.baseline.cache.rescale)
from .shipped import shipped_index
from .table_check import missing_variables, verify_table  # noqa: F401 - re-exported
from .table_contents import SERVES
from .table_file import first_draws
from .table_name import TableName, storage_field


def table_filename(d: int, d_h: int, *, ensemble: str, stats: str, draws: int, seed: int,
                   dtype: str, depth: int | None = None, storage: str = "float32") -> str:
    """File name encoding every key a table's numbers depend on
    (:meth:`rmtbase.baseline.table_name.TableName.filename`; ``storage`` a name or a record;
    the draws version of this cell, :func:`rmtbase.baseline.draw_route.draws_version`)."""
    from .draw_route import draws_version

    record = storage_record(storage)  # a name or a record
    return TableName(ensemble=ensemble, d=d, d_h=d_h, stats=stats, draws=draws, seed=seed,
                     dtype=dtype, storage=storage_field(record),
                     draws_version=draws_version(d, d_h, stats, ensemble, record, dtype),
                     depth=depth).filename()


def _matches(entry: dict, key: TableKey) -> bool:
    """Whether index entry ``entry`` serves request ``key`` (same keys; same draws version for λ's
    statistics, 1 where the entry has none)."""
    from .tables import TABLE_FORMAT

    version_ok = key.stats == "elementwise" or entry.get("draws_version", 1) == key.draws_version
    return (version_ok and entry["d"] == key.d and entry["d_h"] == key.d_h
            and entry["ensemble"] == key.ensemble and entry["seed"] == key.seed
            and entry["dtype"] == key.dtype
            and entry.get("storage", "float32") == key.storage.name
            and entry["format"] == TABLE_FORMAT and key.stats in SERVES[entry["stats"]]
            and entry["draws"] >= key.min_draws)


def cached_entries(directory: Path) -> tuple[list[dict], list[tuple[Path, str]]]:
    """``(entries, left_out)``: the index entry of each lowrank table file of this format in
    the cache folder, read from its name (:meth:`TableName.parse
    <rmtbase.baseline.table_name.TableName.parse>`), and ``(path, reason)`` of each file left
    out: a name rmtbase does not write, statistics no table serves, a storage not registered."""
    from ..stats.precision import STORAGES
    from .table_file import TABLE_FORMAT
    from .table_name import read_names

    named, left_out = read_names(
        sorted(directory.glob(f"lowrank-d*-dh*-*-n*-seed*-float*-v{TABLE_FORMAT}.nc")))
    out = []
    for p, name in named:
        if name.ensemble != "lowrank" or name.depth is not None:
            left_out.append((p, f"{p.name}: not a lowrank table"))
        elif name.stats not in SERVES:
            left_out.append((p, f"{p.name}: statistics {name.stats!r} are no table's"))
        elif name.storage not in STORAGES:
            left_out.append((p, f"{p.name}: storage {name.storage!r} is not registered"))
        else:
            out.append(name.entry(p))
    return out, left_out


def _cached_entries(directory: Path) -> list[dict]:
    """The index entries of :func:`cached_entries` (the files left out are not tables this
    cache reads; they are left where they are)."""
    return cached_entries(directory)[0]


def _select(ds, stats: str):
    """Keep the variables of ``stats`` (spectral: bare names plus ``q_rms``/``k_rms``)."""
    if stats == "all":
        return ds
    spectral = [v for v in ds.data_vars if ds[v].attrs.get("matrix") == "qk"
                and not str(v).startswith("qk_")]
    rms = [v for v in ("q_rms", "k_rms") if v in ds.data_vars]
    keep = spectral + rms if stats == "spectral" else [v for v in ds.data_vars if v not in spectral]
    return ds[keep]


def _derived(ds, stats: str):
    """``ds`` with its missing spectral statistics computed from its stored spectrum."""
    if stats == "elementwise":
        return ds
    from .spectra import spectral_from_table

    return spectral_from_table(ds)


#: Least draws of a table request that names none (:func:`null_table` and its kin; a score
#: without ``draws`` asks for this many, :meth:`rmtbase.scoring.heads.reference.Cells.table`).
TABLE_DRAWS = 1000


@dataclass(frozen=True)
class TableKey:
    """A validated σ = 1 table request (:func:`table_key`); a spectral request's float storage is
    float32."""

    d: int
    d_h: int
    stats: str
    min_draws: int
    seed: int
    ensemble: str
    dtype: str
    storage: Storage

    @property
    def draws_version(self) -> int:
        """The draws version of this request's table
        (:func:`rmtbase.baseline.draw_route.draws_version`)."""
        from .draw_route import draws_version

        return draws_version(self.d, self.d_h, self.stats, self.ensemble, self.storage,
                             self.dtype)

    def name(self) -> TableName:
        """The :class:`~rmtbase.baseline.table_name.TableName` of this request at exactly
        ``min_draws`` draws."""
        return TableName(ensemble=self.ensemble, d=self.d, d_h=self.d_h, stats=self.stats,
                         draws=self.min_draws, seed=self.seed, dtype=self.dtype,
                         storage=storage_field(self.storage), draws_version=self.draws_version)

    def filename(self) -> str:
        """The user-cache file name of this request at exactly ``min_draws`` draws."""
        return self.name().filename()

    def spec(self, chunk_size=None):
        """The :class:`rmtbase.baseline.table_spec.TableSpec` that draws this request's table."""
        from .table_spec import make_spec

        return make_spec(draws=self.min_draws, seed=self.seed, stats=self.stats,
                         ensemble=self.ensemble, dtype=self.dtype, storage=self.storage,
                         chunk_size=chunk_size)


def table_key(d, d_h, *, stats="all", min_draws=TABLE_DRAWS, seed=0, ensemble="lowrank",
              dtype="float32", storage="float32") -> TableKey:
    """The validated :class:`TableKey` of a request; InputError on a bad value."""
    from .table_contents import fast_spectral

    d, d_h = check_dims(d, d_h)
    if ensemble != "lowrank":
        raise InputError(f"null_table serves the lowrank ensemble only, got {ensemble!r}")
    if stats not in SERVES:
        raise InputError(f"stats must be one of all, spectral, elementwise, got {stats!r}")
    storage = storage_record(storage)
    if fast_spectral(stats, ensemble, storage):
        storage = FLOAT32  # float storages share the spectral null
    from ..checks import check_int, check_seed

    min_draws = check_int("min_draws", min_draws, minimum=2)  # 2.7 is not 2, True not 1
    return TableKey(d, d_h, stats, min_draws, check_seed(seed), ensemble, np.dtype(dtype).name,
                    storage)


def cache_target(d: int, d_h: int, *, stats: str = "all", draws: int = TABLE_DRAWS, seed: int = 0,
                 ensemble: str = "lowrank", dtype: str = "float32",
                 storage: str = "float32") -> Path:
    """The user-cache file :func:`null_table` writes when it generates this request's table."""
    return key_target(table_key(d, d_h, stats=stats, min_draws=draws, seed=seed,
                                ensemble=ensemble, dtype=dtype, storage=storage))


def key_target(key: TableKey) -> Path:
    """:func:`cache_target` of a validated request."""
    return cache_dir() / key.filename()


def lookup_table(d: int, d_h: int, *, stats: str = "all", min_draws: int = TABLE_DRAWS, seed: int = 0,
                 ensemble: str = "lowrank", dtype: str = "float32", storage: str = "float32"):
    """The table :func:`null_table` would return without generating one, or None."""
    return lookup_key(table_key(d, d_h, stats=stats, min_draws=min_draws, seed=seed,
                                ensemble=ensemble, dtype=dtype, storage=storage))


def lookup_key(key: TableKey):
    """:func:`lookup_table` of a validated request."""
    from .tables import read_table

    stats = key.stats
    shipped = [e for e in shipped_index() if _matches(e, key)]
    if shipped:
        # an extension table serves only what no ordinary shipped table can (see module doc)
        best = max([e for e in shipped if not e.get("extension")] or shipped,
                   key=lambda e: e["draws"])
        ref = resources.files("rmtbase").joinpath("data", best["file"])
        with resources.as_file(ref) as path:
            ds = read_table(path)
            verify_table(ds, best, path)  # a mismatch here is a broken installation
            return _select(_derived(ds, stats), stats)
    from ..files.user_cache import remembered

    directory = cache_dir()
    # a cached table serves only its own statistics: an all-statistics table's spectral draws
    # are not a spectral table's, so serving one would make a score depend on what the cache
    # holds (shipped tables are fixed per installation and serve what SERVES says)
    for entry, ds in _cached_tables(directory, key):  # this request's own name first
        if entry["draws"] >= key.min_draws:
            return _select(_derived(first_draws(ds, key.min_draws), stats), stats)
    kept = [e for e in remembered("table") if _matches(e, key) and e["stats"] == stats
            and e["file"].parent == directory]  # kept where this cache is unwritable
    for entry in sorted(kept, key=lambda e: e["draws"]):  # the smallest that serves
        table = first_draws(entry["table"], key.min_draws).copy(deep=True)
        return _select(_derived(table, stats), stats)
    return None


def _cached_tables(directory: Path, key: TableKey) -> list[tuple[dict, object]]:
    """``(entry, table)`` of each request in ``directory`` that may serve ``key`` (any draws):
    its largest verified rung, the others removed (:func:`rmtbase.baseline.cache_rungs.compact`);
    the request named as ``key`` first."""
    from .cache_rungs import VANISHED, compact, read_cached, rungs

    if not directory.is_dir():
        return []
    shorter = replace(key, min_draws=1)
    for _ in range(3):  # a rung removed by another process while read: list again
        out = []
        for group in rungs(_cached_entries(directory)).values():
            if not (_matches(group[0], shorter) and group[0]["stats"] == key.stats):
                continue
            got = compact(group, read_cached)
            if got is VANISHED:
                break
            if got is not None:
                out.append(got)
        else:
            return sorted(out, key=lambda g: g[0]["draws_version"] != key.draws_version)
    return []


def _shorter_entries(key: TableKey) -> list[dict]:
    """Index entries of request ``key`` with fewer draws: cached files and tables kept in memory
    (:func:`rmtbase.baseline.table_growth.held_table` chooses)."""
    directory = cache_dir()
    shorter = replace(key, min_draws=1)
    from ..files.user_cache import remembered

    found = _cached_entries(directory) if directory.is_dir() else []
    return [e for e in found + remembered("table") if _matches(e, shorter)
            and e["stats"] == key.stats and e["draws"] < key.min_draws
            and e["file"].parent == directory]


def _shipped_entries(key: TableKey) -> list[dict]:
    """Shipped tables of request ``key``'s own statistics with fewer draws, as held entries
    (``{"draws", "load", "shipped"}``; ``load()`` reads and verifies the file, only where
    :func:`rmtbase.baseline.table_growth.held_table` reaches it) that a grown table continues:
    their draws are the first draws of the request where ``held_table`` finds them drawn by this
    program (its attributes, and draw 0 drawn again here), so a cold cache grows from them, not
    from draw 0.
    Extension tables are left to :func:`lookup_key`."""
    from functools import partial

    shorter = replace(key, min_draws=1)
    return [{"draws": int(e["draws"]), "load": partial(_read_shipped, e), "shipped": True}
            for e in shipped_index()
            if not (e.get("extension") or e["stats"] != key.stats or not _matches(e, shorter)
                    or e["draws"] >= key.min_draws)]


def _read_shipped(entry: dict):
    """The shipped table of index ``entry``, checked against it."""
    from .tables import read_table

    with resources.as_file(resources.files("rmtbase").joinpath("data", entry["file"])) as path:
        ds = read_table(path)
        verify_table(ds, entry, path)  # a mismatch here is a broken installation
    return ds


def _generating(key, start: int, directory) -> str:
    """The line saying which null table is drawn (draws ``start`` on), and where it is kept."""
    from ..files.user_cache import said_unwritable, writable
    from .draw_cost import cpu_time, growth_seconds

    kept = ("kept in memory" if said_unwritable() or not writable(directory)
            else f"cached in {directory} for next time")
    draws = f"draws {start} to {key.min_draws}" if start else f"{key.min_draws} draws"
    cost = cpu_time(growth_seconds(key.d, key.d_h, key.stats, start, key.min_draws))
    return (f"rmtbase: generating the null table d={key.d}, d_h={key.d_h}, {key.stats} "
            f"statistics, {key.storage.name} storage, {draws} ({cost} estimated; {kept})")


def null_table(d: int, d_h: int, *, stats: str = "all", min_draws: int = TABLE_DRAWS, seed: int = 0,
               ensemble: str = "lowrank", dtype: str = "float32", storage: str = "float32",
               progress: bool = False):
    """σ = 1 null table of cell (d, d_h): a shipped table with ≥ ``min_draws`` draws, whole, else
    exactly ``min_draws`` draws from the cache or generated (lowrank only). ``storage``: the
    checkpoint precision. Inside a Dask task the cluster draws it, bit for bit the same."""
    key = table_key(d, d_h, stats=stats, min_draws=min_draws, seed=seed, ensemble=ensemble,
                    dtype=dtype, storage=storage)
    found = lookup_key(key)
    if found is not None:
        return found
    d, d_h, storage = key.d, key.d_h, key.storage.name  # the name, for the messages
    directory = cache_dir()
    from ..progress import NULL_CPU_EVERY, message, progress_bar
    from .table_growth import grown_table, held_draws, held_table
    from .task_cluster import in_dask_task, table_on_cluster, task_client

    # a shorter table held grows (draw i is the same in each), never redrawn from draw 0
    held = None if in_dask_task() else held_table(key, _shorter_entries(key)
                                                  + _shipped_entries(key))
    start = held_draws(held)
    if progress:
        message(_generating(key, start, directory))
    from .tables import cell_table

    spec = key.spec()
    with task_client() as client:  # inside a Dask task: its blocks drawn by the whole cluster
        if client is None:  # draws done / total, also every NULL_CPU_EVERY s of CPU between
            with progress_bar(key.min_draws - start, enabled=bool(progress),
                              cpu_every=NULL_CPU_EVERY,
                              desc=f"rmtbase null table d={d}, d_h={d_h} ({stats}, "
                                   f"{storage})") as bar:
                ds = (grown_table(spec, (d, d_h), held, bar) if start
                      else cell_table(spec, (d, d_h), bar))
        else:
            ds = table_on_cluster(client, spec, (d, d_h))
    path = key_target(key)
    from ..files.cache_trust import may_replace

    if not may_replace(path):  # another user's file: our draws kept private (said on reading it)
        _keep_in_memory(key, ds, path)
        return ds
    try:
        directory.mkdir(parents=True, exist_ok=True)
        from .tables import write_table

        write_table(ds, path, replace="any", mode=0o644)  # nobody else may rewrite it
    except (OSError, TableError) as exc:  # said once; the table kept for this process
        from ..files.user_cache import unwritable

        unwritable(directory, exc)
        _keep_in_memory(key, ds, path)
        return ds
    from .cache_rungs import keep_largest

    keep_largest(_cached_entries(directory), path)  # one file per request: the largest
    return ds


def _keep_in_memory(key: TableKey, ds, path: Path) -> None:
    """Keep ``ds`` for the rest of the process where it cannot be cached at ``path``: one entry
    per request but its draws, so a grown table replaces the one it grew from."""
    from ..files.user_cache import remember
    from .tables import TABLE_FORMAT

    remember(("table", str(key_target(replace(key, min_draws=0)))), {
        "table": ds.copy(deep=True), "file": path, "d": key.d, "d_h": key.d_h,
        "ensemble": key.ensemble, "seed": key.seed, "dtype": key.dtype,
        "storage": key.storage.name, "format": TABLE_FORMAT, "stats": key.stats,
        "draws": key.min_draws, "draws_version": key.draws_version})
