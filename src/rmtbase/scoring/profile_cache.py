"""The profile's Gaussian null on disk: drawn once per (d, d_h, null storage, draws, seed).

:func:`rmtbase.scoring.factor_axes.profile_null` draws
:data:`~rmtbase.scoring.factor_axes.PROFILE_DRAWS` null heads at a model's shape (float
storages share the float32 draws: :func:`~rmtbase.scoring.factor_axes.null_storage`); before
its reduced draws it took most of a LLaMA-3-8B-shaped all-statistics score (docs/scale.md),
and it is still one of the larger costs of a new shape's first score. :func:`cached_profile_null` keeps its draws in the user cache
(:func:`rmtbase.files.user_cache.cache_dir`, folder ``profile``) like the null tables: one
netCDF file per key, written all or nothing, its name spelling every key; a file whose
attributes disagree with its name, or that cannot be read, is drawn again with a warning. The
draws are those :func:`profile_null` returns (same seed, same numbers on the same backend).
The nulls of every shape whose null tables ship (MiniLM's 384 × 32 to 5120 × 128; float32,
which float16 and bfloat16 heads share) ship in ``rmtbase/data/profile`` under the same name,
so a first score of those shapes draws no profile null (:data:`SHIPPED_PROFILES`, 18,000 draws
stored as float32: 289 kB a file).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

#: Version of the file layout and of the draws (part of the name): 2 since the reduced draws
#: of :func:`rmtbase.scoring.factor_axes.profile_null` (other numbers, the same law), 3 since
#: their Bartlett blocks are drawn as blocks (:func:`rmtbase.scoring.factor_axes.block_axes`:
#: other numbers again, the same law; draws stored as the float32 they are computed in), so a
#: cache file of an earlier version is never read as theirs.
PROFILE_FORMAT = 3
#: (d, d_h, storage) of the profile nulls shipped in ``rmtbase/data/profile`` (drawn with
#: ``sims/ship_profile.py``; default draws and seed): the shapes of the shipped null tables
#: (``tests/test_profile_cache.py`` keeps the two lists together).
SHIPPED_PROFILES = tuple((d, d_h, "float32") for d, d_h in (
    (384, 32), (512, 64), (768, 64), (1024, 64), (1280, 64), (1600, 64), (2048, 128),
    (2048, 256), (2560, 80), (4096, 128), (5120, 128)))


def shipped_profile(name: str):
    """The shipped profile null of that file name as a ``Traversable``, or None."""
    from importlib import resources

    ref = resources.files("rmtbase").joinpath("data", "profile", name)
    return ref if ref.is_file() else None


def profile_path(d: int, d_h: int, storage: str, n: int, seed: int) -> Path:
    """The cache file of the profile null that serves heads stored as ``storage`` (named by
    its null storage)."""
    from ..files.user_cache import cache_dir
    from .factor_axes import null_storage

    storage = null_storage(storage)
    return cache_dir() / "profile" / (f"profile-d{int(d)}-dh{int(d_h)}-n{int(n)}-seed{int(seed)}"
                                      f"-{storage}-v{PROFILE_FORMAT}.nc")


def _read(path: Path, keys: dict) -> dict | None:
    import xarray as xr

    from .factor_axes import FACTOR_AXES

    try:
        with xr.open_dataset(path) as ds:
            ds.load()
    except Exception as exc:  # noqa: BLE001 - any unreadable file is drawn again
        warnings.warn(f"profile null cache file {path.name} cannot be read ({exc}); drawing it "
                      "again", RuntimeWarning, stacklevel=3)
        return None
    if any(str(ds.attrs.get(k)) != str(v) for k, v in keys.items()) or \
            any(a not in ds or ds[a].size != keys["draws"] for a in FACTOR_AXES):
        warnings.warn(f"profile null cache file {path.name} does not hold what its name says; "
                      "drawing it again", RuntimeWarning, stacklevel=3)
        return None
    return {a: np.asarray(ds[a].values, dtype=np.float64) for a in FACTOR_AXES}


def _compact(v) -> np.ndarray:
    """The draws as float32 when that is lossless (factor_axes computes them in float32: half
    the file, 256 kB for 16,000 draws), else as they are."""
    v = np.asarray(v, dtype=np.float64)
    v32 = v.astype(np.float32)
    return v32 if np.array_equal(v32.astype(np.float64), v, equal_nan=True) else v


def cached_profile_null(d: int, d_h: int, storage: str = "float32", n: int | None = None,
                        seed: int = 0, client=None, progress: bool = False
                        ) -> dict[str, np.ndarray]:
    """:func:`rmtbase.scoring.factor_axes.profile_null` read from the user cache, drawn and
    written there (atomically) on first use (its chunks as tasks of a Dask ``client`` when
    one is given). ``n`` defaults to ``PROFILE_DRAWS``; ``storage`` is the heads', the file
    that of its null storage (float16 and bfloat16 heads read float32's). ``progress``: say
    on stderr when it must be drawn, and show its draws done / total while they are
    (:mod:`rmtbase.progress`: in a log a line at least every
    :data:`~rmtbase.progress.NULL_CPU_EVERY` s of CPU)."""
    import xarray as xr

    from .._version import __version__
    from ..files.atomic import write_netcdf
    from ..stats.precision import check_storage
    from .factor_axes import PROFILE_DRAWS, null_storage, profile_null

    n = PROFILE_DRAWS if n is None else int(n)
    storage = null_storage(check_storage(storage))
    keys = {"d": int(d), "d_h": int(d_h), "storage": str(storage), "draws": n,
            "seed": int(seed), "format": PROFILE_FORMAT}
    path = profile_path(d, d_h, storage, n, seed)
    shipped = shipped_profile(path.name)
    if shipped is not None:
        from importlib import resources

        with resources.as_file(shipped) as p:
            got = _read(p, keys)
        if got is not None:
            return got
    if path.is_file():
        got = _read(path, keys)
        if got is not None:
            return got
    from ..progress import NULL_CPU_EVERY, message, progress_bar

    if progress:
        message(f"rmtbase: drawing the profile null d={int(d)}, d_h={int(d_h)}, {storage} "
                f"storage, {n} draws (cached in {path.parent} for next time)")
    with progress_bar(n, enabled=bool(progress), cpu_every=NULL_CPU_EVERY,
                      desc=f"rmtbase profile null d={int(d)}, d_h={int(d_h)} ({storage})") as bar:
        draws = profile_null(d, d_h, storage, n=n, seed=seed, client=client, progress=bar)
    ds = xr.Dataset({a: (("draw",), _compact(v)) for a, v in draws.items()},
                    attrs=dict(keys, rmtbase_version=__version__,
                               definition="Gaussian null of the profile's factor axes "
                                          "(rmtbase.scoring.profile.profile_null)"))
    try:
        write_netcdf(ds, path)
    except OSError as exc:  # a read-only cache still scores
        warnings.warn(f"could not cache the profile null at {path} ({exc})", RuntimeWarning,
                      stacklevel=2)
    return draws


__all__ = ["PROFILE_FORMAT", "SHIPPED_PROFILES", "cached_profile_null", "profile_path",
           "shipped_profile"]
