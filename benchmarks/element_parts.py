"""The element statistics part by part, as a null-table draw runs them (CPU-ms per matrix).

    python benchmarks/element_parts.py [--cells 576x64:q4_1,640x256:q5_0] [--draws 16]

For each cell ``DxDH:STORAGE``: W_Q, W_K drawn as :func:`rmtbase.baseline.null.null_draws`
draws them (low-rank factors through the storage's round trip) and W_QK = W_Qᵀ W_K; for W_QK
(D² entries, counted as points) and W_Q (D·DH entries, the storage's cells) the time per
matrix of the whole estimator (:func:`rmtbase.stats.tiles.one_tile`), pass 1
(:func:`rmtbase.stats.fused.range_pass`), pass 2 (:func:`~rmtbase.stats.fused.count_pass`)
and the finish (:func:`~rmtbase.stats.fused.count_finish`), then pieces of them timed on
their own: the centred power sums, the entropy bincount, the |w| bin keys, the logs, the
65,538-bin complex scatter of 1 + i ln|w|, the cumulative counts (``rank_cum`` and the full
associative scan it replaced) and the Weibull fit. Every function runs over
``--draws`` matrices in one ``lax.map`` (as the library does: batched scatters are slow on
CPU), compiled first, then timed in turns (7 rounds, best), CPU seconds of the process
(``time.process_time``: all threads) and wall. OPENBLAS_NUM_THREADS=1. Parts overlap (a pass
holds its pieces), so they do not add up to the whole.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from rmtbase._matmul import mm_tn  # noqa: E402
from rmtbase.ensembles import lowrank_factors  # noqa: E402
from rmtbase.stats._binning import entropy_bins, trim_ranks  # noqa: E402
from rmtbase.stats._magnitude import (  # noqa: E402
    MAG_BINS,
    mag_index,
    q_rank,
    rank_cum,
    weibull_fit,
)
from rmtbase.stats.fused import count_finish, count_pass, range_finish, range_pass  # noqa: E402
from rmtbase.stats.precision import round_trip  # noqa: E402
from rmtbase.stats.storage import storage_record  # noqa: E402
from rmtbase.stats.tiles import one_tile  # noqa: E402


def timed(fns: dict, args: dict, rounds: int = 7) -> dict:
    """Best (CPU s, wall s) of each function over ``rounds`` turns, after one compiling call."""
    best = {}
    for k, f in fns.items():
        jax.block_until_ready(f(*args[k]))
    for _ in range(rounds):
        for k, f in fns.items():
            c0, t0 = time.process_time(), time.perf_counter()
            jax.block_until_ready(f(*args[k]))
            c, t = time.process_time() - c0, time.perf_counter() - t0
            old = best.get(k, (c, t))
            best[k] = (min(old[0], c), min(old[1], t))
    return best


def _mapped(fn):
    return jax.jit(lambda *xs: jax.lax.map(lambda x: fn(*x), xs))


def parts(n: int, storage: str) -> dict:
    """name -> (function of (flat, geo, acc), which of them it takes)."""
    be = entropy_bins(n)
    below = min(trim_ranks(n, 0.8)[0], q_rank(n))

    def sums(x, g):
        c = x - g["mean"]
        c2 = c * c
        return jnp.sum(c2), jnp.sum(c2 * c), jnp.sum(c2 * c2)

    def entropy(x, g):
        ip = jnp.clip(jnp.floor((x - g["hmin"]) / g["delta"]), 0, be - 1).astype(jnp.int32)
        return jnp.bincount(ip, length=be)

    def scatter(x, g):
        a = jnp.abs(x)
        return jnp.zeros(MAG_BINS, jnp.complex64).at[mag_index(a, g["top"])].add(
            jax.lax.complex(jnp.ones_like(a), jnp.log(a)))

    def fit(a, g):
        return weibull_fit(a["mag"], a["mag_sx"], n, 0.8, jnp.float32, rank_cum(a["mag"], below))

    return {
        "whole estimator": (lambda x: one_tile(x, (0.8,), storage), "x"),
        "pass 1": (lambda x: range_finish(range_pass(x, storage), n), "x"),
        "pass 2": (lambda x, g: count_pass(x, g, n, storage), "xg"),
        "finish": (lambda a, g: count_finish(a, g, n, (0.8,), storage), "ag"),
        "  power sums": (sums, "xg"),
        "  entropy bincount": (entropy, "xg"),
        "  |w| bin keys": (lambda x, g: jnp.sum(mag_index(jnp.abs(x), g["top"])), "xg"),
        "  logs": (lambda x, g: jnp.sum(jnp.log(jnp.abs(x))), "xg"),
        "  complex scatter": (scatter, "xg"),
        "  rank_cum": (lambda a, g: rank_cum(a["mag"], below), "ag"),
        "  associative scan": (lambda a, g: jax.lax.associative_scan(jnp.add, a["mag"]), "ag"),
        "  Weibull fit": (fit, "ag"),
    }


def profile(d: int, d_h: int, storage: str, draws: int) -> list[tuple[str, float, float]]:
    rec = storage_record(storage)

    def factors(key):
        q, k = lowrank_factors(key, d, d_h, 1.0, 1.0, jnp.float32)
        return (q, k) if rec.is_identity else (round_trip(q, rec), round_trip(k, rec))

    q, k = jax.jit(jax.vmap(factors))(jax.random.split(jax.random.key(1), draws))
    qk = jax.jit(jax.vmap(lambda a, b: mm_tn(a, b).reshape(-1)))(q, k)
    rows = []
    for name, flat, st in (("W_QK", qk, "float32"), ("W_Q", q.reshape(draws, -1), storage)):
        n = flat.shape[1]
        table = parts(n, st)
        fns = {p: _mapped(f) for p, (f, _) in table.items()}
        geo = fns["pass 1"](flat)
        acc = fns["pass 2"](flat, geo)
        given = {"x": (flat,), "xg": (flat, geo), "ag": (acc, geo)}
        best = timed(fns, {p: given[w] for p, (_, w) in table.items()})
        rows.append((f"{name} ({n:,} entries, {st})", None, None))
        rows += [(p, c / draws * 1e3, t / draws * 1e3) for p, (c, t) in best.items()]
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", default="576x64:q4_1,640x256:q5_0")
    ap.add_argument("--draws", type=int, default=16, help="matrices per timed call")
    args = ap.parse_args(argv)
    for cell in args.cells.split(","):
        shape, storage = cell.split(":")
        d, d_h = (int(v) for v in shape.lower().split("x"))
        print(f"{d}x{d_h} {storage}: CPU-ms per matrix (wall)")
        for name, c, t in profile(d, d_h, storage, args.draws):
            print(f"  {name}" if c is None else f"    {name:20s} {c:7.3f} ({t:6.3f})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
