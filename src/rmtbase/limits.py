"""Upper bounds of every count and range of the CLI and the API, numpy-free (plain numbers).

A value beyond one is refused in one line before any work (:mod:`rmtbase.checks`,
:mod:`rmtbase.errors`, :mod:`rmtbase.cli.bounds`), not met later as an overflow, a 64-bit
netCDF attribute that cannot be written, or an allocation."""

from __future__ import annotations

#: Null draws (ten million: far more than any decision's Monte Carlo error asks for).
MAX_DRAWS = 10**7
#: Matrix dimensions d, d_h, widths (2**20: beyond every model's width, within float32 sums).
MAX_DIM = 2**20
#: Other counts (k, top, window, repeat lengths, layer and head numbers, tasks).
MAX_COUNT = 10**6
#: Product-network depth L.
MAX_DEPTH = 10**4
#: A task's token positions, prompt pairs × tokens a prompt (4 Mi: each costs a forward pass
#: of every attribution step and patched edge).
MAX_TASK_TOKENS = 2**22
#: Dask workers on one machine.
MAX_WORKERS = 1024
#: Any integer a check does not bound otherwise: a signed 32-bit index.
INT_CEILING = 2**31 - 1
#: Byte budgets (``memory_budget``): 1 PiB, beyond any machine's memory, within int64.
MAX_BYTES = 2**50
#: Entry standard deviations σ (``--sigma``): their fourth power times d² stays finite.
SIGMA_RANGE = (1e-10, 1e10)
#: Product-network gains G (the 30-digit analytic path's range at small depth).
GAIN_RANGE = (1e-30, 1e30)

__all__ = ["GAIN_RANGE", "INT_CEILING", "MAX_BYTES", "MAX_COUNT", "MAX_DEPTH", "MAX_DIM", "MAX_DRAWS",
           "MAX_TASK_TOKENS", "MAX_WORKERS", "SIGMA_RANGE"]
