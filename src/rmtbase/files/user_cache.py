"""The user cache directory, where null tables, whole-matrix nulls, constants and JAX's compiled
programs live: ``$RMTBASE_CACHE`` if set, else the platform cache directory
(``$XDG_CACHE_HOME/rmtbase`` or ``~/.cache/rmtbase``, ``~/Library/Caches/rmtbase``,
``%LOCALAPPDATA%\\rmtbase\\Cache``).

A cached file that fails its check is reported once (:func:`damaged`), removed where possible,
and never used; an unwritable cache is said once a process (:func:`unwritable`) and what would
have been written is kept in memory (:func:`remember`, :func:`recall`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def cache_dir() -> Path:
    """The user cache directory (not created here)."""
    env = os.environ.get("RMTBASE_CACHE")
    if env:
        return Path(env).expanduser()
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "rmtbase"
    if os.name == "nt":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "rmtbase" / "Cache"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rmtbase"


_SAID: set = set()  # files and folders already reported by this process
_MEMORY: dict = {}  # {key: value} kept where the cache could not be written
#: Most values :func:`remember` keeps (the oldest forgotten first).
MEMORY_ITEMS = 16


def damaged(path, why: str, what: str = "null") -> None:
    """Report the cached file ``path`` (a ``what``) as failing its check (``why``) by one
    RuntimeWarning, once a process, and remove it where its folder can be written."""
    import stat
    import warnings

    path = Path(path)
    if path not in _SAID:
        _SAID.add(path)
        warnings.warn(f"rmtbase: ignoring cached {what} {path} ({why}); drawing it again",
                      RuntimeWarning, stacklevel=3)
    try:
        if stat.S_ISREG(path.lstat().st_mode) or path.is_symlink():
            path.unlink()
    except OSError:  # gone already, or a read-only cache: never used either way
        pass


def unwritable(directory, exc: BaseException | str) -> None:
    """Say once a process, by one RuntimeWarning, that the cache folder ``directory`` could not be
    written (``exc``, an error or its text) and nulls are kept in memory. A full file system is
    called so whatever the writer said (:func:`rmtbase.files.disk_space.reason`); JAX's own
    compilation-cache warnings fold into this line (:mod:`rmtbase.files.jax_cache`)."""
    import warnings

    from .disk_space import reason

    key = ("unwritable", str(directory))
    if key in _SAID:
        return
    _SAID.add(key)
    warnings.warn(f"rmtbase: could not cache in {directory} ({reason(exc, directory)}); nulls "
                  "drawn and programs compiled now are kept for this run only", RuntimeWarning,
                  stacklevel=3)


def said_once(key) -> bool:
    """Whether ``key`` was said already this process; marks it said (for one-line reports)."""
    if key in _SAID:
        return True
    _SAID.add(key)
    return False


def said_unwritable() -> bool:
    """Whether this process found a cache folder that cannot be written (:func:`unwritable`)."""
    return any(isinstance(k, tuple) and k[0] == "unwritable" for k in _SAID)


def writable(folder) -> bool:
    """Whether files could be made in ``folder`` (its nearest existing folder passes ``access(2)``).
    Creates nothing."""
    p = Path(folder).expanduser().absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p.is_dir() and os.access(p, os.W_OK | os.X_OK)


def remember(key, value) -> None:
    """Keep ``value`` under ``key`` (a hashable naming every key its draws depend on) for the
    rest of the process, where it could not be cached (at most :data:`MEMORY_ITEMS`)."""
    _MEMORY.pop(key, None)
    _MEMORY[key] = value
    while len(_MEMORY) > MEMORY_ITEMS:
        _MEMORY.pop(next(iter(_MEMORY)))


def recall(key):
    """What :func:`remember` kept under ``key``, or None."""
    return _MEMORY.get(key)


def remembered(kind: str) -> list:
    """Every value :func:`remember` kept under a key ``(kind, ...)``, oldest first."""
    return [v for k, v in _MEMORY.items() if isinstance(k, tuple) and k and k[0] == kind]


def forget() -> None:
    """Drop what :func:`remember` kept and what was reported (a fresh process's state)."""
    _MEMORY.clear()
    _SAID.clear()


__all__ = ["cache_dir", "damaged", "forget", "recall", "remember", "remembered",
           "said_once", "said_unwritable", "unwritable", "writable"]
