"""JAX's persistent compilation cache under the ``rmtbase`` executable.

:func:`use` points JAX at ``<user cache>/jax`` (:func:`rmtbase.files.user_cache.cache_dir`) when
that folder can be written and its file system has room (:data:`MIN_FREE`); on a read-only or
full one JAX would warn once per compiled program and leave truncated entries behind, which it
then fails to read in every later run.

:func:`fold` takes JAX's own warnings about that cache ("Error writing/reading persistent
compilation cache entry for …", ``jax._src.compiler``), one per program, and says what they
mean once a process: a write that failed for room is rmtbase's one cache line
(:func:`rmtbase.files.user_cache.unwritable`, "no space left on device"), which the null
caches' own failure on the same disk joins; any other failure of the cache is one line of its
own, naming the first error."""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

#: Bytes free below which JAX's persistent cache is not turned on (a compiled program is
#: typically 0.1–2 MiB; a disk this full would fail part-way through a run).
MIN_FREE = 64 * 2**20

_LINE = re.compile(r"Error (?P<op>writing|reading) persistent compilation cache entry for "
                   r"'(?P<name>[^']*)': (?P<why>.*)", re.DOTALL)


def use() -> None:
    """Set ``JAX_COMPILATION_CACHE_DIR`` to ``<user cache>/jax`` (and JAX's minimum compile
    time for caching to 0 s) unless the caller set a cache, ``RMTBASE_NO_JIT_CACHE`` is set, or
    the folder is read-only or its file system has under :data:`MIN_FREE` bytes free."""
    if os.environ.get("RMTBASE_NO_JIT_CACHE") or "JAX_COMPILATION_CACHE_DIR" in os.environ:
        return
    from .disk_space import free_bytes
    from .user_cache import cache_dir, writable

    folder = cache_dir() / "jax"
    if not writable(folder):  # read-only: no JAX warning per compiled program
        return
    free = free_bytes(folder)
    if free is not None and free < MIN_FREE:  # full: no warning and no truncated entries
        return
    os.environ["JAX_COMPILATION_CACHE_DIR"] = str(folder)
    # our programs compile in well under JAX's default 1 s threshold; cache them all
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")


def folder() -> Path | None:
    """The folder JAX's persistent cache is in (None when it is off)."""
    where = os.environ.get("JAX_COMPILATION_CACHE_DIR")
    return Path(where) if where else None


def _reported_folder(jax_folder: Path | None) -> Path | None:
    """The folder to name: the user cache when JAX's folder is inside it (one line for both)."""
    from .user_cache import cache_dir

    if jax_folder is None:
        return None
    base = cache_dir()
    try:
        jax_folder.absolute().relative_to(base.absolute())
    except ValueError:
        return jax_folder
    return base


def fold(text: str) -> bool:
    """Whether ``text`` is one of JAX's persistent-cache warnings; if so it has been said as
    rmtbase's line (once a process) and the caller shows nothing."""
    from .disk_space import NO_SPACE, reason
    from .user_cache import said_once, unwritable

    m = _LINE.match(str(text).strip())
    if m is None:
        return False
    where = _reported_folder(folder())
    why = reason(m["why"], where)
    if why == NO_SPACE and where is not None:
        unwritable(where, why)  # the null caches' line, if they fail on the same disk
        return True
    if not said_once(("jax-cache", m["op"])):
        where = f" in {where}" if where is not None else ""
        line = (why.strip().splitlines() or ["?"])[0][:160]
        doing = ("could not write to" if m["op"] == "writing"
                 else "ignoring unreadable entries of")
        warnings.warn(f"rmtbase: {doing} JAX's compiled-program cache{where} ({line}); "
                      "compiling those programs now (said once)", RuntimeWarning, stacklevel=2)
    return True


__all__ = ["MIN_FREE", "fold", "folder", "use"]
