"""Limits checked before any Monte Carlo: memory per draw and per table, and array size.

:func:`check_draw_memory` (estimate calibrated on XLA's ``memory_analysis``, against available
memory; a one-line :class:`~rmtbase.errors.InputError`), :func:`check_dense` (d² < 2³¹),
:func:`check_stored_values` (a table held while built), :func:`check_cells` (all of it, the
float range at σ included)."""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..files.memory import available_memory, parse_bytes  # noqa: F401 - re-exported
from ..files.memory import fmt_bytes as _fmt
from .sigma_range import check_sigma_range
from .table_contents import fast_spectral, n_eigenvalues, stat_names, stores_spectrum

#: Largest d with d² < 2³¹ (XLA/JAX index and shape arithmetic of the element statistics).
MAX_DENSE_D = 46340


def dense(stats: str, ensemble: str, fast: bool) -> bool:
    """Whether a draw forms d×d arrays (W_QK element statistics, a Ginibre d×d matrix or the
    residual product), i.e. everything but the factor-only spectral paths."""
    return not fast and (stats != "spectral" or ensemble != "lowrank")


def draw_memory(d: int, d_h: int, stats: str, ensemble: str, itemsize: int, fast: bool) -> int:
    """Estimated working memory of one draw in bytes (module docstring; conservative)."""
    if fast:
        return 16 * d_h * d_h * itemsize + 4096
    dd = 8 if stats != "spectral" else 0
    if ensemble == "ginibre" and stats != "elementwise":
        dd += 8
    if ensemble == "residual":
        dd += 4
    return itemsize * (dd * d * d + 16 * d * d_h) + 2**20


#: bytes of working memory one vectorised batch of null draws may use on the CPU (it fixes the
#: batch width there, :func:`rmtbase.baseline.null.draw_batch`, and so the shipped tables' bits)
CPU_BATCH_BUDGET = 512 * 2**20
#: share of an accelerator's memory limit one batch may use (the rest: XLA's temporaries)
ACCELERATOR_BATCH_SHARE = 4


def batch_budget(backend: str | None = None) -> int:
    """Bytes one vectorised batch of null draws may use: :data:`CPU_BATCH_BUDGET` on the CPU; on an
    accelerator a quarter of the device's memory limit, rounded down to a power of two, at least
    the CPU's. The limit, not the free memory: the batch width sets a draw's last bits."""
    import jax

    backend = jax.default_backend() if backend is None else backend
    if backend == "cpu":
        return CPU_BATCH_BUDGET
    avail, _ = available_memory(backend)
    if not avail:
        return CPU_BATCH_BUDGET
    share = int(avail) // ACCELERATOR_BATCH_SHARE
    return max(CPU_BATCH_BUDGET, 1 << (share.bit_length() - 1))


def check_dense(d: int, stats: str, ensemble: str, fast: bool) -> None:
    """InputError unless d² < 2³¹ where a draw forms d×d arrays."""
    if dense(stats, ensemble, fast) and d > MAX_DENSE_D:
        what = "element statistics" if stats != "spectral" else f"the {ensemble} ensemble"
        raise InputError(f"{what} form d x d matrices, which need d <= {MAX_DENSE_D} "
                         f"(d^2 < 2^31 entries); got d={d} (--stats spectral of the lowrank "
                         "ensemble has no such limit)")


def check_draw_memory(d: int, d_h: int, stats: str, ensemble: str, itemsize: int, fast: bool,
                      n_parallel: int = 1) -> int:
    """InputError if ``n_parallel`` draws at once (a batch) need more memory than is
    available; returns the estimate in bytes."""
    check_dense(d, stats, ensemble, fast)
    need = draw_memory(d, d_h, stats, ensemble, itemsize, fast) * max(1, int(n_parallel))
    avail, source = available_memory()
    if avail is not None and need > avail:
        what = f"{stats} statistics, {ensemble} ensemble"
        raise InputError(f"one draw at d={d}, d_h={d_h} ({what}) needs about {_fmt(need)} of "
                         f"working memory, more than the {_fmt(avail)} available ({source}"
                         + ("" if source == "RMTBASE_MEMORY_LIMIT" else
                            "; set RMTBASE_MEMORY_LIMIT to change the limit") + ")")
    return need


def check_cells(spec, cells, *, memory: bool = True) -> None:
    """Everything about a run that can be refused before any draw: the memory of one batch of
    draws (``memory``), d² for d×d statistics and the float range at (σ_Q, σ_K)."""
    fast = fast_spectral(spec.stats, spec.ensemble, spec.storage)
    itemsize = np.dtype(spec.dtype).itemsize
    check_table_values(spec, cells)  # the whole table is assembled here, wherever it is drawn
    for d, d_h in cells:
        check_dense(d, spec.stats, spec.ensemble, fast)
        if memory:
            check_draw_memory(d, d_h, spec.stats, spec.ensemble, itemsize, fast)
    check_sigma_range(cells, stat_names(spec), spec.sigma_q, spec.sigma_k, spec.dtype)


#: Copies of a table held at once while it is assembled, converted and written (the draws, the
#: stacked Dataset, a float64 view for scoring or the netCDF buffers).
TABLE_COPIES = 3


def check_stored_values(n_values: int, itemsize: int, what: str) -> int:
    """InputError, before any draw, if a table of ``n_values`` numbers of ``itemsize`` bytes
    (``what``) cannot be held in memory while built (:data:`TABLE_COPIES` copies). Returns the
    bytes needed."""
    need = TABLE_COPIES * int(n_values) * int(itemsize)
    avail, source = available_memory()
    if avail is not None and need > avail:
        raise InputError(f"{what} needs about {_fmt(need)} of memory to build, more than the "
                         f"{_fmt(avail)} available ({source}"
                         + ("" if source == "RMTBASE_MEMORY_LIMIT" else
                            "; set RMTBASE_MEMORY_LIMIT to change the limit")
                         + "); ask for fewer draws")
    return need


def check_table_values(spec, cells) -> int:
    """:func:`check_stored_values` for a head table of ``spec`` over ``cells``."""
    n_stats = len(stat_names(spec))
    n_eig = max(n_eigenvalues(d, d_h, spec.ensemble) for d, d_h in cells) \
        if stores_spectrum(spec.stats) else 0
    return check_stored_values(len(cells) * (n_stats + n_eig) * int(spec.draws),
                               np.dtype(spec.dtype).itemsize,
                               f"a table of {len(cells)} cell(s) x {n_stats} statistics x "
                               f"{int(spec.draws)} draws")
