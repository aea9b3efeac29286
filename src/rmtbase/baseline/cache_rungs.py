"""One cache file per null-table request: the rungs of a growing table kept as the largest.

A σ = 1 table's cache name (:func:`rmtbase.baseline.cache.table_filename`) spells every key its
numbers depend on — ensemble, shape, statistics, seed, dtype, storage, draws version, format —
and its draws, ``-n<draws>``. A *rung* is the file of one request at one draw count. Draw ``i``
depends on (seed, d, d_h, i) only (:mod:`rmtbase.baseline.tables`), so a request's ``n``-draw
table is the first ``n`` draws of any larger one of the same request: the largest rung serves
every request a shorter one serves, and the cache keeps that one alone.

Replacement. A grown table is written under its own name by an atomic rename
(:func:`rmtbase.files.atomic.write_atomic`: ``os.replace`` of a complete temporary file that was
read back and checksummed), then every other rung of its request is unlinked (:func:`keep_largest`).
At every instant each name holds a whole, verified table or nothing, and at least one file serving
the request exists. A reader that already opened a shorter rung keeps reading it: unlinking a name
leaves an open file's data in place until it is closed (POSIX; where the system refuses to unlink
an open file, the rung stays and the next use removes it). A reader that listed the folder before
a rung was removed and then finds it gone looks again (:data:`VANISHED`) instead of reporting
damage.

Compaction. A cache holding several rungs of a request (written by another version of rmtbase, by
a sweep, or left by a run killed between the rename and the unlink) is compacted on the request's
first use (:func:`compact`): the largest rung that passes its checksum and name check is kept and
the rest removed; a rung that fails is reported and removed
(:func:`rmtbase.files.user_cache.damaged`), one that is not trusted
(:mod:`rmtbase.files.cache_trust`) is skipped and left alone. Nothing is removed before a larger
rung has been verified, so a failed compaction never loses the only good table. Two processes compacting at once converge: each keeps the largest, and removing a
name already gone is not an error."""

from __future__ import annotations

import os
from pathlib import Path

#: :func:`compact`'s answer when a rung disappeared between the listing and the read (another
#: process kept a larger one): list the folder again.
VANISHED = object()


def request_of(entry: dict):
    """What the rungs of a cached file's index entry share: its name's request (every field but
    the draws, :attr:`rmtbase.baseline.table_name.TableName.request`)."""
    return entry["name"].request


def rungs(entries: list[dict]) -> dict:
    """Cached-file entries (:func:`rmtbase.baseline.cache.cached_entries`) grouped by request
    (:func:`request_of`), each group largest first."""
    out: dict = {}
    for e in entries:
        out.setdefault(request_of(e), []).append(e)
    return {k: sorted(v, key=lambda e: -e["draws"]) for k, v in out.items()}


def _unlink(path: Path) -> None:
    """Remove ``path`` (a regular file or a link), quietly where it is gone or cannot be
    removed (an open file on a system that refuses, a read-only folder)."""
    try:
        os.unlink(path)
    except OSError:
        pass


def read_cached(entry: dict):
    """The cached table of index entry ``entry``, its checksum and name verified; a
    :class:`rmtbase.errors.TableError` otherwise, an
    :class:`rmtbase.files.cache_trust.UntrustedCache` (said once) where another user wrote it or
    could rewrite it."""
    from ..files.cache_trust import check_trusted
    from .table_check import verify_table
    from .table_file import read_table

    check_trusted(entry["file"])
    ds = read_table(entry["file"], checksum=True)
    verify_table(ds, entry, entry["file"])
    return ds


def compact(group: list[dict], read):
    """The largest verified rung of one request's ``group`` (:func:`rungs`) as ``(entry,
    table)``, every other rung removed; None where none verifies, :data:`VANISHED` where a rung
    was removed by another process while being read. ``read(entry)``: the table, or
    :class:`rmtbase.errors.TableError`. A rung that fails is reported and removed; none is removed
    before a larger one verified."""
    from ..errors import TableError
    from ..files.cache_trust import UntrustedCache
    from ..files.user_cache import damaged

    for i, entry in enumerate(group):
        path = Path(entry["file"])
        try:
            table = read(entry)
        except UntrustedCache:  # another user's (or others could write it): neither read nor
            continue            # removed, and no shorter rung removed on its account
        except TableError as exc:
            if not os.path.lexists(path):
                return VANISHED
            damaged(path, str(exc).removeprefix(f"{path} "), "table")
            continue
        for shorter in group[i + 1:]:
            _unlink(Path(shorter["file"]))
        return entry, table
    return None


def keep_largest(entries: list[dict], written: Path) -> None:
    """After ``written`` (a rung just renamed into place) is in the cache, remove every rung of its
    request but the largest (``entries``: the folder's cached-file entries, listed after the
    write). A larger rung of another process is kept and ``written`` removed: it was verified by
    its writer before its rename."""
    from ..files.cache_trust import untrusted_why

    written = Path(written)
    mine = [e for e in entries if untrusted_why(e["file"]) is None]  # others' files left alone
    for group in rungs(mine).values():
        if any(Path(e["file"]) == written for e in group):
            for e in group[1:]:
                _unlink(Path(e["file"]))


__all__ = ["VANISHED", "compact", "keep_largest", "read_cached", "request_of", "rungs"]
