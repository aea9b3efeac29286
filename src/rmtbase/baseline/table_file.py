"""Reading and writing rmtbase tables (netCDF4): clear errors, atomic writes.

A file that is missing, not netCDF4, not an rmtbase table, truncated or of a newer table format
raises :class:`rmtbase.errors.TableError` naming the file. Writes go to a temporary file in the
same directory, are fsynced and read back, then renamed over the target, so an error or an
interrupt never replaces a good file with a broken one.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import TableError

if TYPE_CHECKING:
    import xarray as xr

#: Version of the table layout and key derivation; part of every cache key. Readers accept
#: this and older.
TABLE_FORMAT = 1

def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def read_table(path) -> xr.Dataset:
    """Open an rmtbase table fully into memory; :class:`TableError` naming ``path`` on a
    missing, foreign, truncated or newer-format file."""
    import xarray as xr

    path = Path(path)
    if not path.is_file():
        raise TableError(f"{path}: no such file")
    try:
        with xr.open_dataset(path, engine="netcdf4") as ds:
            ds = ds.load()
    except Exception as exc:  # netCDF4/HDF5 raise many types for broken files
        raise TableError(f"{path} is not a readable netCDF4 file ({_one_line(exc)})") from exc
    fmt = ds.attrs.get("rmtbase_table_format")
    if fmt is None:
        raise TableError(f"{path} is not an rmtbase table (no rmtbase_table_format attribute)")
    if int(fmt) > TABLE_FORMAT:
        raise TableError(f"{path} has table format {fmt}; this rmtbase reads up to {TABLE_FORMAT}")
    # product-network tables (rmtbase.baseline.network_tables) have dims (d, depth, gain, draw)
    network = ds.attrs.get("rmtbase_table_kind") == "product_network"
    missing = ({"d", "depth", "gain", "draw"} if network else {"d", "d_h", "draw"}) - set(ds.dims)
    if missing or int(ds.attrs.get("draws", -1)) != ds.sizes["draw"] or not ds.data_vars:
        raise TableError(f"{path} is a damaged rmtbase table (dims {dict(ds.sizes)})")
    return ds


def check_writable(path) -> Path:
    """Fail early (before hours of Monte Carlo) if ``path`` cannot be written."""
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir() or not parent.is_dir() or not os.access(parent, os.W_OK):
        raise TableError(f"cannot write {path}: not a writable file in an existing directory")
    return path


def write_table(ds: xr.Dataset, path) -> Path:
    """Write ``ds`` to netCDF4 at ``path`` atomically: temporary file in the same directory,
    fsync, read back, ``os.replace``. An error or interrupt leaves ``path`` as it was."""
    path = check_writable(path)
    parent = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
    os.close(fd)
    try:
        enc = {v: {"zlib": True, "complevel": 4, "shuffle": True} for v in ds.data_vars}
        ds.to_netcdf(tmp, engine="netcdf4", format="NETCDF4", encoding=enc)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        read_table(tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise TableError(f"cannot write {path}: {_one_line(exc)}") from exc
        raise
    try:
        dfd = os.open(parent, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return path
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    return path
