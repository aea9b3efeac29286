"""One writer per output folder: a lock taken when the target is checked, before any work.

Two runs started seconds apart into the same new ``--out`` would both find it empty, both
work, and the second would replace the first's finished output. The check of an output folder (:func:`rmtbase.files.output.check_output_dir`) therefore takes an
advisory lock (``flock``) on a lock file beside it, ``<ancestor>/.<relative path>.lock`` in
the nearest folder that exists (the path percent-encoded, so that two targets never share a
lock), and a second process that asks for the same folder is refused at once with one line
naming the process that holds it. The lock is this process's until :func:`release` (the end
of the folder's :class:`~rmtbase.files.output.OutputFolder`) or its exit (an ``atexit``
handler gives back what a failed command still holds, its file removed); the kernel drops a
``flock`` when its holder dies, so even a killed run leaves no lock behind (only the small
lock file, removed by the next run that takes it). A process asking again for a folder it holds
gets it (a command checks its ``--out`` before the work, then writes it).

Where ``fcntl`` does not exist (Windows) or the lock file cannot be made (a read-only folder,
which the check refuses anyway), no lock is taken. ``flock`` is not reliable over some network
file systems (older NFS): there the check of the folder's contents is what remains.
"""

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
