"""One file written all or nothing: the one implementation every writer of a single file uses.

:func:`write_atomic` has a callback fill a temporary file ``.<name>.<pid>-<hex>.tmp`` beside the
target (shortened to fit the file-system limit), fsyncs it and renames it over the target. The
callback runs under :func:`rmtbase.files.interrupts.deferred`, so an error, an interrupt or a kill
never leaves a half-written file under the target's name; the temporary file is removed on the way
out, and those of killed runs by the next write to the same target (:func:`clean_stale`)."""

from __future__ import annotations

import os
import re
import secrets
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from . import disk_space
from .disk_space import is_full, no_space
from .interrupts import check as check_interrupt
from .interrupts import deferred, fault_point

NAME_MAX = 255
_TMP = re.compile(r"^\.(?P<base>.*)\.(?P<pid>\d+)-[0-9a-f]{8}\.tmp$")
_OLD_TMP = re.compile(r"^\.(?P<base>.*)\.[a-z0-9_]{8}\.tmp$")  # mkstemp names of rmtbase < 0.3
_OLD_TMP_AGE = 3600.0  # seconds after which an old-style temporary file is surely abandoned


def name_max(parent: Path) -> int:
    """The longest file name (bytes) the file system of ``parent`` takes."""
    try:
        return int(os.pathconf(parent, "PC_NAME_MAX"))
    except (OSError, ValueError, AttributeError):
        return NAME_MAX


def tmp_name(name: str, tag: str = "tmp", limit: int = NAME_MAX) -> str:
    """``.<name>.<pid>-<hex>.<tag>``, with ``name`` cut so the whole fits ``limit`` bytes."""
    suffix = f".{os.getpid()}-{secrets.token_hex(4)}.{tag}"
    room = limit - 1 - len(suffix)
    base = os.fsdecode(os.fsencode(name)[:room])
    return f".{base}{suffix}"


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _stale(entry: os.DirEntry, name: str) -> bool:
    """Whether folder entry ``entry`` is an abandoned temporary file of a write to ``name``:
    ours with a process that is gone, or an old-style one untouched for an hour."""
    if m := _TMP.match(entry.name):
        return name.startswith(m["base"]) and not pid_alive(int(m["pid"]))
    if (m := _OLD_TMP.match(entry.name)) and m["base"] == name:
        try:
            return time.time() - entry.stat(follow_symlinks=False).st_mtime >= _OLD_TMP_AGE
        except OSError:
            return False
    return False


def clean_stale(path: Path) -> list[Path]:
    """Remove temporary files of earlier writes to ``path`` whose process is gone (and
    old-style ones untouched for an hour); returns what was removed."""
    removed = []
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return removed
    for e in entries:
        if not _stale(e, path.name):
            continue
        try:
            if e.is_file(follow_symlinks=False):
                os.unlink(e.path)
                removed.append(Path(e.path))
        except OSError:
            pass
    return removed


def fsync_dir(path: Path) -> None:
    """Make a rename in folder ``path`` durable (where folders can be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path, write: Callable[[Path], object]) -> Path:
    """Write ``path`` all or nothing: ``write(tmp)`` fills ``tmp``, a path that does not exist yet
    and ends in ``.tmp`` (give a writer that guesses from the name a format). Creates the parent
    folder; an error or interrupt leaves ``path`` as it was. Returns ``path``."""
    path = Path(path)
    parent = path.parent
    parent.mkdir(parents=True, exist_ok=True)
    clean_stale(path)
    tmp = parent / tmp_name(path.name, "tmp", name_max(parent))
    try:
        with deferred():
            write(tmp)
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
        fault_point("file:written")
        check_interrupt()  # one swallowed on its way up ends the run before the replace
        os.replace(tmp, path)
    except BaseException as exc:
        full = is_full(exc, parent)  # before the partial file is removed, freeing its room
        tmp.unlink(missing_ok=True)
        named = _naming(exc, path, tmp, full)
        if named is not None:
            raise named from exc
        raise
    fsync_dir(parent)
    return path


def free_bytes(folder: Path) -> int | None:
    """Bytes free to this user on the file system of ``folder`` (None where unknown)."""
    return disk_space.free_bytes(folder)


def _naming(exc: BaseException, path: Path, tmp: Path, full: bool) -> OSError | None:
    """The error of a failed write of ``path`` as an OSError naming ``path``, or None to raise
    ``exc`` as it is (an OSError naming another file). A write that failed on a full file
    system (``full``, :func:`rmtbase.files.disk_space.is_full`) is ENOSPC whatever the writer
    said: netCDF-C reports it as "Permission denied", HDF5 as a RuntimeError."""
    if full:
        return no_space(exc, path)
    if isinstance(exc, OSError) and exc.filename in (None, str(tmp), tmp):
        return OSError(exc.errno, exc.strerror or str(exc), str(path))
    return None


def write_text(path, text: str) -> Path:
    """Write ``text`` (UTF-8, line ends as given) to ``path`` all or nothing."""

    def fill(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)

    return write_atomic(path, fill)


def write_netcdf(ds, path) -> Path:
    """Write Dataset ``ds`` to netCDF at ``path`` all or nothing, coordinate variables without
    ``_FillValue`` (CF-1.10 §2.5.1; :func:`rmtbase.files.cf.without_coordinate_fill`)."""
    from .cf import without_coordinate_fill

    ds = without_coordinate_fill(ds)
    return write_atomic(path, lambda tmp: to_netcdf(ds, tmp))


_NO_DASK = threading.Lock()


def _no_scheduler(get=None, collection=None):
    return None


def to_netcdf(ds, path, **kwargs):
    """``ds.to_netcdf(path, **kwargs)``, the same file, without xarray's scheduler query (which
    imports dask.distributed, about 0.5 s) when no variable is chunked and no client can exist:
    the answer would only pick this process's lock kind; ``None`` is given, for the call alone."""
    from xarray.backends import locks, writers

    chunked = any(v.chunks is not None for v in ds.variables.values())
    if chunked or "distributed" in sys.modules or not all(
            hasattr(m, "get_dask_scheduler") for m in (locks, writers)):
        return ds.to_netcdf(path, **kwargs)
    with _NO_DASK:
        saved = locks.get_dask_scheduler, writers.get_dask_scheduler
        locks.get_dask_scheduler = writers.get_dask_scheduler = _no_scheduler
        try:
            return ds.to_netcdf(path, **kwargs)
        finally:
            locks.get_dask_scheduler, writers.get_dask_scheduler = saved


def save_figure(fig, path, dpi: int = 100) -> Path:
    """Write the matplotlib figure ``fig`` to ``path`` all or nothing, in the format its name
    ends in (PNG if none)."""
    import warnings

    fmt = Path(path).suffix.lstrip(".").lower() or "png"

    def draw(tmp):
        with warnings.catch_warnings():  # matplotlib's note on its own legend placement
            warnings.filterwarnings("ignore", message="Creating legend with loc=.best.")
            fig.savefig(tmp, dpi=dpi, format=fmt)

    return write_atomic(path, draw)
