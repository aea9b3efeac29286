"""CPU of a cold spectrum band (compile + 200 draws) for one or more source trees, alternately.

    python benchmarks/band_compile.py --shape 576x64 --shape 640x256 --src OLD/src --src src [--reps 2]
        [--score quantised]

Each measurement is a fresh process with an empty ``RMTBASE_CACHE`` (and no JAX persistent
cache) running :func:`rmtbase.scoring.measures.spectrum_band._drawn_spectrum_band` (d, d_h, 200, 0):
what a first quantised score pays for the figure's null band at a new shape (the fast spectral
null program is compiled for it alone). Prints, per source tree and shape, the band's process
CPU (user + system, import excluded) and the SHA-256 of the band's bytes, so that a change meant
to keep the numbers shows the same digest. Sources alternate within each repetition (load
drifts on a shared machine). Issue 59 item 4 (HG).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

_CHILD = r"""
import hashlib, resource, sys, time
t0 = time.process_time()
import jax
from rmtbase.scoring.measures.spectrum_band import _drawn_spectrum_band
t1 = time.process_time()
kw = {}
if sys.argv[3] == "quantised":  # as a score with only block-quantised nulls draws it
    import inspect
    if "share_table" in inspect.signature(_drawn_spectrum_band).parameters:
        kw["share_table"] = False
b = _drawn_spectrum_band(int(sys.argv[1]), int(sys.argv[2]), 200, 0, **kw)
r = resource.getrusage(resource.RUSAGE_SELF)
print(round(r.ru_utime + r.ru_stime - t1, 2), hashlib.sha256(b.tobytes()).hexdigest()[:16])
"""


def one(src: str, d: int, d_h: int, score: str = "float") -> str:
    """'CPU digest' of one cold band in a fresh process on ``src``."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "PYTHONPATH": src, "RMTBASE_CACHE": cache,
               "OPENBLAS_NUM_THREADS": "1"}
        env.pop("JAX_COMPILATION_CACHE_DIR", None)
        out = subprocess.run([sys.executable, "-c", _CHILD, str(d), str(d_h), score], env=env,
                             capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", action="append", default=None, help="DxDH (default 576x64)")
    ap.add_argument("--src", action="append", default=None, help="source tree (default src)")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--score", choices=("float", "quantised"), default="float",
                    help="the band as a float score draws it (sharing the float32 table's "
                         "program) or as a quantised one (share_table=False where the source "
                         "has it)")
    args = ap.parse_args(argv)
    shapes = [tuple(map(int, s.lower().split("x"))) for s in args.shape or ["576x64"]]
    srcs = args.src or ["src"]
    for rep in range(args.reps):
        for d, d_h in shapes:
            for src in srcs:
                cpu, digest = one(src, d, d_h, args.score).split()
                print(f"rep {rep} {d}x{d_h} {src:24s} band CPU {cpu:>6s} s  band sha256 {digest}",
                      flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
