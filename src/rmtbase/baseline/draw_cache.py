"""A null table cached by its number of draws, shared by the whole-matrix nulls: the largest
trusted cached prefix read (:mod:`rmtbase.files.cache_trust`: another user's or a
group/world-writable file is neither read nor removed; a damaged one is reported, removed and
drawn again), then the grown table written back, atomically, readable by all and writable by
its owner only."""

from __future__ import annotations

import warnings

from ..errors import TableError


def read_prefix(found, draws: int, verify, kind: str):
    """``(exact, have, have_path)`` from ``found`` (``[(draws, path)]``, most draws first):
    ``exact`` the first ``draws`` draws of a trusted table holding at least that many, else
    None and ``have`` the largest trusted table (None without one) at ``have_path``;
    ``verify(ds, path)`` raises :class:`TableError` for a table of another cell."""
    from ..files.cache_trust import readable
    from ..files.user_cache import damaged
    from .table_file import read_table

    for k, path in found:
        if not readable(path, kind):  # another user's: neither read nor removed
            continue
        try:
            ds = read_table(path, checksum=True)
            verify(ds, path)
        except TableError as exc:  # reported once, removed, drawn again
            damaged(path, str(exc).removeprefix(f"{path} "), "table")
            continue
        if k >= draws:
            out = ds.isel(draw=slice(0, draws))
            out.attrs["draws"] = int(draws)
            return out, None, None
        return None, ds, path
    return None, None, None


def write_grown(ds, directory, target, have_path, kind: str) -> None:
    """Write ``ds`` to ``target`` in ``directory`` (its prefix at ``have_path`` removed),
    unless ``target`` is another user's file; a failure to write is one warning."""
    from ..files.cache_trust import may_replace
    from .table_file import write_table

    if not may_replace(target):  # another user's file: our draws used, not written over it
        return
    try:
        directory.mkdir(parents=True, exist_ok=True)
        write_table(ds, target, replace="any", mode=0o644)  # nobody else may rewrite it
        if have_path is not None:
            have_path.unlink(missing_ok=True)  # a prefix of the table just written
    except (OSError, TableError) as exc:
        warnings.warn(f"rmtbase: could not cache the {kind} in {directory}: {exc}",
                      RuntimeWarning, stacklevel=3)


__all__ = ["read_prefix", "write_grown"]
