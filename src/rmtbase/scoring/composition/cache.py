"""The composition and QK-overlap Gaussian nulls on disk, one atomic netCDF of sorted draws per
(kind, d, d_h, draws, seed, storage), checksummed; a bad file is removed and redrawn, an
unwritable cache keeps draws in memory. Output never depends on the cache.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

#: Version of the draws (part of the name): a change of sampler that changes the numbers
#: bumps it, so an older file is never read as the new draws.
FORMAT = 1
#: Version of the draws of the bidiagonal samplers (:mod:`rmtbase.baseline.composition_bidiagonal`):
#: other numbers, the same law.
BIDIAGONAL_FORMAT = 2


def draws_format(kind: str, d: int, d_h: int, storage: str) -> int:
    """The version of ``kind``'s draws at (d, d_h, storage): :data:`BIDIAGONAL_FORMAT` where a
    bidiagonal sampler draws them, else :data:`FORMAT`."""
    from ...baseline.composition_bidiagonal import composition_bidiagonal, overlap_bidiagonal

    new = (composition_bidiagonal(d, d_h, d_h, storage) if kind == "composition"
           else overlap_bidiagonal(d, d_h, kind == "overlap-shared", storage))
    return BIDIAGONAL_FORMAT if new else FORMAT


def null_path(kind: str, d: int, d_h: int, n: int, seed: int, storage: str) -> Path:
    """The cache file of ``kind`` (``composition``, ``overlap-distinct``, ``overlap-shared``)."""
    from ...files.user_cache import cache_dir

    v = draws_format(kind, d, d_h, storage)
    return cache_dir() / "composition" / (f"{kind}-d{int(d)}-dh{int(d_h)}-n{int(n)}"
                                          f"-seed{int(seed)}-{storage}-v{v}.nc")


def _keys(kind: str, d: int, d_h: int, n: int, seed: int, storage: str) -> dict:
    """The attributes a file must carry (its name's keys): what is written, read and summed."""
    return {"kind": str(kind), "d": int(d), "d_h": int(d_h), "draws": int(n),
            "seed": int(seed), "storage": str(storage),
            "format": draws_format(kind, d, d_h, storage)}


def _checksum(values: np.ndarray, keys: dict) -> str:
    from ...files.checksum import checksum

    return checksum({"null": (("draw",), np.asarray(values, np.float64))}, keys)


def _read(path: Path, keys: dict) -> np.ndarray | None:
    """The sorted draws of ``path`` if it is what ``keys`` say and matches its checksum; None
    where it is absent, or reported and removed (:func:`rmtbase.files.user_cache.damaged`)."""
    from ...files.user_cache import damaged

    legacy = path.with_suffix(".npy")
    if legacy.exists():  # a file without a checksum is never used
        damaged(legacy, "it carries no checksum")
    if not path.exists():
        return None
    from ...files.cache_trust import readable

    if not readable(path, "composition null"):  # another user's: neither read nor removed
        return None
    import xarray as xr

    from ...files.checksum import CHECKSUM_ATTR, verify

    try:
        with xr.open_dataset(path) as ds:
            ds.load()
    except Exception as exc:  # noqa: BLE001 - any unreadable file is drawn again
        damaged(path, f"it cannot be read: {str(exc)[:120]}")
        return None
    n = keys["draws"]
    got = np.asarray(ds["null"].values, np.float64) if "null" in ds else np.zeros(0)
    if any(str(ds.attrs.get(k)) != str(v) for k, v in keys.items()) or got.shape != (n,):
        why = "it does not hold what its name says"
    else:
        why = verify(ds.attrs.get(CHECKSUM_ATTR), _checksum(got, keys))
    if why is None and not (np.isfinite(got).all() and bool(np.all(got[1:] >= got[:-1]))
                            and bool(np.all(got >= 0))):
        why = "its draws are not sorted, finite and non-negative"
    if why is not None:
        damaged(path, why)
        return None
    return got


def cached_null(kind: str, d: int, d_h: int, n: int, seed: int, storage: str,
                draw: Callable[[], np.ndarray]) -> np.ndarray:
    """The sorted null draws of ``kind`` from the cache, else ``draw()`` (sorted float64,
    ``n`` of them) stored there. A cache that cannot be written is said once, and the draws
    kept in memory for the process."""
    from ...files.user_cache import cache_dir, recall, remember, unwritable

    keys = _keys(kind, d, d_h, n, seed, storage)
    path = null_path(kind, d, d_h, n, seed, storage)
    kept = recall(("composition", str(path)))
    if kept is not None:
        return kept.copy()
    got = _read(path, keys)
    if got is not None:
        return got
    got = np.asarray(draw(), dtype=np.float64)
    if got.shape != (int(n),):  # a drawing bug, never cached
        return got
    import xarray as xr

    from ...files.atomic import write_netcdf
    from ...files.checksum import CHECKSUM_ATTR

    ds = xr.Dataset({"null": (("draw",), got)},
                    attrs=dict(keys, **{CHECKSUM_ATTR: _checksum(got, keys)}))
    from ...files.cache_trust import may_replace

    if not may_replace(path):  # another user's file: our draws kept private (said on reading)
        remember(("composition", str(path)), got.copy())
        return got
    try:
        write_netcdf(ds, path)
        from ...files.cache_trust import keep_private

        keep_private(path)
    except OSError as exc:
        unwritable(cache_dir(), exc)
        remember(("composition", str(path)), got.copy())
    return got


__all__ = ["BIDIAGONAL_FORMAT", "FORMAT", "cached_null", "draws_format", "null_path"]
