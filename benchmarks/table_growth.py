"""Draws computed and CPU of a joint null table grown through a score's schedule, continuing the
draws held vs. drawing each step from draw 0.

    python benchmarks/table_growth.py [--shape 64x16] [--sizes 1000,6000,18000] [--stats all]

Each mode is a fresh process with an empty ``RMTBASE_CACHE``: ``null_table`` asked for each size
in turn (what :func:`rmtbase.scoring.stopping.joint.grow` asks), ``null_draws`` counted. In the
``redraw`` mode :func:`rmtbase.baseline.table_growth.held_table` finds nothing (each step from
draw 0). Prints the draws computed and the process CPU of each mode and their ratio (a shared
machine drifts: compare ratios, not seconds). Measured at 64x16, all statistics, 1,000 -> 6,000
-> 18,000 on the 2-core shared machine: 18,000 draws, 29.3 CPU-s continuing; 25,000, 39.8
redrawing (ratio 0.74).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

_CHILD = r"""
import sys, time
from rmtbase.baseline import null as N, table_growth
from rmtbase.baseline.cache import null_table
calls, real = [], N.null_draws
N.null_draws = lambda key, d, d_h, n, **kw: calls.append(n) or real(key, d, d_h, n, **kw)
if sys.argv[1] == "redraw":
    table_growth.held_table = lambda key, entries: None
d, d_h = map(int, sys.argv[2].split("x"))
t = time.process_time()
for n in map(int, sys.argv[3].split(",")):
    null_table(d, d_h, stats=sys.argv[4], min_draws=n, seed=0)
print(sum(calls), time.process_time() - t)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="64x16")
    ap.add_argument("--sizes", default="1000,6000,18000")
    ap.add_argument("--stats", default="all")
    a = ap.parse_args()
    got = {}
    for mode in ("continue", "redraw"):
        env = dict(os.environ, RMTBASE_CACHE=tempfile.mkdtemp(), RMTBASE_NO_JIT_CACHE="1")
        out = subprocess.run([sys.executable, "-c", _CHILD, mode, a.shape, a.sizes, a.stats],
                             env=env, capture_output=True, text=True, check=True)
        draws, cpu = out.stdout.split()
        got[mode] = (int(draws), float(cpu))
        print(f"{mode:8s} {int(draws):>7,} draws computed  {float(cpu):7.1f} CPU-s")
    print(f"ratio continue/redraw: draws {got['continue'][0] / got['redraw'][0]:.2f}, "
          f"CPU {got['continue'][1] / got['redraw'][1]:.2f}")


if __name__ == "__main__":
    main()
