"""The composition null's draws (the three Gaussian-factor nulls a ``composition`` run draws at
a new shape), by :func:`rmtbase.ensembles.threefry.normal` against ``jax.random.normal``, in
CPU seconds (issue 59 item 4).

    OPENBLAS_NUM_THREADS=1 python benchmarks/composition_null.py [--d 576] [--d-h 64]
                                                                 [--draws 18000] [--rounds 2]

At (d, d_h) — default SmolLM2-135M's 576 × 64, 18,000 draws each
(:attr:`rmtbase.stats.gaussian_null.GaussianNull.composition_draws`) — it draws the
composition null (:func:`rmtbase.scoring.composition.pairs.null_scores`, the reduced sampler
at float32 storage) and the QK overlap's two nulls (distinct and shared key head,
:func:`rmtbase.scoring.composition.overlap.overlap_null`) with the module's generator
(``threefry``) and with ``jax.random.normal`` put in its place (``jax``), alternating in one
process, ``--rounds`` times each; every round compiles its programs afresh (the samplers'
``lru_cache`` cleared), as a first run does. Printed per round and variant: CPU seconds
(``time.process_time``, this process and its threads) and wall seconds of each null, and at the
end whether the two variants' draws are bit-identical (they must be: the module's claim).
Compare within one run only (a shared machine's load moves the seconds).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from rmtbase.baseline import composition_null as C  # noqa: E402
from rmtbase.ensembles import named_key, threefry  # noqa: E402
from rmtbase.scoring.composition.overlap import overlap_null  # noqa: E402
from rmtbase.scoring.composition.pairs import null_scores  # noqa: E402


def _jax_normal(key, shape, dtype=jnp.float32):
    return jax.random.normal(key, shape, dtype)


def draw_all(d: int, d_h: int, draws: int, generator) -> tuple[dict, list]:
    """The three nulls with ``generator`` as the samplers' normal, compiled afresh:
    ({null: (CPU s, wall s)}, [sorted draws of each])."""
    C.normal = generator
    C._reduced.cache_clear()
    C._overlap.cache_clear()
    times, out = {}, []
    overlap_key = named_key(jax.random.key(0), "overlap")
    jobs = [("composition", lambda: null_scores(jax.random.key(0), d, d_h, d_h, draws))]
    for name, shared in (("distinct", False), ("shared", True)):
        jobs.append((f"overlap-{name}", lambda name=name, shared=shared: overlap_null(
            named_key(overlap_key, name), d, d_h, draws, shared)))
    for name, job in jobs:
        c0, w0 = time.process_time(), time.perf_counter()
        out.append(np.asarray(job()))
        times[name] = (time.process_time() - c0, time.perf_counter() - w0)
    C.normal = threefry.normal
    return times, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=576)
    ap.add_argument("--d-h", type=int, default=64)
    ap.add_argument("--draws", type=int, default=18_000)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    got = {}
    for r in range(a.rounds):
        for variant, gen in (("jax", _jax_normal), ("threefry", threefry.normal)):
            times, got[variant] = draw_all(a.d, a.d_h, a.draws, gen)
            total = sum(t[0] for t in times.values())
            parts = "  ".join(f"{k} {c:.2f} ({w:.2f} wall)" for k, (c, w) in times.items())
            print(f"round {r} {variant:8s} CPU s: {parts}  total {total:.2f}", flush=True)
    same = all(np.array_equal(x.view(np.uint64), y.view(np.uint64))
               for x, y in zip(got["jax"], got["threefry"], strict=True))
    print(f"draws bit-identical: {same}; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
