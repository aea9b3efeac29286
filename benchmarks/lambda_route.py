"""A quantised table draw's CPU with λ by the Gram route against the QR route, in one process.

    python benchmarks/lambda_route.py [--cell 640x256:q5_0] [--draws 100] [--rounds 8]

Both variants of :func:`rmtbase.baseline.null.null_draws` (``stats="all"``,
``return_lambda=True``, the storage) are compiled in one process: the Gram route where
:func:`rmtbase.baseline.draw_route.gram_route` takes it, and the same draw program with the
heads' QR route (the rule switched off). Then ``--rounds`` rounds of ``--draws`` draws each,
the variants alternating (their order swapped every round, so that load drifts hit both),
timed in process CPU (``time.process_time``: all threads). Prints each variant's median and
best CPU-ms a draw (the first round, which compiles, left out). Paired in one process this is
less noisy than :mod:`benchmarks.table_draw`'s fresh processes, which also compare the bytes
and the compile cost. OPENBLAS_NUM_THREADS=1 as in the other benchmarks.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402

from rmtbase.baseline import null as null_mod  # noqa: E402
from rmtbase.stats.storage import storage_record  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cell", default="640x256:q5_0")
    ap.add_argument("--draws", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=8)
    args = ap.parse_args(argv)
    shape, storage = args.cell.split(":")
    d, d_h = (int(v) for v in shape.lower().split("x"))
    rule = null_mod.gram_route
    if not rule(d, d_h, "all", "lowrank", storage_record(storage), "float32"):
        raise SystemExit(f"{args.cell}: not a Gram-route cell (rmtbase.baseline.draw_route)")
    req = null_mod.Draws(d, d_h, stats="all", lam_out=True, storage=storage_record(storage))
    fns, draw_fn = {}, null_mod._draw_fn
    for name, route in (("gram", rule), ("qr", lambda *a: False)):
        null_mod._draw_fn.cache_clear()
        null_mod.gram_route = route  # read when the draw function is traced
        fns[name] = (draw_fn(req), route)
    times = {name: [] for name in fns}
    try:
        for r in range(args.rounds):
            for name in (("gram", "qr") if r % 2 == 0 else ("qr", "gram")):
                fn, route = fns[name]
                null_mod._draw_fn, null_mod.gram_route = (lambda _req, f=fn: f), route
                c = time.process_time()
                null_mod.null_draws(jax.random.key(10 + r), d, d_h, args.draws, stats="all",
                                    storage=storage, return_lambda=True)
                times[name].append((time.process_time() - c) / args.draws * 1e3)
    finally:
        null_mod._draw_fn, null_mod.gram_route = draw_fn, rule
    print(f"{args.cell}, load {os.getloadavg()[0]:.1f}: CPU-ms a draw, {args.draws} draws a round")
    for name, t in times.items():
        rest = t[1:]
        print(f"  {name}: median {statistics.median(rest):.2f}, best {min(rest):.2f}; rounds "
              f"{' '.join(f'{x:.2f}' for x in t)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
