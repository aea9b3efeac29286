"""Compile CPU of the element statistics' programs at a model's shapes (issue 59 item 4).

    python benchmarks/finish_compile.py [--cells 640x256:q5_0:4:1,576x64:q4_1:9:3] [--reps 2]

A cold quantised score compiles the element-statistics estimator (:mod:`rmtbase.stats.tiles`:
two passes over the entries, then a finish on the 65,538 |w| bins) four times per shape: for
W_Q/W_K and for W_QK inside the 'all' null table's draw program, and again in scoring's
programs for the observed heads. The finish is most of each compile and little of the run.
Per cell ``DxDH:STORAGE:HEADS:KV_HEADS`` this prints, each row the median of ``reps`` fresh
processes (CPU = user + system of the process during ``.lower().compile()``, XLA's threads
included):

- ``table``: the table's draw program (64 draws a call, ``lax.map``) as it is;
- ``table-passes``: the same with every element statistic's finish left out (the passes'
  accumulators summed into scalars instead): what a table draw that handed its finishes to
  programs shared with scoring would compile (a measurement only: no such code exists);
- ``qk-passes``, ``qk-finish``, ``factors``: scoring's programs (W_QK's product, passes and
  histogram; W_QK's finish; the factors' statistics, :mod:`rmtbase.scoring.measures.layer_stats`).

Measured (2026-11-27 01:33 UTC, load 1.5-1.9, x86-64 AVX-512, jaxlib 0.10.2, 2 reps), CPU-s:

| cell | table | table-passes | qk-passes | qk-finish | factors |
|---|---:|---:|---:|---:|---:|
| 640x256 Q5_0, 4 heads, 1 kv | 4.27 | 2.13 | 0.59 | 1.31 | 1.38 |
| 576x64 Q4_1, 9 heads, 3 kv | 4.17 | 1.71 | 0.70 | 1.42 | 1.16 |

so ~2.1-2.5 CPU-s of a cold score is the table draw compiling finishes that scoring compiles
too (at the same N: d_h·d for W_Q/W_K, d² for W_QK).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

SRC = Path(__file__).resolve().parents[1] / "src"


def _one(cell: str, what: str) -> float:
    """Compile CPU of ``what`` at ``cell`` in this process (run in a child)."""
    import time

    import jax
    import jax.numpy as jnp
    import numpy as np

    from rmtbase.baseline import null
    from rmtbase.ensembles.draws import _chunk_keys, _chunk_runner, _draw_devices
    from rmtbase.scoring.measures import layer_stats, qk_elements
    from rmtbase.stats import elementwise, tiles
    from rmtbase.stats.storage import storage_record

    shape, storage, n, n_kv = cell.split(":")
    d, d_h = (int(x) for x in shape.split("x"))
    n, n_kv = int(n), int(n_kv)
    rng = np.random.default_rng(0)
    wq = (0.02 * rng.standard_normal((n, d_h, d))).astype(np.float32)
    size = min(-(-n // 2), qk_elements.HEADS_PER_CALL)
    scale = np.full(size, 4e-4 * np.sqrt(d_h), np.float32)
    if what == "table-passes":
        def passes_only(w, trim, storage="float32", side=None):
            acc, geo = tiles.tile_passes(w, storage, side)
            return {k: jnp.sum(jnp.asarray(v, jnp.float32)) for k, v in {**acc, **geo}.items()}

        elementwise.flat_element_stats = null.flat_element_stats = passes_only
    if what.startswith("table"):
        fn = null._draw_fn(null.Draws(d, d_h, stats="all", storage=storage_record(storage)))
        program, args = _chunk_runner(fn, 64, "map", _draw_devices()), (
            _chunk_keys(jax.random.key(0), 0, 64),)
    elif what == "qk-passes":
        program, args = qk_elements._compiled()[0], (wq[:size], wq[:size], scale)
    elif what == "qk-finish":
        passes, program = qk_elements._compiled()
        args = (passes(wq[:size], wq[:size], scale)[0], d)
    else:
        program, args = layer_stats._compiled_factor_elements(storage), (wq[:n_kv],)
    t = time.process_time()
    program.lower(*args).compile()
    return time.process_time() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cells", default="640x256:q5_0:4:1,576x64:q4_1:9:3")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(_one(*a.child)))
        return
    env = dict(os.environ, PYTHONPATH=str(SRC))
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    for cell in a.cells.split(","):
        for what in ("table", "table-passes", "qk-passes", "qk-finish", "factors"):
            runs = [json.loads(subprocess.run(
                [sys.executable, __file__, "--child", cell, what], env=env, check=True,
                capture_output=True, text=True).stdout.strip().splitlines()[-1])
                for _ in range(a.reps)]
            print(f"{cell:22s} {what:13s} {statistics.median(runs):5.2f} CPU-s "
                  f"({', '.join(f'{r:.2f}' for r in runs)}); load {os.getloadavg()[0]:.1f}",
                  flush=True)


if __name__ == "__main__":
    main()
