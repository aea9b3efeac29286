"""CPU seconds of the quick tier per test file and per test, from the lines that
``tests/conftest.py`` writes with ``RMTBASE_TEST_CPU_LOG`` set.

    RMTBASE_TEST_CPU_LOG=/tmp/cpu /usr/bin/time -v .venv/bin/python -m pytest -n 2 \\
        --dist loadfile -m "not slow" -q
    python scripts/quick_tier_cpu.py /tmp/cpu [--top 30] [--against /tmp/cpu-before]

Sums, per file, the CPU of the worker process (user + system) and of the subprocesses its
tests waited for, over setup, call and teardown of each test; prints the files by CPU, the
most expensive tests, and the total. What the per-test lines miss — interpreter start-up,
imports and collection in each worker, xdist's own work — is the difference to
``/usr/bin/time``'s user + system of the whole run. ``compile s``: the wall seconds JAX
spent tracing, lowering and compiling in the worker (XLA's threads make its CPU more; older
logs without the column read 0). ``--against`` prints a second log's
per-file sums beside (before / after on one machine). CPU is what a shared, loaded machine
distorts least; wall on 2 quiet cores is about (total CPU) / 2 plus the longest file's tail.
"""

from __future__ import annotations

import argparse
import glob
import re
from collections import defaultdict


def read(prefix: str) -> dict[str, tuple[float, float, float, float]]:
    """{node id: (self CPU, children CPU, wall, compile)} of every ``prefix.<worker>`` file."""
    out = {}
    for path in sorted(glob.glob(prefix + ".*")):
        if not re.fullmatch(r"gw\d+|main", path[len(prefix) + 1:]):
            continue  # not a worker's file (e.g. the run's own log beside it)
        with open(path, encoding="utf-8") as f:
            for line in f:
                node, *cols = line.rstrip("\n").split("\t")
                s, c, w, k = (*map(float, cols), 0.0)[:4]
                out[node] = (s, c, w, k)
    return out


def per_file(tests: dict) -> dict[str, list[float]]:
    files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0, 0.0])
    for node, (s, c, _, k) in tests.items():
        f = files[node.split("::", 1)[0]]
        f[0] += s
        f[1] += c
        f[2] += 1
        f[3] += k
    return files


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("prefix")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--against", help="another run's prefix, printed beside")
    a = ap.parse_args()
    tests = read(a.prefix)
    files = per_file(tests)
    other = per_file(read(a.against)) if a.against else {}
    print(f"{'CPU s':>8} {'of it children':>15} {'compile s':>10} {'tests':>6}" +
          (f" {'other run':>10}" if other else "") + "  file")
    for name, (s, c, n, k) in sorted(files.items(),
                                     key=lambda kv: -(kv[1][0] + kv[1][1]))[:a.top]:
        extra = f" {sum(other[name][:2]) if name in other else float('nan'):10.1f}" if other else ""
        print(f"{s + c:8.1f} {c:15.1f} {k:10.1f} {int(n):6d}{extra}  {name}")
    total = sum(s + c for s, c, _, _ in tests.values())
    compiled = sum(v[3] for v in tests.values())
    print(f"total {total:.1f} CPU s in {len(tests)} tests ({len(files)} files), "
          f"{compiled:.1f} s compiling" +
          (f"; other run {sum(v[0] + v[1] for v in other.values()):.1f}" if other else ""))
    print("most expensive tests:")
    for node, (s, c, _w, _k) in sorted(tests.items(),
                                       key=lambda kv: -(kv[1][0] + kv[1][1]))[:a.top]:
        print(f"{s + c:8.1f}  {node}")


if __name__ == "__main__":
    main()
