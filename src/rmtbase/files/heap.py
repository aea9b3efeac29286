"""The C heap given back to the system after the library's large computations.

A circuit search or a score allocates and frees gigabytes in pieces (torch's CPU tensors, XLA's
buffers, NumPy arrays) through the C library's ``malloc``. glibc keeps freed memory below its
mmap threshold in its arenas, so the process stays about as large as its peak until it ends,
which in a notebook is the kernel's restart (docs/performance.md has a search's numbers). ``malloc_trim(0)`` (glibc ≥ 2.8: every arena, with ``madvise(MADV_DONTNEED)`` on the
free pages inside the heap too) returns it; what is in use is untouched, so no number changes.

:func:`gives_heap_back` is the one place that calls it: the public functions that do such work
(:func:`rmtbase.scoring.score.score_model`, :func:`rmtbase.scoring.composition.run.composition`,
:func:`rmtbase.circuits.find_circuits`) are wrapped with it, and trim once they return or raise.
Where the C library has no ``malloc_trim`` (macOS, musl, Windows) :func:`trim` does nothing."""

from __future__ import annotations

import functools


@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim`` as a ctypes function, or None where the C library lacks it."""
    import ctypes

    try:  # the symbols the process has loaded: the C library's among them
        fn = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


def trim() -> bool:
    """Give the C heap's free memory back to the system (``malloc_trim(0)``); whether it was
    called (False where the C library has none)."""
    fn = _malloc_trim()
    if fn is None:
        return False
    fn(0)
    return True


def gives_heap_back(function):
    """``function``, calling :func:`trim` when it returns or raises."""

    @functools.wraps(function)
    def wrapped(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        finally:
            trim()

    return wrapped


__all__ = ["gives_heap_back", "trim"]
