"""CPU against wall of a cold score's two largest null programs under XLA CPU settings.

    python benchmarks/xla_threads.py [--d 576 --d-h 64 --storage q4_1] [--env "" ...]
                                     [--rounds 2]

Each variant (``--env``: space-separated ``NAME=VALUE`` settings of the child's environment,
e.g. ``"XLA_FLAGS=--xla_cpu_multi_thread_eigen=false"`` or
``"JAX_CPU_ENABLE_ASYNC_DISPATCH=false"``; ``""`` is the defaults) runs in a fresh subprocess
with no persistent compilation cache, OPENBLAS_NUM_THREADS=1, and times (CPU = user + system
of the whole process, all threads, ``os.times``; wall = ``perf_counter``):

- ``spectral first``: ``null_draws(stats="spectral", return_lambda=True)`` of one batch (125
  draws): the fast path's compilation and one batch; ``spectral run``: 1,000 more draws on the
  compiled program;
- ``all first``: ``null_draws(stats="all", storage=STORAGE)`` of one chunk (the quantised
  all-statistics table's program: compile and one chunk); ``all run``: 500 more draws.

It prints one line per variant and phase, and a SHA-256 of every output array so that a
setting that moves a number shows (GEMM partitioning over threads can change sums). Rounds
alternate the variants (A B A B …), so that load drifts hit each alike; compare within one
run. Measured numbers go to commit messages / docs/performance.md, never into tests.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"

_CHILD = r"""
import hashlib, json, os, sys, time
import numpy as np
d, d_h, storage = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
import jax
from rmtbase.baseline.null import null_draws
jax.numpy.zeros(1).block_until_ready()
out, h = {}, hashlib.sha256()

def timed(name, fn):
    c0, t0 = sum(os.times()[:2]), time.perf_counter()
    res = fn()
    out[name] = (sum(os.times()[:2]) - c0, time.perf_counter() - t0)
    for k in sorted(res):
        h.update(k.encode()); h.update(np.ascontiguousarray(res[k]).tobytes())

key = jax.random.key(7)
timed("spectral first", lambda: null_draws(key, d, d_h, 125, stats="spectral",
                                           return_lambda=True))
timed("spectral run", lambda: null_draws(jax.random.fold_in(key, 1), d, d_h, 1000,
                                         stats="spectral", return_lambda=True))
timed("all first", lambda: null_draws(key, d, d_h, 1, stats="all", storage=storage))
timed("all run", lambda: null_draws(jax.random.fold_in(key, 1), d, d_h, 500, stats="all",
                                    storage=storage))
print(json.dumps({"times": out, "sha": h.hexdigest()[:16]}))
"""


def run(settings: str, d: int, d_h: int, storage: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(SRC), OPENBLAS_NUM_THREADS="1",
               JAX_ENABLE_COMPILATION_CACHE="false")
    for name in ("JAX_COMPILATION_CACHE_DIR", "XLA_FLAGS"):
        env.pop(name, None)
    env.update(item.split("=", 1) for item in settings.split())
    p = subprocess.run([sys.executable, "-c", _CHILD, str(d), str(d_h), storage], env=env,
                       capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(p.stderr[-3000:])
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=576)
    ap.add_argument("--d-h", type=int, default=64)
    ap.add_argument("--storage", default="q4_1")
    ap.add_argument("--env", action="append", default=None,
                    help="a variant's NAME=VALUE settings (repeat); default: '' and two")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args(argv)
    variants = a.env or ["", "JAX_CPU_ENABLE_ASYNC_DISPATCH=false",
                         "XLA_FLAGS=--xla_cpu_multi_thread_eigen=false"]
    print(f"load {os.getloadavg()[0]:.1f}; {a.d}x{a.d_h} {a.storage}", flush=True)
    for r in range(a.rounds):
        for settings in variants:
            res = run(settings, a.d, a.d_h, a.storage)
            parts = "; ".join(f"{k} {c:.2f} CPU / {w:.2f} wall" for k, (c, w) in
                              res["times"].items())
            print(f"[{r}] {settings or '(defaults)'}: {parts}; sha {res['sha']}; "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
