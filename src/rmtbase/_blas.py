"""One BLAS thread for many small LAPACK calls: :func:`one_blas_thread`.

The heavy-tail metrics decompose hundreds of matrices of a few hundred rows; numpy's OpenBLAS
splits each over every core, and on a busy machine its threads spin waiting for each other (a
576 × 576 ``eigvalsh`` batch cost 9.4 CPU-s with two threads on a loaded 2-core machine, 1.0
with one). Where ``threadpoolctl`` is installed the BLAS libraries are held at one thread inside
the block (``ThreadpoolController.limit``), else nothing changes."""

from __future__ import annotations

import contextlib

_CONTROLLER: list = []  # the ThreadpoolController, made once (it inspects the loaded libraries)


@contextlib.contextmanager
def one_blas_thread():
    """The block runs with the BLAS libraries at one thread (module docstring)."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # not installed: the libraries' own thread counts
        yield
        return
    if not _CONTROLLER:
        _CONTROLLER.append(ThreadpoolController())
    with _CONTROLLER[0].limit(limits=1, user_api="blas"):
        yield


__all__ = ["one_blas_thread"]
