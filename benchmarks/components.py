"""Cost of the whole-matrix null and of ``rmtbase score --components all`` (nothing downloaded).

    python benchmarks/components.py [--which draws,minilm] [--draws 3] [--threads 1]

- ``draws``: seconds per null draw (:func:`rmtbase.baseline.matrix_null.matrix_null_draws`,
  compilation excluded) and peak resident memory (VmHWM), each shape in its own subprocess, at
  MiniLM's shapes (float32) and LLaMA-3-8B's (bfloat16): q/o 4096×4096, k/v 1024×4096 and the
  FFN 14336×4096 (gate/up; down is 4096×14336 and shares its null). Matrices over 2²² entries
  run tile by tile (:mod:`rmtbase.stats.tiles`); the row "8B null" adds up the three shapes
  for a 400-draw table of each (what ``--components all`` generates once and caches).
- ``minilm``: wall seconds of ``rmtbase score --components all`` on the embedded MiniLM in a
  fresh process with an empty cache (the 400-draw nulls of its two shapes generated; the head
  tables are shipped), then again with the cache filled.

Measured 2026-11-23 05:15 UTC on the 2-core machine, otherwise idle (jax 0.10.2 CPU,
OPENBLAS_NUM_THREADS=1), ``--which draws --draws 3``, with the two-pass estimator (the |w|
histogram read from the bits of |w|; in-graph tiles of 2^18 entries from 2^21,
:data:`rmtbase.stats.tiles.IN_GRAPH_TILE`)::

    shape            storage   tiles   s/draw  ns/entry  peak MB  400 draws
    384x384          float32       1   0.0151       102      334        6 s
    1536x384         float32       1   0.0265        45      385       11 s
    4096x1024        bfloat16      1    0.126        30      481       50 s
    4096x4096        bfloat16      4    0.553        33      535    3.7 min
    14336x4096       bfloat16     14     2.34        40      767   15.6 min
    8B null (q/o, k/v, FFN shapes, 400 draws each): 20 min once (1 thread)

The same command on a slower 2-core machine (2026-11-23 08:05 UTC, AMD EPYC 2.0 GHz, AVX2,
512 KB L2; see docs/performance.md)::

    384x384          float32       1   0.0314       213      390       13 s
    1536x384         float32       1   0.0487        83      392       19 s
    4096x1024        bfloat16      1    0.234        56      540       94 s
    4096x4096        bfloat16      4    0.994        59      538    6.6 min
    14336x4096       bfloat16     14     3.53        60      812   23.6 min
    8B null (q/o, k/v, FFN shapes, 400 draws each): 32 min once (1 thread)

With the earlier three passes and tiles of 2^20 (2026-11-23 00:20 UTC): 0.901 s per 4096×4096
draw, 3.9 s per FFN draw (908 MB), 33 min for the 8B null; the 384×384 row (0.0077 s then)
is dominated by per-call overhead and varies run to run.

Before the in-graph tiles (2026-11-22, the shared machine under load): 1.26 s per 4096×4096
draw, 4.67 s per FFN draw, 41 min for the 8B null; then, with ``--threads 2``, the FFN shape
took 4.18 s per draw (peak 1.25 GB), and ``--which minilm`` 50.5 s cold (empty cache: heads
with the shipped tables, both component nulls generated), 27.6 s warm. The FFN draw (58.7 M
entries) keeps its 14 tiles between the passes (235 MB in float32); the rest of the peak is
one tile's working set, JAX and the interpreter.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

SHAPES = [(384, 384, "float32"), (1536, 384, "float32"), (4096, 1024, "bfloat16"),
          (4096, 4096, "bfloat16"), (14336, 4096, "bfloat16")]
TABLE_DRAWS = 400

_CASE = r"""
import json, sys, time
def peak_mb():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmHWM")) / 1024
from rmtbase.baseline.matrix_null import matrix_null_draws
from rmtbase.stats.matrix import tile_rows
m, n, storage, k, threads = json.loads(sys.argv[1])
matrix_null_draws(m, n, 1, storage=storage)  # compiles
t = time.perf_counter()
matrix_null_draws(m, n, k, storage=storage, start=1, threads=threads)
dt = (time.perf_counter() - t) / k
print(json.dumps({"seconds": dt, "peak_mb": peak_mb(), "tiles": len(tile_rows(m, n))}))
"""


def _run(code: str, arg, env=None) -> dict:
    out = subprocess.run([sys.executable, "-c", code, json.dumps(arg)], capture_output=True,
                         text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_draws(k: int, threads: int, shapes=None) -> None:
    print(f"{'shape':<16} {'storage':<9} {'tiles':>5} {'s/draw':>8} {'ns/entry':>9} "
          f"{'peak MB':>8} {f'{TABLE_DRAWS} draws':>10}   ({threads} thread(s))")
    per = {}
    for m, n, storage in SHAPES:
        if shapes and f"{m}x{n}" not in shapes:
            continue
        # small shapes: enough draws for a stable time (at least ~0.5 s of work)
        r = _run(_CASE, [m, n, storage, max(k, min(100, 2**21 // (m * n))), threads])
        per[(m, n)] = r["seconds"]
        total = TABLE_DRAWS * r["seconds"]
        when = f"{total:.0f} s" if total < 120 else f"{total / 60:.1f} min"
        print(f"{f'{m}x{n}':<16} {storage:<9} {r['tiles']:>5} {r['seconds']:>8.3g} "
              f"{1e9 * r['seconds'] / (m * n):>9.0f} {r['peak_mb']:>8.0f} {when:>10}",
              flush=True)
    eight = [(4096, 4096), (4096, 1024), (14336, 4096)]
    if all(s in per for s in eight):
        print(f"8B null (q/o, k/v, FFN shapes, {TABLE_DRAWS} draws each): "
              f"{TABLE_DRAWS * sum(per[s] for s in eight) / 60:.0f} min once "
              f"({threads} thread(s))")


def bench_minilm() -> None:
    env = dict(os.environ, RMTBASE_CACHE=tempfile.mkdtemp(prefix="rmtbase-bench-"),
               RMTBASE_NO_JIT_CACHE="1")
    for label in ("cold (empty cache)", "warm (nulls cached)"):
        out = tempfile.mkdtemp(prefix="rmtbase-out-")
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "rmtbase", "score", "--components", "all",
                        "--quiet", "--out", out], env=env, check=True, capture_output=True)
        print(f"rmtbase score --components all (MiniLM), {label}: "
              f"{time.perf_counter() - t:.1f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--which", default="draws,minilm")
    ap.add_argument("--draws", type=int, default=3, help="timed draws per shape")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--shapes", default=None, help="e.g. 14336x4096 (default: all)")
    args = ap.parse_args()
    which = set(args.which.split(","))
    if "draws" in which:
        bench_draws(args.draws, args.threads, args.shapes and args.shapes.split(","))
    if "minilm" in which:
        bench_minilm()


if __name__ == "__main__":
    main()
