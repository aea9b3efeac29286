"""A null table's per-draw CPU cost, source tree against source tree, and whether the draws agree.

    python benchmarks/table_draw.py --src OLD/src --src src [--cells 640x256:q5_0,576x64:q4_1]
                                    [--draws 250] [--rounds 3]

(OLD/src e.g. from ``git archive OLD src | tar -x -C /tmp/old``.) For each cell
``DxDH:STORAGE`` and each source tree, in turns (``--rounds`` times, the trees alternating, so
that the machine's load falls on both alike): a fresh process imports rmtbase from that tree
and runs what a table block runs, :func:`rmtbase.baseline.null.null_draws` with
``stats="all"``, ``return_lambda=True`` and the storage, ``--draws`` draws of one key once to
compile, then again with another key, timed: CPU seconds of the process (all its threads,
``time.process_time``) and wall, per draw; and the first call's CPU less the second's, about
what compiling the draw program costs (no persistent compilation cache:
``JAX_COMPILATION_CACHE_DIR`` is removed from the child's environment). Prints each tree's
best and median per cell, and whether every returned variable of the timed draws has the same bytes in every tree (a
restructure must leave them so). The default 250 draws is one table block
(:data:`rmtbase.baseline.tables.DRAW_BLOCK`), what a table runs at a time: a tree computes
whole compiled calls (6298ef7: 50 draws a call; 64 before, so 200 draws ran 256 there and 250
ran 256), and per-draw CPU is the block's CPU over the draws asked for. OPENBLAS_NUM_THREADS=1 as in the other benchmarks.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

_CHILD = r"""
import hashlib, json, os, sys, time
import jax, numpy as np
import rmtbase
from rmtbase.baseline.null import null_draws
src, cell, n, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
assert os.path.realpath(rmtbase.__file__).startswith(os.path.realpath(src)), rmtbase.__file__
shape, storage = cell.split(":")
d, d_h = (int(v) for v in shape.lower().split("x"))
def draw(seed):
    return null_draws(jax.random.key(seed), d, d_h, n, stats="all", storage=storage,
                      return_lambda=True)
c0 = time.process_time()
draw(1)
first = time.process_time() - c0
c0, t0 = time.process_time(), time.perf_counter()
got = draw(2)
cpu, wall = time.process_time() - c0, time.perf_counter() - t0
np.savez(out, **{k: np.asarray(v) for k, v in got.items()})
print(json.dumps({"cpu": cpu / n, "wall": wall / n, "compile": first - cpu}))
"""


def _one(src: str, cell: str, n: int, out: str) -> dict:
    env = dict(os.environ, PYTHONPATH=src, OPENBLAS_NUM_THREADS="1")
    env.pop("JAX_COMPILATION_CACHE_DIR", None)  # every child compiles its program
    res = subprocess.run([sys.executable, "-c", _CHILD, src, cell, str(n), out], env=env,
                         capture_output=True, text=True, check=False)
    if res.returncode:
        raise SystemExit(f"{src} {cell}: {res.stderr.strip().splitlines()[-1]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def _same(files: list[str]) -> str:
    first = np.load(files[0])
    bad = set()
    for f in files[1:]:
        other = np.load(f)
        if sorted(other.files) != sorted(first.files):
            return "different variables"
        bad |= {k for k in first.files if first[k].tobytes() != other[k].tobytes()}
    return f"{len(first.files)} variables, all identical" if not bad else \
        f"DIFFERENT: {', '.join(sorted(bad))}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", action="append", required=True, help="a source tree (repeat)")
    ap.add_argument("--cells", default="640x256:q5_0,576x64:q4_1")
    ap.add_argument("--draws", type=int, default=250)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    srcs = [str(Path(s).resolve()) for s in args.src]
    print(f"load average {os.getloadavg()[0]:.1f}; CPU-ms per draw (wall), {args.draws} draws")
    with tempfile.TemporaryDirectory() as tmp:
        for cell in args.cells.split(","):
            times = {s: [] for s in srcs}
            for _ in range(args.rounds):
                for i, s in enumerate(srcs):
                    times[s].append(_one(s, cell, args.draws, f"{tmp}/{i}.npz"))
            print(f"{cell}: {_same([f'{tmp}/{i}.npz' for i in range(len(srcs))])}")
            for s in srcs:
                cpu = [t["cpu"] * 1e3 for t in times[s]]
                wall = [t["wall"] * 1e3 for t in times[s]]
                comp = [t["compile"] for t in times[s]]
                print(f"  {s}: best {min(cpu):.2f} ({min(wall):.2f}), median "
                      f"{statistics.median(cpu):.2f}; runs {' '.join(f'{c:.2f}' for c in cpu)}; "
                      f"compile CPU-s median {statistics.median(comp):.2f} "
                      f"({' '.join(f'{c:.2f}' for c in comp)})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
