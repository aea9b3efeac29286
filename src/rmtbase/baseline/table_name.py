"""A σ = 1 null table's file name as a record: :class:`TableName` formats to the name and parses
back from it, the one spelling of both directions.

The name (:data:`PATTERN`) spells every key a table's numbers depend on, and its draws, as
``lowrank-d2048-dh128-all-n2000-seed0-float32-q4_k-dv2-v1.nc``: ensemble (and ``-L<depth>`` for a
network's), d, d_h, statistics, draws, seed, dtype, storage, draws version, format; the storage only
where not float32, the draws version (:func:`rmtbase.baseline.draw_route.draws_version`) only where
not 1. :meth:`TableName.parse` reads the fields by name, not by position (a storage name may hold
``-``): for every name it accepts, ``TableName.parse(name).filename() == name``; any other name is
refused with its reason (:class:`NameRefused`), and a cache listing leaves such files out. The
*request* of a name (:attr:`TableName.request`) is every field but the draws: the files of one
request are the rungs of one growing table (:mod:`rmtbase.baseline.cache_rungs`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

from .table_file import TABLE_FORMAT

#: The name's fields; the storage is whatever lies between the dtype and the optional draws
#: version (lazily, so ``-dv<n>`` is never read as a storage).
_NAME = re.compile(
    r"(?P<ensemble>[a-z]+)(?:-L(?P<depth>\d+))?-d(?P<d>\d+)-dh(?P<d_h>\d+)-(?P<stats>[a-z]+)"
    r"-n(?P<draws>\d+)-seed(?P<seed>\d+)-(?P<dtype>float\d+)"
    r"(?:-(?P<storage>(?!dv\d+-v\d+\.nc\Z).+?))?(?:-dv(?P<draws_version>\d+))?"
    r"-v(?P<format>\d+)\.nc")

#: A storage name a file name could not tell from the draws version.
_VERSION_LIKE = re.compile(r"(?:\A|-)dv\d+\Z")

#: The pattern of the name, as the refusal says it.
PATTERN = ("<ensemble>[-L<depth>]-d<d>-dh<d_h>-<stats>-n<draws>-seed<seed>-<dtype>[-<storage>]"
           "[-dv<n>]-v<format>.nc")


class NameRefused(ValueError):
    """A file name that is not a null table's, with the reason (one line)."""


@dataclass(frozen=True)
class TableName:
    """The keys and draws of one table file (module docstring). ``storage``: the storage's
    name, ``"float32"`` for the identity storage; ``draws_version`` as the name says it (1 where
    it says none)."""

    ensemble: str
    d: int
    d_h: int
    stats: str
    draws: int
    seed: int
    dtype: str
    storage: str = "float32"
    draws_version: int = 1
    format: int = TABLE_FORMAT
    depth: int | None = None

    def __post_init__(self):
        if _VERSION_LIKE.search(self.storage):
            from ..errors import InputError

            raise InputError(f"storage {self.storage!r}: a table's file name would read its "
                             "end as the draws version (-dv<n>)")

    def filename(self) -> str:
        """The file name of these keys and draws."""
        dep = f"-L{self.depth}" if self.depth is not None else ""
        storage = "" if self.storage == "float32" else f"-{self.storage}"
        dv = f"-dv{self.draws_version}" if self.draws_version != 1 else ""
        return (f"{self.ensemble}{dep}-d{self.d}-dh{self.d_h}-{self.stats}-n{self.draws}"
                f"-seed{self.seed}-{self.dtype}{storage}{dv}-v{self.format}.nc")

    @classmethod
    def parse(cls, name: str) -> TableName:
        """The record whose :meth:`filename` is ``name`` (a file name, no folder);
        :class:`NameRefused` with the reason otherwise: not of the pattern, or not the spelling
        rmtbase writes (a leading zero, ``-dv1``, an explicit ``-float32`` storage)."""
        m = _NAME.fullmatch(name)
        if m is None:
            raise NameRefused(f"{name}: not a null table's name ({PATTERN})")
        g = m.groupdict()
        got = cls(ensemble=g["ensemble"], d=int(g["d"]), d_h=int(g["d_h"]), stats=g["stats"],
                  draws=int(g["draws"]), seed=int(g["seed"]), dtype=g["dtype"],
                  storage=g["storage"] or "float32",
                  draws_version=int(g["draws_version"] or 1), format=int(g["format"]),
                  depth=None if g["depth"] is None else int(g["depth"]))
        if got.filename() != name:
            raise NameRefused(f"{name}: not the spelling rmtbase writes for its keys "
                              f"({got.filename()})")
        return got

    @property
    def request(self) -> TableName:
        """Every field but the draws (draws 0): what the rungs of one growing table share."""
        return replace(self, draws=0)

    def entry(self, file) -> dict:
        """The index entry of the file ``file`` holding this table (the keys of a shipped
        index entry: ``file``, ``ensemble``, ``d``, ``d_h``, ``stats``, ``draws``, ``seed``,
        ``dtype``, ``storage``, ``draws_version``, ``format``, ``depth`` where there is one)
        and ``name``, this record."""
        out = {"file": Path(file), "ensemble": self.ensemble, "d": self.d, "d_h": self.d_h,
               "stats": self.stats, "draws": self.draws, "seed": self.seed,
               "dtype": self.dtype, "storage": self.storage,
               "draws_version": self.draws_version, "format": self.format, "name": self}
        if self.depth is not None:
            out["depth"] = self.depth
        return out


def storage_field(record) -> str:
    """The :attr:`TableName.storage` of a :class:`rmtbase.stats.storage.Storage`: its name,
    ``"float32"`` for the identity storage (which names leave out)."""
    return "float32" if record.is_identity else record.name


def read_names(paths) -> tuple[list[tuple[Path, TableName]], list[tuple[Path, str]]]:
    """``(named, refused)`` of ``paths``: ``(path, record)`` of each file whose name parses,
    ``(path, reason)`` of each whose name is refused."""
    names, refused = [], []
    for p in paths:
        try:
            names.append((Path(p), TableName.parse(Path(p).name)))
        except NameRefused as exc:
            refused.append((Path(p), str(exc)))
    return names, refused


__all__ = ["PATTERN", "NameRefused", "TableName", "read_names", "storage_field"]
