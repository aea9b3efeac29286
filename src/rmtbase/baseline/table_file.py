"""Reading and writing rmtbase tables (netCDF4): clear errors, atomic writes.

A missing, non-netCDF4, foreign, truncated, malformed or newer-format file raises
:class:`rmtbase.errors.TableError` naming it. Written tables carry a checksum of variables and
keys (:func:`table_checksum`; required by the user cache) and are written atomically, read back
before the rename. :func:`check_output_file` validates a target before any work (a writable
existing directory, a fitting name, room); an existing file is replaced only if it is an earlier
rmtbase table (``replace="table"``; a link is followed) or, with ``replace="any"``, any regular
file or link (the link itself replaced)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import TableError
from ..files.atomic import name_max, tmp_name, to_netcdf, write_atomic
from ..files.cf import decode_table, encode_table
from ..files.interrupts import deferred, fault_point  # fault_point: the tests' hook

if TYPE_CHECKING:
    import xarray as xr

#: Version of the table layout and key derivation; part of every cache key. Readers accept
#: this and older.
TABLE_FORMAT = 1
#: The global attributes a table's checksum covers (those present): what its draws were
#: made from.
CHECKSUM_KEYS = ("rmtbase_table_format", "rmtbase_table_kind", "ensemble", "stats", "seed",
                 "draws", "sigma_q", "sigma_k", "sigma", "dtype", "storage_dtype", "cells",
                 "m", "n", "sampler", "key_derivation", "draw_block", "conventions",
                 "scaling_factor", "analytic_reference_values")
#: The attributes of each variable it covers (how a value scales and what it is).
CHECKSUM_VAR_KEYS = ("sigma_power", "matrix", "units", "rmtbase_units")


def table_checksum(ds: xr.Dataset) -> str:
    """The checksum of a table as written (after :func:`rmtbase.files.cf.encode_table`): of its
    variables and :data:`CHECKSUM_KEYS`."""
    from ..files.checksum import dataset_checksum

    return dataset_checksum(ds, CHECKSUM_KEYS, CHECKSUM_VAR_KEYS)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def read_table(path, *, checksum: bool = False) -> xr.Dataset:
    """Open an rmtbase table fully into memory (:class:`TableError` naming ``path`` on a bad file).
    ``checksum``: require the file's checksum and that it match. The attribute is not returned."""
    import xarray as xr

    from ..files.checksum import CHECKSUM_ATTR, verify

    path = Path(path)
    if not path.is_file():
        raise TableError(f"{path}: no such file")
    try:
        with deferred(), xr.open_dataset(path, engine="netcdf4") as ds:  # no interrupt in HDF5
            ds = ds.load()
    except Exception as exc:  # netCDF4/HDF5 raise many types for broken files
        raise TableError(f"{path} is not a readable netCDF4 file ({_one_line(exc)})") from exc
    stored = ds.attrs.pop(CHECKSUM_ATTR, None)
    if checksum:
        why = verify(stored, table_checksum(ds))
        if why is not None:
            raise TableError(f"{path} fails its check: {why}")
    ds = decode_table(ds)  # units as written (rmtbase.files.cf.encode_table)
    fmt = ds.attrs.get("rmtbase_table_format")
    if fmt is None:
        raise TableError(f"{path} is not an rmtbase table (no rmtbase_table_format attribute)")
    try:
        fmt = int(fmt)
        draws = int(ds.attrs.get("draws", -1))
    except (TypeError, ValueError, OverflowError):
        raise TableError(f"{path} is a damaged rmtbase table (rmtbase_table_format="
                         f"{str(ds.attrs.get('rmtbase_table_format'))[:40]!r}, draws="
                         f"{str(ds.attrs.get('draws'))[:40]!r} are not integers)") from None
    if fmt > TABLE_FORMAT:
        raise TableError(f"{path} has table format {fmt}; this rmtbase reads up to {TABLE_FORMAT}")
    # product-network tables (rmtbase.baseline.network_tables) have dims (d, depth, gain, draw),
    # whole-matrix nulls (rmtbase.baseline.matrix_null, heavy_tail_null) the draws only
    need = {"product_network": {"d", "depth", "gain", "draw"}, "matrix_null": {"draw"},
            "heavy_tail_null": {"draw"}}.get(
        ds.attrs.get("rmtbase_table_kind"), {"d", "d_h", "draw"})
    missing = need - set(ds.dims)
    if missing or draws != ds.sizes["draw"] or not ds.data_vars:
        raise TableError(f"{path} is a damaged rmtbase table (dims {dict(ds.sizes)})")
    return ds


def first_draws(ds: xr.Dataset, n: int) -> xr.Dataset:
    """Draws ``0 .. n-1`` of ``ds`` with ``attrs["draws"] = n`` (a copy): the ``n``-draw table of
    the same cell."""
    if ds.sizes["draw"] == n:
        return ds
    if not 0 < n < ds.sizes["draw"]:
        raise TableError(f"cannot take {n} draws of a table of {ds.sizes['draw']}")
    out = ds.isel(draw=slice(0, int(n))).copy(deep=True)
    out.attrs["draws"] = int(n)
    return out


def _is_table(path: Path) -> bool:
    """Whether ``path`` is a netCDF4 file with an ``rmtbase_table_format`` attribute (reads
    the attributes only)."""
    try:
        import netCDF4

        with netCDF4.Dataset(path, "r") as nc:
            return "rmtbase_table_format" in nc.ncattrs()
    except Exception:  # noqa: BLE001 - any unreadable file is "not a table"
        return False


def _free_bytes(parent: Path) -> int | None:
    try:
        st = os.statvfs(parent)
    except (OSError, AttributeError):
        return None
    return st.f_bavail * st.f_frsize


def _fmt(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} TiB"


def check_output_file(path, *, size: int = 0, replace: str = "table") -> Path:
    """The target ``path`` of a table, resolved, or :class:`TableError` saying why it cannot be
    written. ``size``: bytes needed. ``replace``: ``"table"`` or ``"any"`` (module docstring)."""
    raw = os.fspath(path)
    if not raw:
        raise TableError("the output file name is empty")
    p = Path(os.path.expanduser(raw))
    limit = name_max(p.parent if p.parent.is_dir() else Path("."))
    if len(os.fsencode(p.name)) > limit:  # before any stat, which would fail on it
        raise TableError(f"cannot write {p.name[:40]}…: the name has {len(os.fsencode(p.name))} "
                         f"bytes, more than the {limit} its file system allows")
    follow = replace == "table"  # the user's --out follows a link; the cache replaces links
    if follow and p.is_symlink():
        p = Path(os.path.realpath(p))
    if p.name in ("", ".", ".."):
        raise TableError(f"cannot write {raw}: give a file name, not a directory")
    parent = p.parent
    try:
        st = os.stat(p) if follow else os.lstat(p)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise TableError(f"cannot write {p}: {_one_line(exc)}") from exc
    if st is not None and stat.S_ISLNK(st.st_mode):
        st = None  # replace="any": the link itself is replaced, never what it points to
    if st is not None and not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise TableError(f"cannot write {p}: it exists and is {kind} (refusing to replace it)")
    if not parent.is_dir():
        raise TableError(f"cannot write {p}: {parent} is not an existing directory")
    limit = name_max(parent)
    if st is not None and replace == "table" and not _is_table(p):
        raise TableError(f"{p} exists and is not an rmtbase table; remove it or choose another "
                         "name (only an earlier table is replaced)")
    probe = parent / tmp_name(p.name, "tmp", limit)
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        why = "read-only file system" if exc.errno == errno.EROFS else _one_line(exc)
        raise TableError(f"cannot write {p}: {parent} does not take new files ({why})") from exc
    free = _free_bytes(parent)
    if size and free is not None and free < size:
        raise TableError(f"cannot write {p}: it needs about {_fmt(size)}, and its file system "
                         f"has {_fmt(free)} free")
    return p


def check_writable(path) -> Path:
    """Earlier name of :func:`check_output_file` (kept for callers)."""
    return check_output_file(path)


def table_bytes(n_values: int, itemsize: int = 4) -> int:
    """Bytes to reserve for a table of ``n_values`` numbers (uncompressed, plus 1 MiB)."""
    return int(n_values) * int(itemsize) + 2**20


def write_table(ds: xr.Dataset, path, *, replace: str = "table", mode: int = 0o666) -> Path:
    """Write ``ds`` to netCDF4 at ``path`` atomically (read back before the rename); one-line
    :class:`TableError` on failure, ``path`` left as it was. ``replace``: see
    :func:`check_output_file`; ``mode``: the file's permissions, less the umask."""
    from ..files.checksum import CHECKSUM_ATTR

    size = table_bytes(sum(v.size for v in ds.data_vars.values()), 8)
    path = check_output_file(path, size=size, replace=replace)
    parent = path.parent

    def fill(tmp: Path) -> None:
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        fault_point("write:created")
        enc = {v: {"zlib": True, "complevel": 4, "shuffle": True} for v in ds.data_vars}
        encoded = encode_table(ds)
        encoded.attrs = {**encoded.attrs, CHECKSUM_ATTR: table_checksum(encoded)}
        to_netcdf(encoded, tmp, engine="netcdf4", format="NETCDF4", encoding=enc)
        fault_point("write:data")
        read_table(tmp, checksum=True)
        fault_point("write:verified")
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, mode & ~umask)

    try:
        write_atomic(path, fill)  # under deferred: an interrupt inside HDF5 would hang
    except BaseException as exc:
        if isinstance(exc, TableError | KeyboardInterrupt | SystemExit | MemoryError):
            raise
        if isinstance(exc, Exception):  # OSError, netCDF/HDF5's RuntimeError on a full disk
            free = _free_bytes(parent)
            room = f"; {_fmt(free)} free on its file system" if free is not None else ""
            from ..files.disk_space import NO_SPACE, reason

            why = reason(exc, parent)
            why = why if why == NO_SPACE else _one_line(exc)
            raise TableError(f"cannot write {path}: {why}{room}") from exc
        raise
    fault_point("write:replaced")
    return path
