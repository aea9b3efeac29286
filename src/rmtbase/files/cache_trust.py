"""Whose cache file this is: files another user could have written are not read by default.

A cached table's checksum (:mod:`rmtbase.files.checksum`) catches accidents — truncation, flipped
bits, a foreign or swapped file — but not a deliberate edit that recomputes it: anyone who can
write a cache file can change the numbers a score reads. So a cached file is used only when the
current user wrote it and nobody else can rewrite it: owned by the effective user (the file and,
for a link, the link itself) and without group or other write permission. A file that fails is
not read and not removed (it may be another user's): one :class:`UntrustedCache` warning names it
and the table is drawn again for this process alone (:func:`may_replace` tells the writer to keep it
in memory rather than replace another user's file).

``RMTBASE_CACHE_TRUST`` names folders whose files are trusted whoever wrote them (a team's shared
cache): one or more paths separated by ``os.pathsep``; a file inside one of them (after resolving
links) passes. Where the platform has no user ids (``os.geteuid`` missing), every file passes.

Every cache kind is checked here alike: the heads' σ = 1 tables, the profile and composition
nulls, the whole-matrix nulls, the analytic constants and a collection's entries call
:func:`check_trusted` or :func:`readable` before reading a file, :func:`may_replace` before
writing one and :func:`keep_private` after."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import TableError

#: Environment variable naming folders whose cache files are trusted whoever wrote them.
TRUST_ENV = "RMTBASE_CACHE_TRUST"


class UntrustedCache(TableError):
    """A cached file another user wrote or could rewrite: not read, not removed."""


def trusted_folders() -> list[Path]:
    """The folders named in :data:`TRUST_ENV`, resolved (empty entries ignored)."""
    raw = os.environ.get(TRUST_ENV, "")
    return [Path(p).expanduser().resolve() for p in raw.split(os.pathsep) if p.strip()]


def untrusted_why(path) -> str | None:
    """Why the cached file ``path`` may have been written by another user, or None where it is
    this user's alone (or its folder is named in :data:`TRUST_ENV`, or the platform has no user
    ids). A missing file is None: the reader reports it."""
    if not hasattr(os, "geteuid"):
        return None
    path = Path(path)
    try:
        real = path.resolve()
        if any(real.is_relative_to(f) for f in trusted_folders()):
            return None
        link, target = os.lstat(path), os.stat(path)
    except OSError:
        return None
    me = os.geteuid()
    for st in (link, target):
        if st.st_uid != me:
            return f"owned by user id {st.st_uid}, not this user ({me})"
    if target.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        who = "other users" if target.st_mode & stat.S_IWOTH else "its group"
        return f"writable by {who} (mode {stat.filemode(target.st_mode)})"
    return None


def check_trusted(path, what: str = "table") -> None:
    """:class:`UntrustedCache` naming ``path`` and why, unless :func:`untrusted_why` passes it.
    Warns once a process (the warning is the user's only notice; the caller redraws).
    ``what``: the kind of cached file, as the warning names it."""
    why = untrusted_why(path)
    if why is None:
        return
    import warnings

    from .user_cache import _SAID

    if ("untrusted", str(path)) not in _SAID:
        _SAID.add(("untrusted", str(path)))
        warnings.warn(f"rmtbase: not using cached {what} {path} ({why}); drawing a private copy "
                      f"for this run (name its folder in {TRUST_ENV} to trust it)",
                      RuntimeWarning, stacklevel=3)
    raise UntrustedCache(f"{path} is not trusted: {why}")


def readable(path, what: str = "table") -> bool:
    """Whether a cache reader may read ``path``: True where :func:`untrusted_why` passes it, else
    False after :func:`check_trusted`'s one warning (the caller draws again)."""
    try:
        check_trusted(path, what)
    except UntrustedCache:
        return False
    return True


def keep_private(path) -> None:
    """Take group and other write permission off the cache file ``path`` just written (a umask
    such as 002 grants them), so that this user's next read trusts it; quietly where it cannot."""
    try:
        mode = os.stat(path).st_mode
        if mode & (stat.S_IWGRP | stat.S_IWOTH):
            os.chmod(path, stat.S_IMODE(mode) & ~(stat.S_IWGRP | stat.S_IWOTH))
    except OSError:
        pass


def may_replace(path) -> bool:
    """Whether a cache writer may replace ``path``: it is missing, or it and its link are owned by
    this user (a file of this user's that others could write is replaced by a private one)."""
    if not hasattr(os, "geteuid"):
        return True
    try:
        link = os.lstat(path)
    except OSError:
        return True  # missing
    try:
        target = os.stat(path)
    except OSError:
        target = link  # a dangling link: the link is what is replaced
    return link.st_uid == target.st_uid == os.geteuid()


__all__ = ["TRUST_ENV", "UntrustedCache", "check_trusted", "keep_private", "may_replace", "readable",
           "trusted_folders", "untrusted_why"]
