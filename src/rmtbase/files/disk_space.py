"""A file system without room, named for what happened.

A full disk does not always say so. netCDF-C turns HDF5's failure to create or extend a file
into ``EACCES`` ("Permission denied"), and HDF5 into ``RuntimeError("NetCDF: HDF error")``; a
writer of its own may raise anything. :func:`is_full` reads the error together with the room
left where it was writing (``statvfs(2)``): ``ENOSPC``/``EDQUOT`` are full by their own word,
any other failure is when the file system has under :data:`MIN_ROOM` bytes free. Such an error
is reported as :data:`NO_SPACE` (:func:`reason`, :func:`no_space`), so the user frees room
instead of changing permissions."""

from __future__ import annotations

import errno
import os
from pathlib import Path

#: What a full disk is called in rmtbase's one line.
NO_SPACE = "no space left on device"
#: Bytes free under which a failed write is put down to a full file system.
MIN_ROOM = 2**20


def free_bytes(folder) -> int | None:
    """Bytes free to this user on the file system of ``folder``'s nearest existing folder
    (None where unknown)."""
    p = Path(folder).expanduser().absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        st = os.statvfs(p)
    except (OSError, AttributeError):
        return None
    return st.f_bavail * st.f_frsize


def is_full(exc: BaseException, folder=None) -> bool:
    """Whether ``exc``, raised while writing in ``folder``, comes from a file system without
    room: ENOSPC or EDQUOT, or any failure (an OSError, HDF5's RuntimeError, …; not an
    interrupt) while ``folder``'s file system has under :data:`MIN_ROOM` bytes free."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    if not isinstance(exc, Exception) or folder is None:
        return False
    free = free_bytes(folder)
    return free is not None and free < MIN_ROOM


def reason(exc: BaseException | str, folder=None) -> str:
    """Why a write in ``folder`` failed, in one line: :data:`NO_SPACE` for a full file system
    (:func:`is_full`; ``"disk quota exceeded"`` for EDQUOT), "read-only file system" for EROFS,
    else the error's own first line (an OSError's ``strerror``, lower case)."""
    if isinstance(exc, str):
        text = (exc.strip().splitlines() or [""])[0]
        if "[Errno 28]" in text or "No space left on device" in text:
            return NO_SPACE
        free = free_bytes(folder) if folder is not None else None
        return NO_SPACE if free is not None and free < MIN_ROOM else text
    if isinstance(exc, OSError) and exc.errno == errno.EDQUOT:
        return "disk quota exceeded"
    if is_full(exc, folder):
        return NO_SPACE
    if isinstance(exc, OSError) and exc.errno == errno.EROFS:
        return "read-only file system"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[:1].lower() + exc.strerror[1:]
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def no_space(exc: BaseException, path) -> OSError:
    """The failed write of ``path`` as ``OSError(ENOSPC)`` in the system's words ("No space
    left on device"; EDQUOT kept as it is), naming ``path``."""
    code = exc.errno if isinstance(exc, OSError) and exc.errno == errno.EDQUOT else errno.ENOSPC
    return OSError(code, os.strerror(code), str(path))


__all__ = ["MIN_ROOM", "NO_SPACE", "free_bytes", "is_full", "no_space", "reason"]
