"""The null of WeightWatcher's heavy-tail metrics: spectra of i.i.d. N(0, 1) matrices of a matrix's
shape, stored like it.

Draw i is the matrix of draw i of :mod:`.matrix_null` (same cell key, same tiles, same storage
round trip), so the two nulls are one joint null. Its table holds the float64 spectrum
λ = s²(W) ascending (``lambda`` over ``(draw, eig)``, :func:`rmtbase.stats.heavy_tail.esd`),
``rand_distance`` (:func:`rmtbase.stats.heavy_tail_mp.rand_distance`, the permutation of
:func:`~rmtbase.stats.heavy_tail_mp.permutation` keyed by ``fold_in(draw key, PERMUTATION_TAG)``)
and every other metric at σ = 1 (``metric_<name>``, :func:`~rmtbase.stats.heavy_tail_mp.
spectrum_table`). A matrix is scored against the null rescaled to its Σλ = ‖W‖_F²
(:func:`rmtbase.scoring.matrices.heavy_tail.rescaled`): the null is conditioned on the matrix's
own rms (scale-free metrics are unchanged by it, log_norm equals the matrix's by construction).
σ = 1 serves every σ as in :mod:`.matrix_null`; float
storages of (m, n) and (n, m) share one null (:func:`.matrix_null.null_shape`).

:func:`heavy_tail_null_table` reads exactly ``draws`` from the checked user cache, extends a
shorter table (draw i is the same in a longer one), or draws."""

from __future__ import annotations

import datetime as _dt
from functools import lru_cache

import jax
import jax.numpy as jnp
import numpy as np

from .._version import __version__
from ..errors import InputError, TableError, check_positive_int
from ..stats.storage import storage_record

TABLE_KIND = "heavy_tail_null"
#: Draws per shape by default (the smallest add-one p is 2/(1 + draws)).
DEFAULT_DRAWS = 200
#: fold_in tag of the permutation that rand_distance applies to a draw.
PERMUTATION_TAG = 0x7E7
_DRAWS_PER_SVD = 8


@lru_cache(maxsize=8)
def _keys_fn(n_tiles: int):
    """jit of ``(cell, ids (k,)) -> (tile keys (k, n_tiles), permutation key data (k, …))``:
    draw i's key ``fold_in(cell, i)``, its tiles' ``fold_in(key, t)`` and the permutation's
    ``fold_in(key, PERMUTATION_TAG)``, for a batch of draws in one call (threefry is exact, so
    these are the keys one fold_in at a time gives)."""
    def one(cell, i):
        key = jax.random.fold_in(cell, i)
        tiles = jax.vmap(lambda t: jax.random.fold_in(key, t))(jnp.arange(n_tiles))
        return tiles, jax.random.key_data(jax.random.fold_in(key, PERMUTATION_TAG))

    return jax.jit(jax.vmap(one, in_axes=(None, 0)))


def _draws(cell, ids, m: int, n: int, storage: str):
    """Draws ``ids`` of the (m, n) matrix null, float32 on the storage's lattice (matrix_null's
    draws: same keys, same tiles), as numpy, and each draw's permutation key data."""
    from ..stats.matrix import tile_rows
    from .matrix_null import _tile_fn

    rows = tile_rows(m, n)
    tile_keys, perm_keys = _keys_fn(len(rows))(cell, jnp.asarray(list(ids), dtype=jnp.uint32))
    mats = []
    for keys in tile_keys:
        tiles = [_tile_fn(r1 - r0, n, storage)(keys[t]) for t, (r0, r1) in enumerate(rows)]
        mats.append(np.asarray(tiles[0] if len(tiles) == 1 else jnp.concatenate(tiles, axis=0)))
    return mats, np.asarray(perm_keys)


def heavy_tail_null_draws(m: int, n: int, n_draws: int, *, storage: str = "float32",
                          seed: int = 0, start: int = 0, progress=False) -> dict:
    """Draws ``start … start + n_draws − 1``: ``{"lambda": (n_draws, min(m, n)) float64,
    "rand_distance": (n_draws,), "metric_<name>": (n_draws,)}`` (the metrics of
    :func:`rmtbase.stats.heavy_tail_mp.spectrum_table` at σ = 1)."""
    from ..progress import progress_bar
    from ..stats.heavy_tail import matrix_spectrum
    from ..stats.heavy_tail_mp import js_distance, permutation, spectrum_table
    from .matrix_null import cell_key

    record = storage_record(storage)
    storage = record.name
    n_draws = check_positive_int(n_draws, "n_draws")
    if n % record.block:
        raise InputError(f"storage {storage} needs n to be a multiple of {record.block}, got {n}")
    cell = cell_key(int(seed), int(m), int(n))
    lam, dist = [], []
    bar = progress_bar(n_draws, desc=f"heavy-tail null of ({m}, {n}) {storage}", unit="draw",
                       enabled=progress)
    try:
        for lo in range(start, start + n_draws, _DRAWS_PER_SVD):
            ids = range(lo, min(lo + _DRAWS_PER_SVD, start + n_draws))
            mats, keys = _draws(cell, ids, m, n, storage)
            # float32 draws: permuted before the exact cast to float64
            perms = [w.reshape(-1)[permutation(key, w.size)].reshape(w.shape)
                     for w, key in zip(mats, keys, strict=True)]
            spec = matrix_spectrum(mats + perms)
            k = len(mats)
            lam.append(spec[:k])
            dist.extend(js_distance(a, b) for a, b in zip(spec[:k], spec[k:], strict=True))
            if bar is not None:
                bar.update(k)
    finally:
        if bar is not None:
            bar.close()
    lam = np.concatenate(lam)
    out = {"lambda": lam, "rand_distance": np.asarray(dist, dtype=np.float64)}
    out.update({f"metric_{k}": v for k, v in spectrum_table(lam, m, n).items()})
    return out


def table_filename(m: int, n: int, draws: int, seed: int, storage) -> str:
    from ..stats.heavy_tail import ESD_METHOD
    from .table_file import TABLE_FORMAT

    st = storage_record(storage).suffix
    return (f"heavytail-m{m}-n{n}-n{draws}-seed{seed}-float64{st}-{ESD_METHOD}"
            f"-v{TABLE_FORMAT}.nc")


def _sampler(m, n, storage) -> str:
    from .matrix_null import sampler

    return (f"spectra s^2 (float64 SVD) of the matrix null's draws: {sampler(m, n, storage)}; "
            f"rand_distance permutation: PCG64 seeded by key_data(fold_in(draw key, "
            f"{PERMUTATION_TAG}))")


def _dataset(m, n, storage, seed, got):
    import xarray as xr

    from .table_file import TABLE_FORMAT

    k = got["rand_distance"].size
    ds = xr.Dataset({v: (("draw", "eig") if v == "lambda" else ("draw",), got[v])
                     for v in got}, coords={"draw": np.arange(k)})
    ds["lambda"].attrs.update(long_name="squared singular values of the draw, ascending",
                              units="1", sigma_power=2)
    ds.attrs.update(
        rmtbase_table_format=TABLE_FORMAT, rmtbase_table_kind=TABLE_KIND, m=int(m), n=int(n),
        storage_dtype=storage, seed=int(seed), draws=int(k), sigma=1.0,
        sampler=_sampler(m, n, storage), rmtbase_version=__version__,
        created=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"))
    return ds


def _verify(ds, m, n, storage, seed, path) -> None:
    a = ds.attrs
    want = {"rmtbase_table_kind": TABLE_KIND, "m": m, "n": n, "storage_dtype": storage,
            "seed": seed, "sampler": _sampler(m, n, storage)}
    for key, val in want.items():
        got = a.get(key)
        same = str(got) == val if isinstance(val, str) else str(got) == str(val)
        if not same:
            raise TableError(f"{path} does not hold the table its name promises: {key}={got!r} "
                             f"(expected {val!r})")
    if ("lambda" not in ds or "rand_distance" not in ds or "metric_alpha" not in ds
            or ds["lambda"].shape[-1] != min(m, n)):
        raise TableError(f"{path} is a damaged heavy-tail null table")
    if not np.isfinite(ds["lambda"].values).all():
        raise TableError(f"{path} is a damaged heavy-tail null table (non-finite spectra)")


def heavy_tail_null_table(m: int, n: int, *, storage: str = "float32",
                          draws: int = DEFAULT_DRAWS, seed: int = 0, progress: bool = False):
    """σ = 1 null table (``lambda`` (draw, eig), ``rand_distance`` (draw)) of ``draws`` draws of
    an (m, n) matrix stored as ``storage``, at :func:`.matrix_null.null_shape`; cached."""
    from .draw_cache import Cell, grown_table
    from .matrix_null import null_shape

    record = storage_record(storage)
    storage = record.name
    draws = check_positive_int(draws, "draws")
    if draws < 2:
        raise InputError(f"draws must be at least 2, got {draws}")
    m, n = null_shape(m, n, record)
    cell = Cell("heavy-tail null", f"({m}, {n}) {storage}",
                lambda k: table_filename(m, n, k, seed, record),
                lambda ds, path: _verify(ds, m, n, storage, seed, path),
                lambda start, count: heavy_tail_null_draws(m, n, count, storage=storage, seed=seed,
                                                           start=start, progress=progress),
                lambda got: _dataset(m, n, storage, seed, got))
    return grown_table(cell, draws, progress)


__all__ = ["DEFAULT_DRAWS", "PERMUTATION_TAG", "TABLE_KIND", "heavy_tail_null_draws",
           "heavy_tail_null_table", "table_filename"]
