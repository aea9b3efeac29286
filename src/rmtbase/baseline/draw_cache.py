"""A null table cached by its number of draws, shared by the whole-matrix nulls: the largest
trusted cached prefix read (:mod:`rmtbase.files.cache_trust`: another user's or a
group/world-writable file is neither read nor removed; a damaged one is reported, removed and
drawn again), then the grown table written back, atomically, readable by all and writable by
its owner only. A file's draw count is read from its content and compared with its name (a
renamed file is damaged); a name of the pattern whose draw count is no number is ignored with
one warning naming it (:func:`cached_tables`)."""

from __future__ import annotations

import sys
import warnings
from typing import NamedTuple

import numpy as np

from ..errors import TableError


def cached_tables(directory, name_of, kind: str) -> list:
    """``[(draws, path)]`` of the tables in ``directory`` named ``name_of(draws)``, most draws
    first; a file of that pattern whose draw field is not a positive integer (a stray
    ``-nX-``) is ignored with one warning naming it."""
    from ..files.user_cache import said_once

    head, tail = name_of(0).split("-n0-", 1)
    out = []
    for path in directory.glob(f"{head}-n*-{tail}") if directory.is_dir() else ():
        k = path.name[len(head) + 2:-len(tail) - 1]
        if k.isdigit() and int(k) > 0 and path.name == name_of(int(k)):
            out.append((int(k), path))
        elif not said_once(("stray", str(path))):
            warnings.warn(f"rmtbase: ignoring {path} in the {kind} cache: its name does not "
                          "say how many draws it holds", RuntimeWarning, stacklevel=3)
    return sorted(out, key=lambda e: -e[0])


def _held(ds, named: int) -> str | None:
    """Why the table ``ds`` is not the ``named`` draws its file name says (None: it is)."""
    held = int(ds.sizes.get("draw", 0))
    claimed = ds.attrs.get("draws", held)
    if held != named or str(claimed) != str(held):
        return f"it holds {held} draws (attribute draws={claimed}) where its name says {named}"
    return None


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
            wrong = _held(ds, k)
            if wrong:
                raise TableError(wrong)
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


class Cell(NamedTuple):
    """One cached null's cell, as :func:`grown_table` reads and grows it."""

    noun: str  # as messages name it
    label: str  # its shape and storage
    name_of: object  # draws -> file name
    verify: object  # (ds, path) -> None, or TableError for a table of another cell
    draw: object  # (start, count) -> {variable: (count, …)}
    dataset: object  # {variable: array} -> Dataset


def grown_table(cell: Cell, draws: int, progress: bool = False):
    """``cell``'s table of ``draws`` draws from the user cache, else its trusted prefix grown."""
    from ..files.user_cache import cache_dir

    directory = cache_dir()
    found = cached_tables(directory, cell.name_of, cell.noun)
    exact, have, have_path = read_prefix(found, draws, cell.verify, cell.noun)
    if exact is not None:
        return exact
    start = 0 if have is None else have.sizes["draw"]
    if progress:
        print(f"rmtbase: drawing the {cell.noun} {cell.label}, draws {start}...{draws - 1} "
              f"(cached in {directory} for next time)", file=sys.stderr, flush=True)
    new = cell.draw(start, draws - start)
    if have is not None:
        new = {v: np.concatenate([have[v].values, new[v]]) for v in new if v in have}
    ds = cell.dataset(new)
    write_grown(ds, directory, directory / cell.name_of(draws), have_path, cell.noun)
    return ds


__all__ = ["Cell", "cached_tables", "grown_table", "read_prefix", "write_grown"]
