"""The null of a whole weight matrix: i.i.d. N(0, 1) entries of its shape, stored like it.

An (m, n) component is compared with N(0, 1) matrices of that shape through the same round trip
and estimator (:func:`rmtbase.stats.matrix.matrix_stats`); σ = 1 serves every σ. The law depends
on N = m·n only (block formats: blocks of 32 along the last axis), so float storages share
:func:`null_shape`. Draw i uses ``fold_in(cell, i)``, tile t ``fold_in(key_i, t)``; n draws are
a prefix of more. :func:`matrix_null_table` reads exactly ``draws`` from the checked user cache,
extends, or draws."""

from __future__ import annotations

import datetime as _dt
from functools import lru_cache

import jax
import jax.numpy as jnp
import numpy as np

from .._version import __version__
from ..ensembles.threefry import normal
from ..errors import InputError, TableError, check_positive_int
from ..stats.matrix import (
    MATRIX_STATS,
    TILE_ELEMENTS,
    WEIBULL_TRIMS,
    name_stats,
    one_tile_fn,
    tile_rows,
)
from ..stats.precision import round_trip
from ..stats.storage import storage_record
from ..stats.tiles import tile_stats

TABLE_KIND = "matrix_null"
#: Draws per shape by default: enough for the GPD tail of TailModel (≥ 400 draws give the 50
#: tail draws it needs) at a cost MiniLM pays in about a minute (docs/null-and-storage.md).
DEFAULT_DRAWS = 400
#: A tiled draw keeps its tiles between the two passes when the whole draw takes at most
#: this many bytes (saves one of the two normal variates per entry); larger draws are
#: regenerated tile by tile in each pass (memory of one tile).
KEEP_BYTES = 512 * 2**20
VARIABLES = (*MATRIX_STATS, "rms")


def null_shape(m: int, n: int, storage: str = "float32") -> tuple[int, int]:
    """The shape whose null serves an (m, n) matrix: (max, min) for float storages, (m, n) for block
    formats. ``storage``: a name or its record."""
    m, n = check_positive_int(m, "m"), check_positive_int(n, "n")
    record = storage_record(storage)
    if record.is_float:
        return max(m, n), min(m, n)
    if n % record.block:
        raise InputError(f"storage {record.name} needs the last axis to be a multiple of "
                         f"{record.block}, got {n}")
    return m, n


def sampler(m: int, n: int, storage: str) -> str:
    """One line naming how draws are made (checked when a cached table is read)."""
    return (f"i.i.d. N(0,1) float32 ({m}, {n}) in tiles of <= {TILE_ELEMENTS} entries "
            f"({len(tile_rows(m, n))} tiles), stored as {storage}; rmtbase.stats.tiles, "
            f"Weibull trims {','.join(str(t) for t in WEIBULL_TRIMS)}; "
            f"{jax.config.jax_default_prng_impl}")


def cell_key(seed: int, m: int, n: int):
    from ..ensembles import named_key

    return jax.random.fold_in(jax.random.fold_in(named_key(jax.random.key(seed), "matrix"), m), n)


@lru_cache(maxsize=32)
def _tile_fn(rows: int, n: int, storage: str):
    """jit of ``key -> tile`` (rows, n) of i.i.d. N(0, 1) float32 entries, stored as storage."""
    return jax.jit(lambda k: round_trip(normal(k, (rows, n), jnp.float32), storage))


def _tiled_draw(key, m: int, n: int, storage: str, rows) -> dict:
    def tile(t):
        r0, r1 = rows[t]
        return _tile_fn(r1 - r0, n, storage)(jax.random.fold_in(key, t))

    return name_stats(tile_stats(tile, len(rows), m * n, trims=WEIBULL_TRIMS, storage=storage,
                                 keep=4 * m * n <= KEEP_BYTES))


def matrix_null_draws(m: int, n: int, n_draws: int, *, storage: str = "float32", seed: int = 0,
                      start: int = 0, progress=False, threads: int = 1,
                      tile_elements: int = TILE_ELEMENTS) -> dict[str, np.ndarray]:
    """Draws ``start … start + n_draws − 1`` of an (m, n) matrix's null: ``{stat: (n_draws,)}``.

    ``threads`` never changes the numbers; ``tile_elements`` does (tests only)."""
    from ..progress import progress_bar

    record = storage_record(storage)  # the name looked up once, here
    storage = record.name  # the statistics' programs are keyed by it
    n_draws = check_positive_int(n_draws, "n_draws")
    threads = check_positive_int(threads, "threads")
    if n % record.block:
        raise InputError(f"storage {storage} needs n to be a multiple of {record.block}, got {n}")
    cell = cell_key(int(seed), int(m), int(n))
    idx = np.arange(start, start + n_draws)
    rows = tile_rows(m, n, tile_elements)
    units = [idx[j:j + 1] for j in range(n_draws)]
    if len(rows) == 1:  # the compiled statistics of the model's own matrices of N entries
        gen, stats = _tile_fn(m, n, storage), one_tile_fn(storage)

        def work(ids):
            w = gen(jax.random.fold_in(jax.random.fold_in(cell, int(ids[0])), 0))
            got = stats(w.reshape(-1))
            return {v: np.asarray([got[v]]) for v in VARIABLES}
    else:
        def work(ids):
            got = _tiled_draw(jax.random.fold_in(cell, int(ids[0])), m, n, storage, rows)
            return {v: np.asarray([got[v]]) for v in VARIABLES}

    own = isinstance(progress, bool)
    bar = progress_bar(n_draws, desc=f"null of ({m}, {n}) {storage}", unit="draw",
                       enabled=progress) if own else progress
    parts = []
    try:
        parts.append(work(units[0]))  # compiles once, in this thread
        if bar is not None:
            bar.update(units[0].size)
        if threads > 1 and len(units) > 1:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(threads) as pool:
                for ids, got in zip(units[1:], pool.map(work, units[1:]), strict=True):
                    parts.append(got)
                    if bar is not None:
                        bar.update(ids.size)
        else:
            for ids in units[1:]:
                parts.append(work(ids))
                if bar is not None:
                    bar.update(ids.size)
    finally:
        if own and bar is not None:
            bar.close()
    return {v: np.concatenate([p[v] for p in parts]).astype(np.float64) for v in VARIABLES}


def table_filename(m: int, n: int, draws: int, seed: int, storage: str) -> str:
    from .table_file import TABLE_FORMAT

    st = storage_record(storage).suffix
    return f"matrix-m{m}-n{n}-n{draws}-seed{seed}-float32{st}-v{TABLE_FORMAT}.nc"


def _dataset(m, n, storage, seed, draws: dict):
    import xarray as xr

    from .table_file import TABLE_FORMAT

    k = draws["rms"].size
    ds = xr.Dataset({v: (("draw",), draws[v]) for v in VARIABLES},
                    coords={"draw": np.arange(k)})
    ds.attrs.update(
        rmtbase_table_format=TABLE_FORMAT, rmtbase_table_kind=TABLE_KIND, m=int(m), n=int(n),
        storage_dtype=storage, seed=int(seed), draws=int(k), sigma=1.0,
        sampler=sampler(m, n, storage), rmtbase_version=__version__,
        created=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        key_derivation="draw i: fold_in(fold_in(fold_in(named_key(key(seed), 'matrix'), m), n),"
                       " i); tile t of it: fold_in(draw key, t)")
    return ds


def verify_matrix_table(ds, m: int, n: int, storage: str, seed: int, path) -> None:
    """:class:`TableError` naming ``path`` unless ``ds`` is the matrix null its name says."""
    a = ds.attrs
    want = {"rmtbase_table_kind": TABLE_KIND, "m": m, "n": n, "storage_dtype": storage,
            "seed": seed, "sampler": sampler(m, n, storage)}
    for key, val in want.items():
        got = a.get(key)
        if (str(got) if isinstance(val, str) else _int(got)) != val:
            raise TableError(f"{path} does not hold the table its name promises: {key}={got!r} "
                             f"(expected {val!r})")
    missing = [v for v in VARIABLES if v not in ds.data_vars]
    if missing or "draw" not in ds.dims:
        raise TableError(f"{path} is a damaged matrix null table (missing {missing[:3]})")
    if not np.isfinite(ds["rms"].values).all():
        raise TableError(f"{path} is a damaged matrix null table (non-finite rms)")


def _int(x):
    try:
        return int(x)
    except (TypeError, ValueError):
        return None


def check_matrix_null_size(draws: int) -> None:
    """InputError before any draw if a matrix null of ``draws`` draws cannot be held in memory
    (:func:`rmtbase.baseline.limits.check_stored_values`, float64)."""
    from .limits import check_stored_values

    check_stored_values(int(draws) * len(VARIABLES), 8,
                        f"a matrix null of {len(VARIABLES)} statistics x {int(draws)} draws")


def matrix_null_table(m: int, n: int, *, storage: str = "float32", draws: int = DEFAULT_DRAWS,
                      seed: int = 0, progress: bool = False, threads: int = 1):
    """σ = 1 null table (``xr.Dataset`` over ``draw``) of exactly ``draws`` draws for an (m, n)
    matrix stored as ``storage``, at :func:`null_shape`."""
    from .draw_cache import Cell, grown_table

    record = storage_record(storage)  # the name looked up once, here
    storage = record.name  # as the files and messages spell it
    draws = check_positive_int(draws, "draws")
    if draws < 2:
        raise InputError(f"draws must be at least 2, got {draws}")
    m, n = null_shape(m, n, record)
    check_matrix_null_size(draws)
    cell = Cell("matrix null", f"({m}, {n}) {storage}",
                lambda k: table_filename(m, n, k, seed, record),
                lambda ds, path: verify_matrix_table(ds, m, n, storage, seed, path),
                lambda start, count: matrix_null_draws(m, n, count, storage=storage, seed=seed,
                                                       start=start, progress=progress,
                                                       threads=threads),
                lambda got: _dataset(m, n, storage, seed, got))
    return grown_table(cell, draws, progress)
