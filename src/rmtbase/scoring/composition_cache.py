"""The composition and QK-overlap Gaussian nulls on disk: drawn once per (kind, d, d_h,
draws, seed, storage).

Since the composition null is sized by its own Monte Carlo error (issue 56:
:attr:`rmtbase.stats.null_kind.GaussianNull.composition_draws` = 18,000, the size of the
statistics' joint null), its draws and the overlap's cost a run more than the scores at
small and middle shapes (GPT-2 small, 768 × 64: ≈ 20 CPU-s more than at 2,000 draws), so
they are kept in the user cache (:func:`rmtbase.files.user_cache.cache_dir`, folder
``composition``) like the null tables and the profile null: one ``.npy`` file of the sorted
draws per key, its name spelling every key, written all or nothing
(:func:`rmtbase.files.atomic.write_atomic`). A file that cannot be read, or whose length or
values do not fit its name, is drawn again with a warning. The numbers are those the samplers
return (same seed, same numbers on the same backend): a run's output does not depend on what
the cache holds.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

#: Version of the draws (part of the name): a change of sampler that changes the numbers
#: bumps it, so an older file is never read as the new draws.
FORMAT = 1


def null_path(kind: str, d: int, d_h: int, n: int, seed: int, storage: str) -> Path:
    """The cache file of ``kind`` (``composition``, ``overlap-distinct``, ``overlap-shared``)."""
    from ..files.user_cache import cache_dir

    return cache_dir() / "composition" / (f"{kind}-d{int(d)}-dh{int(d_h)}-n{int(n)}"
                                          f"-seed{int(seed)}-{storage}-v{FORMAT}.npy")


def _read(path: Path, n: int) -> np.ndarray | None:
    try:
        got = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        return None
    except Exception as exc:  # noqa: BLE001 - any unreadable file is drawn again
        warnings.warn(f"composition null cache file {path.name} cannot be read ({exc}); "
                      "drawing it again", RuntimeWarning, stacklevel=3)
        return None
    ok = (got.shape == (int(n),) and got.dtype == np.float64 and np.isfinite(got).all()
          and bool(np.all(got[1:] >= got[:-1])) and bool(np.all(got >= 0)))
    if not ok:
        warnings.warn(f"composition null cache file {path.name} does not hold what its name "
                      "says; drawing it again", RuntimeWarning, stacklevel=3)
        return None
    return got


def cached_null(kind: str, d: int, d_h: int, n: int, seed: int, storage: str,
                draw: Callable[[], np.ndarray]) -> np.ndarray:
    """The sorted null draws of ``kind`` from the cache, else ``draw()`` (sorted float64,
    ``n`` of them) stored there. A cache that cannot be written is said once and skipped."""
    path = null_path(kind, d, d_h, n, seed, storage)
    got = _read(path, n)
    if got is not None:
        return got
    got = np.asarray(draw(), dtype=np.float64)
    if got.shape != (int(n),):  # a drawing bug, never cached
        return got
    try:
        from ..files.atomic import write_atomic

        write_atomic(path, lambda tmp: _save(tmp, got))
    except OSError as exc:
        warnings.warn(f"rmtbase: could not cache the composition null in {path.parent}: {exc}",
                      RuntimeWarning, stacklevel=2)
    return got


def _save(tmp: Path, values: np.ndarray) -> None:
    with open(tmp, "wb") as f:
        np.save(f, values, allow_pickle=False)


__all__ = ["FORMAT", "cached_null", "null_path"]
