"""CPU cost of ``rmtbase --help`` against ``python -c "import numpy"``, measured in one run.

    python benchmarks/help_cost.py [--repeats 7] [--src DIR]

Issue 35 asks that argument parsing stay light: ``rmtbase --help`` (and every command's
``--help``) at most 2.5× the CPU of importing numpy, so that a Ctrl-C or a typo costs nothing
and start-up interrupts land before any heavy import. Each repeat runs both commands in fresh
subprocesses, alternating, and takes the child's user + system CPU from ``resource.getrusage``
(``RUSAGE_CHILDREN`` differences), so load from other processes moves wall time, not these
figures. It prints the median CPU of each, the ratio, and the heavy modules (jax, numpy,
torch, xarray, transformers) that the ``--help`` run imported (there should be none).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
from pathlib import Path

HEAVY = ("jax", "numpy", "torch", "xarray", "transformers", "scipy", "matplotlib")


def cpu_of(cmd: list[str], env: dict) -> float:
    """User + system CPU seconds of one child process running ``cmd``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def heavy_imports(env: dict, argv: list[str]) -> list[str]:
    code = ("import runpy, sys\n"
            f"sys.argv = ['rmtbase', *{argv!r}]\n"
            "try:\n    runpy.run_module('rmtbase', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)\n")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    return r.stderr.strip().splitlines()[-1:]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--src", type=Path, default=Path(__file__).resolve().parents[1] / "src")
    args = ap.parse_args(argv)
    env = dict(os.environ, PYTHONPATH=str(args.src), OPENBLAS_NUM_THREADS="1")
    runs = {"rmtbase --help": [sys.executable, "-m", "rmtbase", "--help"],
            "rmtbase score --help": [sys.executable, "-m", "rmtbase", "score", "--help"],
            "import numpy": [sys.executable, "-c", "import numpy"]}
    cpu: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(args.repeats):
        for name, cmd in runs.items():
            cpu[name].append(cpu_of(cmd, env))
    med = {k: sorted(v)[len(v) // 2] for k, v in cpu.items()}
    print(f"{args.repeats} repeats, median CPU (user + system), load {os.getloadavg()[0]:.2f}")
    for name, s in med.items():
        print(f"  {name:22s} {s * 1e3:7.1f} ms   ({s / med['import numpy']:.2f}x import numpy)")
    print("heavy modules imported by --help:", *heavy_imports(env, ["--help"]))
    print("heavy modules imported by score --help:", *heavy_imports(env, ["score", "--help"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
