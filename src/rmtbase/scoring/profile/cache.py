"""The profile's Gaussian null on disk, one atomic checksummed netCDF per (d, d_h, null storage,
draws, seed) in the user cache; a bad file is removed and redrawn, an unwritable cache keeps
draws in memory. Draw i is the same at every length; shipped shapes ship theirs
(:data:`SHIPPED_PROFILES`).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

#: Version of the file layout and of the draws (part of the name): 2 since the reduced draws
#: of :func:`rmtbase.scoring.profile.factors.profile_null` (other numbers, the same law), 3 since
#: their Bartlett blocks are drawn as blocks (:func:`rmtbase.scoring.profile.factors.block_axes`:
#: other numbers again, the same law; draws stored as the float32 they are computed in), so a
#: cache file of an earlier version is never read as theirs. Block formats and FP8 are at
#: :data:`STORED_FORMAT` (:func:`profile_format`).
PROFILE_FORMAT = 3
#: Version of a block format's or FP8's draws (:func:`rmtbase.scoring.profile.factors._stored_null`:
#: each head from its own key in one compiled loop, 5 heads a step where d_h ≥ 256, symmetry's
#: ‖W_QK‖² from the Grams' upper blocks, its own XLA options). Raised whenever the program
#: changes, even where the law does not: another program may round otherwise in the last bit,
#: so a file of an earlier format is never read as its draws.
STORED_FORMAT = 6
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


def profile_format(storage) -> int:
    """The draws' version of the null storage of ``storage`` (a name or a record):
    :data:`PROFILE_FORMAT` for float32 (and the float storages it serves),
    :data:`STORED_FORMAT` for block formats and FP8."""
    from .factors import null_storage

    return PROFILE_FORMAT if null_storage(storage).is_identity else STORED_FORMAT


def profile_path(d: int, d_h: int, storage, n: int, seed: int) -> Path:
    """The cache file of the profile null that serves heads stored as ``storage`` (a name or a
    record; the file named by its null storage's name)."""
    from ...files.user_cache import cache_dir
    from .factors import null_storage

    record = null_storage(storage)
    return cache_dir() / "profile" / (f"profile-d{int(d)}-dh{int(d_h)}-n{int(n)}-seed{int(seed)}"
                                      f"-{record.name}-v{profile_format(record)}.nc")


def _stored(d: int, d_h: int, storage, seed: int) -> list[tuple[int, Path]]:
    """(draws, path) of the cache files of one (d, d_h, storage, seed), fewest draws first."""
    want = profile_path(d, d_h, storage, 0, seed)
    head, tail = want.name.split("-n0-", 1)
    out = []
    for path in want.parent.glob(f"{head}-n*-{tail}"):
        n = path.name[len(head) + 2:-len(tail) - 1]
        if n.isdigit():
            out.append((int(n), path))
    return sorted(out)


def _checksum(draws: dict, keys: dict) -> str:
    """The checksum of ``draws`` ({axis: (n,)}, as float64) and ``keys`` (:func:`_keys`)."""
    from ...files.checksum import checksum

    return checksum({a: (("draw",), np.asarray(v, np.float64)) for a, v in draws.items()},
                    keys)


def _read(path: Path, keys: dict, shipped: bool = False) -> dict | None:
    """The draws of the file ``path`` if it holds what ``keys`` say (and, unless ``shipped``,
    matches its checksum), else None (a cached file reported and removed:
    :func:`rmtbase.files.user_cache.damaged`)."""
    import xarray as xr

    from ...files.cache_trust import readable
    from ...files.checksum import CHECKSUM_ATTR, verify
    from ...files.user_cache import damaged
    from .factors import FACTOR_AXES

    if not shipped and not readable(path, "profile null"):  # another user's: neither read
        return None                                         # nor removed
    try:
        with xr.open_dataset(path) as ds:
            ds.load()
    except Exception as exc:  # noqa: BLE001 - any unreadable file is drawn again
        if shipped:
            warnings.warn(f"shipped profile null {path.name} cannot be read ({exc}); drawing it",
                          RuntimeWarning, stacklevel=3)
        else:
            damaged(path, f"it cannot be read: {str(exc)[:120]}")
        return None
    why = None
    if any(str(ds.attrs.get(k)) != str(v) for k, v in keys.items()) or \
            any(a not in ds or ds[a].size != keys["draws"] for a in FACTOR_AXES):
        why = "it does not hold what its name says"
    draws = {a: np.asarray(ds[a].values, dtype=np.float64) for a in FACTOR_AXES} \
        if why is None else None
    if why is None and not shipped:
        why = verify(ds.attrs.get(CHECKSUM_ATTR), _checksum(draws, keys))
    if why is not None:
        if shipped:
            warnings.warn(f"shipped profile null {path.name}: {why}; drawing it",
                          RuntimeWarning, stacklevel=3)
        else:
            damaged(path, why)
        return None
    return draws


def _compact(v) -> np.ndarray:
    """The draws as float32 when that is lossless (factor_axes computes them in float32: half
    the file, 256 kB for 16,000 draws), else as they are."""
    v = np.asarray(v, dtype=np.float64)
    v32 = v.astype(np.float32)
    return v32 if np.array_equal(v32.astype(np.float64), v, equal_nan=True) else v


def _first(draws: dict, n: int) -> dict:
    return {a: v[:n] for a, v in draws.items()}


def _keys(d: int, d_h: int, storage, n: int, seed: int) -> dict:
    """The attributes a cache file of ``n`` draws must carry (its name's keys; ``storage``: the
    null storage's record): what is written and what a read checks."""
    return {"d": int(d), "d_h": int(d_h), "storage": storage.name, "draws": int(n),
            "seed": int(seed), "format": profile_format(storage)}


def _lookup(d: int, d_h: int, storage, n: int, seed: int) -> tuple[dict | None, bool]:
    """(draws, whole): the shipped table or the cache file with the fewest draws ≥ ``n``, its
    first ``n`` (whole = True); else the largest cached table of fewer (a prefix to extend).
    ``storage``: the null storage's record."""
    from .factors import PROFILE_DRAWS

    shipped = shipped_profile(profile_path(d, d_h, storage, PROFILE_DRAWS, seed).name)
    if shipped is not None and n <= PROFILE_DRAWS:
        from importlib import resources

        with resources.as_file(shipped) as p:
            got = _read(p, _keys(d, d_h, storage, PROFILE_DRAWS, seed), shipped=True)
        if got is not None:
            return _first(got, n), True
    from ...files.user_cache import recall

    kept = recall(_memory_key(d, d_h, storage, seed))  # drawn where the cache is unwritable
    m_kept = 0 if kept is None else len(kept[next(iter(kept))])
    if m_kept >= n:
        return {a: v[:n].copy() for a, v in kept.items()}, True
    files = _stored(d, d_h, storage, seed)
    for m, path in [f for f in files if f[0] >= n] + [f for f in files if f[0] < n][::-1]:
        if m < n and m <= m_kept:
            break  # the draws kept in memory are the longer prefix
        got = _read(path, _keys(d, d_h, storage, m, seed))
        if got is not None:
            return _first(got, n), m >= n
    return (kept, False) if kept is not None else (None, False)


def _memory_key(d: int, d_h: int, storage, seed: int) -> tuple:
    """The key of a profile null kept in memory (every key of its file name but the draws)."""
    return ("profile", str(profile_path(d, d_h, storage, 0, seed)))


def cached_profile_null(d: int, d_h: int, storage="float32", n: int | None = None,
                        seed: int = 0, client=None, progress: bool = False
                        ) -> dict[str, np.ndarray]:
    """The first ``n`` draws of :func:`rmtbase.scoring.profile.factors.profile_null` for ``storage``,
    from a shipped or cached table of ≥ n draws, else drawn (continuing the largest shorter cached
    table) and cached atomically; so the result depends on ``n`` alone. ``client``: Dask chunks.
    ``progress``: report draws on stderr (:mod:`rmtbase.progress`)."""
    import xarray as xr

    from ..._version import __version__
    from ...files.atomic import write_netcdf
    from ...files.checksum import CHECKSUM_ATTR
    from .factors import FACTOR_AXES, PROFILE_DRAWS, null_storage, profile_null

    n = PROFILE_DRAWS if n is None else int(n)
    storage = null_storage(storage)  # the null storage's record; its name where written
    got, whole = _lookup(d, d_h, storage, n, seed)
    if whole:
        return got
    start = 0 if got is None else len(got[FACTOR_AXES[0]])
    path = profile_path(d, d_h, storage, n, seed)
    from ...files.user_cache import said_unwritable, writable
    from ...progress import NULL_CPU_EVERY, message, progress_bar

    if progress:
        kept = ("kept in memory" if said_unwritable() or not writable(path.parent)
                else f"cached in {path.parent} for next time")
        message(f"rmtbase: drawing the profile null d={int(d)}, d_h={int(d_h)}, {storage.name} "
                f"storage, {f'{n} draws' if not start else f'draws {start} to {n}'} ({kept})")
    with progress_bar(n - start, enabled=bool(progress), cpu_every=NULL_CPU_EVERY,
                      desc=f"rmtbase profile null d={int(d)}, d_h={int(d_h)} ({storage.name})"
                      ) as bar:
        new = profile_null(d, d_h, storage, n=n, seed=seed, client=client, progress=bar,
                           start=start)
    draws = new if got is None else {a: np.concatenate([got[a], new[a]]) for a in FACTOR_AXES}
    keys = _keys(d, d_h, storage, n, seed)
    stored = {a: _compact(v) for a, v in draws.items()}
    ds = xr.Dataset({a: (("draw",), v) for a, v in stored.items()},
                    attrs=dict(keys, rmtbase_version=__version__,
                               definition="Gaussian null of the profile's factor axes "
                                          "(rmtbase.scoring.profile.axes.profile_null)"))
    ds.attrs[CHECKSUM_ATTR] = _checksum(stored, keys)  # of the values as stored
    from ...files.cache_trust import may_replace

    if not may_replace(path):  # another user's file: our draws kept private (said on reading)
        from ...files.user_cache import remember

        remember(_memory_key(d, d_h, storage, seed), draws)
        return draws
    try:
        write_netcdf(ds, path)
        from ...files.cache_trust import keep_private

        keep_private(path)
    except OSError as exc:  # a read-only cache still scores: said once, the draws kept
        from ...files.user_cache import cache_dir, remember, unwritable

        unwritable(cache_dir(), exc)
        remember(_memory_key(d, d_h, storage, seed), draws)
    return draws


__all__ = ["PROFILE_FORMAT", "SHIPPED_PROFILES", "STORED_FORMAT", "cached_profile_null",
           "profile_format", "profile_path", "shipped_profile"]
