"""One writer per output folder: a lock taken when the target is checked, before any work.

:func:`rmtbase.files.output.check_output_dir` takes an advisory ``flock`` on
``<ancestor>/.<relative path>.lock`` in the nearest existing folder (the path
percent-encoded); a second process asking for the same folder is refused with one line naming
the holder. The lock is held until :func:`release` or exit (the kernel drops it when its holder
dies); a process asking again for a folder it holds gets it. Without ``fcntl`` or where the lock
file cannot be made, no lock is taken; ``flock`` is unreliable over some network file systems."""

from __future__ import annotations

import atexit
import hashlib
import os
from pathlib import Path
from urllib.parse import quote

from ..errors import InputError

#: Locks this process holds: {folder path: (lock file, open descriptor)}; the state of
#: held locks is inherently the process's (a ``flock`` belongs to an open file).
_HELD: dict[str, tuple[Path, int]] = {}


def lock_path(folder: Path) -> Path:
    """The lock file of output folder ``folder`` (absolute): in its nearest existing
    ancestor, named after the path below it."""
    anc = folder.parent
    while not anc.exists() and anc != anc.parent:
        anc = anc.parent
    name = quote(folder.relative_to(anc).as_posix(), safe="")
    if len(name) > 200:
        name = name[:120] + "-" + hashlib.sha256(name.encode()).hexdigest()[:16]
    return anc / f".{name}.lock"


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
    except OSError:
        text = ""
    return f"process {text}" if text.isdigit() else "another process"


def acquire(folder: Path) -> bool:
    """Take the lock of ``folder`` for this process; True if held (now or already),
    False where no lock can be taken; :class:`InputError` if another process holds it."""
    key = os.fspath(folder)
    if key in _HELD:
        return True
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return False
    path = lock_path(folder)
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            who = _holder(fd)
            os.close(fd)
            raise InputError(f"{folder} is being written by {who} (another rmtbase run "
                             "into the same output folder); wait for it to finish or give "
                             "another --out") from None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:  # not a file its last holder removed while this process opened it
            break
        os.close(fd)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    if not _HELD:  # a command that fails before it writes leaves no lock file behind
        atexit.unregister(release_all)  # registered once
        atexit.register(release_all)
    _HELD[key] = (path, fd)
    return True


def release(folder: Path) -> None:
    """Give the lock of ``folder`` back (and remove its file); nothing if not held."""
    held = _HELD.pop(os.fspath(folder), None)
    if held is None:
        return
    path, fd = held
    try:
        os.unlink(path)  # while still locked: a process that opened it sees another inode
    except OSError:
        pass
    os.close(fd)


def release_all() -> None:
    """Give back every lock this process holds (at exit: a command that failed between its
    check and its output leaves no lock file)."""
    for key in list(_HELD):
        release(Path(key))


__all__ = ["acquire", "lock_path", "release", "release_all"]
