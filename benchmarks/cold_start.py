"""Cold against warm start of ``rmtbase score`` on the default model, back to back.

    python benchmarks/cold_start.py [--repeats 3] [--src DIR] [--args "score --stats spectral"]

Each repeat runs ``python -m rmtbase score --out TMP`` (the ``rmtbase`` executable's entry,
:func:`rmtbase.cli.console_main`, which keeps JAX's compiled programs in ``<cache>/jax``) in
fresh subprocesses:

- **cold**: ``RMTBASE_CACHE`` a new empty folder: no cached null tables, no compiled programs;
- **warm**: the same command again on the cache the cold run left.

It prints the wall seconds of each, the ratio cold / warm, and for the cold run the seconds
of XLA compilation JAX logs (``JAX_LOG_COMPILES``: the sum of "Finished XLA compilation"
times; tracing and lowering are left out of that sum) and whether it generated a null table
(the "generating the null table" line). ``--src DIR`` runs another source tree (``DIR/src`` on
``PYTHONPATH``; e.g. ``git archive COMMIT src | tar -x -C DIR``) for an A/B run in one go.
OPENBLAS_NUM_THREADS=1 as in the other benchmarks. The load (``os.getloadavg``) is printed with
each run: the machines this runs on are shared.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_COMPILE = re.compile(r"Finished XLA compilation of .* in ([0-9.eE+-]+) sec")


def run_once(src: Path, cache: Path, out: Path, args: list[str], log_compiles: bool) -> dict:
    env = dict(os.environ, PYTHONPATH=str(src), RMTBASE_CACHE=str(cache),
               OPENBLAS_NUM_THREADS="1")
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    env.pop("RMTBASE_NO_JIT_CACHE", None)
    if log_compiles:
        env["JAX_LOG_COMPILES"] = "1"
    load = os.getloadavg()[0]
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "rmtbase", *args, "--out", str(out)], env=env,
                       capture_output=True, text=True)
    wall = time.perf_counter() - t
    if p.returncode:
        raise SystemExit(f"rmtbase failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return {"wall": wall, "load": load,
            "compile": sum(float(x) for x in _COMPILE.findall(p.stderr)),
            "generated": "generating the null table" in p.stderr}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--src", type=Path, action="append", default=None,
                    help="source tree(s) to run (default: this checkout); repeatable for A/B")
    ap.add_argument("--args", default="score", help="rmtbase arguments before --out")
    args = ap.parse_args(argv)
    here = Path(__file__).resolve().parents[1]
    srcs = [(s / "src" if (s / "src").is_dir() else s) for s in (args.src or [here])]
    cmd = shlex.split(args.args)
    print(f"rmtbase {' '.join(cmd)} on the default model; {args.repeats} repeats; "
          f"{os.cpu_count()} CPUs", flush=True)
    ratios: dict[str, list[float]] = {str(s): [] for s in srcs}
    for i in range(args.repeats):
        for src in srcs:
            with tempfile.TemporaryDirectory() as tmp:
                cache, tmp = Path(tmp) / "cache", Path(tmp)
                cold = run_once(src, cache, tmp / "cold", cmd, log_compiles=True)
                warm = run_once(src, cache, tmp / "warm", cmd, log_compiles=False)
            r = cold["wall"] / warm["wall"]
            ratios[str(src)].append(r)
            print(f"[{i + 1}] {src}: cold {cold['wall']:.1f} s (load {cold['load']:.2f}; XLA "
                  f"compilation {cold['compile']:.1f} s; null table generated: "
                  f"{'yes' if cold['generated'] else 'no'}), warm {warm['wall']:.1f} s "
                  f"(load {warm['load']:.2f}); cold/warm {r:.2f}", flush=True)
    for src, rs in ratios.items():
        rs = sorted(rs)
        print(f"{src}: cold/warm median {rs[len(rs) // 2]:.2f} (range {rs[0]:.2f}-{rs[-1]:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
