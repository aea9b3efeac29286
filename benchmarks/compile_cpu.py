"""CPU seconds of each XLA compilation of one ``rmtbase`` command (issue 59 item 4).

    RMTBASE_CACHE=$(mktemp -d) python benchmarks/compile_cpu.py score MODEL --no-figures --quiet

Runs ``rmtbase ARGS…`` in this process (as ``python -m rmtbase``) and wraps JAX's
``jax._src.compiler.backend_compile_and_load`` (a private function of jax 0.10; the benchmark
says so and stops if it is gone) to time every XLA compilation: CPU = user + system of the
whole process during the call (``os.times``: the calling thread and XLA's LLVM workers, and
whatever else runs meanwhile, e.g. an execution dispatched before), and wall. At exit it prints
one ``COMPILE`` line per program, most CPU first (``#n``: the n-th compiled; with
``JAX_EXPLAIN_CACHE_MISSES=1`` JAX names each traced function's source line in that order),
and the total against the process's CPU, to
stderr. ``JAX_LOG_COMPILES=1`` wall times (``benchmarks/first_contact.py --compiles``) count
waiting on a loaded machine; these count the work. A fresh ``RMTBASE_CACHE`` compiles
everything (cold); the same command again loads from the persistent cache (compile ~0).
"""

from __future__ import annotations

import atexit
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import jax._src.compiler as _compiler  # noqa: E402

_ROWS: list[tuple[int, str, float, float]] = []
_ORIGINAL = getattr(_compiler, "backend_compile_and_load", None)
if _ORIGINAL is None:
    raise SystemExit("jax._src.compiler.backend_compile_and_load is gone: update this benchmark")


def _timed(backend, module, *args, **kwargs):
    name = str(module.operation.attributes["sym_name"]).strip('"')
    cpu, wall = sum(os.times()[:2]), time.perf_counter()
    try:
        return _ORIGINAL(backend, module, *args, **kwargs)
    finally:
        _ROWS.append((len(_ROWS) + 1, name, sum(os.times()[:2]) - cpu,
                      time.perf_counter() - wall))


def _report() -> None:
    for order, name, cpu, wall in sorted(_ROWS, key=lambda r: -r[2]):
        sys.stderr.write(f"COMPILE {cpu:6.2f} CPU {wall:6.2f} wall  #{order:<3d} {name}\n")
    sys.stderr.write(f"COMPILE total: {len(_ROWS)} programs, {sum(r[2] for r in _ROWS):.2f} s "
                     f"CPU, {sum(r[3] for r in _ROWS):.2f} s wall; the process "
                     f"{sum(os.times()[:2]):.1f} s CPU; load {os.getloadavg()[0]:.1f}\n")


def main() -> int:
    _compiler.backend_compile_and_load = _timed
    atexit.register(_report)
    sys.argv = ["rmtbase", *sys.argv[1:]]
    from rmtbase._entry import main as rmtbase_main

    return rmtbase_main()


if __name__ == "__main__":
    sys.exit(main())
