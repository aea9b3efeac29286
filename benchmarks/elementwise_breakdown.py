"""Where an element-wise null draw's time goes: normals, W_QK product, passes over W_QK, W_Q/W_K.

    python benchmarks/elementwise_breakdown.py [--shapes 768x64,4096x128] [--draws 8]

Times each stage of an all-statistics null draw (what :func:`rmtbase.baseline.null.null_draws`
runs with ``stats="all"``: W_Q, W_K drawn in full, then :func:`rmtbase.stats.head_stats`) in ms
per draw, best of three, float32, compilation excluded, OPENBLAS_NUM_THREADS=1:

- the 2 d d_h normals of W_Q and W_K;
- the product W_QK = W_Qᵀ W_K (float32 at full precision, :func:`rmtbase._matmul.mm`);
- pass 1 over the d² entries of W_QK (Σw, Σw², min, max: :func:`rmtbase.stats.tiles.range_pass`);
- pass 2 (centred power sums, the entropy histogram's scatter, the |w| histogram's scatter of
  1 + i ln|w|: :func:`rmtbase.stats.tiles.count_pass`) and the finish (fits from the histograms);
- the element statistics of W_Q and W_K (2 d d_h entries), and the spectral statistics;
- the whole draw, as ``head_stats`` runs it.

Beside each stage, the floor's charge for it (the measured normal-variate and float32 matmul
rates, as in ``benchmarks/run.py``; the passes are charged nothing there). This is the profile
behind docs/performance.md's "What bounds the fractions of the floor".
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from run import floor_rates  # noqa: E402  (benchmarks/run.py: the same floor as the table)
from spectral_breakdown import best_seconds  # noqa: E402

from rmtbase._matmul import mm  # noqa: E402
from rmtbase.stats import head_stats  # noqa: E402
from rmtbase.stats.elementwise import _element_stats_flat  # noqa: E402
from rmtbase.stats.estimator import accumulators  # noqa: E402
from rmtbase.stats.fused import (  # noqa: E402
    FUSED,
    count_finish,
    count_pass,
    range_finish,
    range_pass,
)
from rmtbase.stats.spectral import eigvals_from_factors, spectral_stats  # noqa: E402
from rmtbase.stats.tiles import _in_graph, one_tile  # noqa: E402

#: The fused estimator's accumulator records (how :func:`_in_graph` combines tiles).
RECORDS = accumulators((FUSED,))


def _ms(fn, *args, draws, rep=3):
    return best_seconds(fn, *args, rep=rep) / draws * 1e3


def _stages(flat, n):
    """Pass 1, pass 2 and the finish over each row of ``flat`` (draws, n), run as the library
    runs them (one sample at a time, ``lax.map``: batched scatters are slow on CPU)."""
    def one_map(fn):
        return jax.jit(lambda *xs: jax.lax.map(lambda x: fn(*x), xs))

    pass1 = one_map(lambda x: range_finish(_in_graph(lambda t: range_pass(t, "float32"), x, RECORDS), n))
    geo = pass1(flat)
    pass2 = one_map(lambda x, g: _in_graph(lambda t: count_pass(t, g, n, "float32"), x, RECORDS))
    acc = pass2(flat, geo)
    finish = one_map(lambda a, g: count_finish(a, g, n, (0.8,), "float32"))
    draws = flat.shape[0]
    return [("  pass 1 (sums, min, max)", _ms(pass1, flat, draws=draws)),
            ("  pass 2 (powers, 2 histogram scatters)", _ms(pass2, flat, geo, draws=draws)),
            ("  finish (fits from the histograms)", _ms(finish, acc, geo, draws=draws))]


def breakdown(d: int, d_h: int, draws: int, rates) -> list[tuple[str, float, float | None]]:
    nrate, flops = rates
    keys = jax.random.split(jax.random.key(0), draws)
    draw = jax.jit(jax.vmap(lambda k: jax.random.normal(k, (2, d_h, d))))
    w = draw(keys)
    wq, wk = w[:, 0], w[:, 1]
    prod = jax.jit(jax.vmap(lambda q, k: mm(q.T, k).reshape(-1)))
    flat = prod(wq, wk)
    qk_all = jax.jit(lambda f: jax.lax.map(lambda x: one_tile(x, (0.8,), "float32"), f))
    factors = jax.jit(lambda q, k: (_element_stats_flat(q.reshape(draws, -1), 0.8),
                                    _element_stats_flat(k.reshape(draws, -1), 0.8)))
    spectral = jax.jit(lambda q, k: spectral_stats(eigvals_from_factors(q, k)))
    whole = jax.jit(lambda k: head_stats(*jnp.moveaxis(draw(k), 1, 0)))
    f_norm = 2 * d * d_h / nrate * 1e3
    f_mm = 2 * d * d * d_h / flops * 1e3
    qk_flat = flat
    wq_flat = wq.reshape(draws, -1)
    return [
        ("normals of W_Q, W_K (2 d d_h)", _ms(draw, keys, draws=draws), f_norm),
        ("W_QK = W_Qᵀ W_K (2 d² d_h flops)", _ms(prod, wq, wk, draws=draws), f_mm),
        (f"W_QK statistics ({d * d:,} entries)", _ms(qk_all, qk_flat, draws=draws), None),
        *[(name, t, None) for name, t in _stages(qk_flat, d * d)],
        (f"W_Q and W_K element statistics (2 × {d * d_h:,})", _ms(factors, wq, wk, draws=draws), None),
        *[(name + " (W_Q)", t, None) for name, t in _stages(wq_flat, d * d_h)],
        ("spectral statistics (d_h×d_h cores)", _ms(spectral, wq, wk, draws=draws), None),
        ("whole draw (head_stats)", _ms(whole, keys, draws=draws), f_norm + f_mm),
    ]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="768x64,4096x128")
    ap.add_argument("--draws", type=int, default=8, help="draws per timed call (default 8)")
    args = ap.parse_args(argv)
    rates = floor_rates()
    print(f"element-wise null draw, ms per draw ({jax.default_backend()}, float32); floor rates "
          f"(benchmarks/run.py): {rates[0] / 1e6:.1f} M normals/s, {rates[1] / 1e9:.1f} GFLOP/s")
    for shape in args.shapes.split(","):
        d, d_h = (int(x) for x in shape.lower().split("x"))
        draws = max(1, args.draws if d <= 1024 else args.draws // 4)
        print(f"({d}, {d_h}), {draws} draws per call:{'floor':>20}")
        for name, ms, floor in breakdown(d, d_h, draws, rates):
            f = f"{floor:8.3f}" if floor is not None else f"{'-':>8}"
            print(f"  {name:40s} {ms:8.3f} {f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
