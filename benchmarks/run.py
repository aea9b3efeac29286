"""rmtbase performance table, measured in one run (float32, JAX CPU or whatever JAX sees).

    python benchmarks/run.py [--quick] [--scoring] [--big-draws N]

Rows:
- spectral null draws/s (all spectral statistics + rms) at (768,64), (1600,64), (4096,128),
  (5120,128): rmtbase (Bartlett fast path, compilation excluded) against the straightforward
  NumPy approach (draw W_Q, W_K, form W_QK, full ``np.linalg.svd`` of d×d per draw, timed on a
  few draws), with the ratio;
- element-wise (all element statistics of W_Q, W_K and W_QK) null draws/s at (768,64),
  (4096,128);
- the floor: measured normal-variate rate and float32 matmul rate on this machine, and what
  fraction of it each figure reaches given the work a draw needs;
- a 10,000-draw all-statistics call at (768,64) (``--big-draws``, 0 to skip);
- ``--scoring``: model scoring timings, only if ``rmtbase.score`` exists.

OPENBLAS_NUM_THREADS=1 is set before numpy is imported (and threadpoolctl limits BLAS threads
when installed) so the NumPy baseline is single-threaded BLAS, like the tests.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

try:  # noqa: SIM105
    from threadpoolctl import threadpool_limits  # noqa: E402

    threadpool_limits(1)
except ImportError:  # pragma: no cover
    pass

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from rmtbase.null import null_draws  # noqa: E402

SPECTRAL_SHAPES = [(768, 64), (1600, 64), (4096, 128), (5120, 128)]
ELEMENT_SHAPES = [(768, 64), (4096, 128)]


def _rate(fn, n, warm, repeat=1):
    fn(warm)  # compile / warm up with the same chunk size (start-up excluded)
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn(n)
        best = min(best, time.perf_counter() - t)
    return n / best, best


def naive_spectral(d, d_h, n, seed=0):
    """The straightforward approach: full SVD of the d×d product per draw (float32)."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        wq = rng.standard_normal((d_h, d), dtype=np.float32)
        wk = rng.standard_normal((d_h, d), dtype=np.float32)
        s = np.linalg.svd(wq.T @ wk, compute_uv=False)[:d_h]
        lam = s * s
        p = lam / lam.sum()
        _ = (lam.max(), lam.min(), lam.sum(), (lam**2).sum(), -(p * np.log(p)).sum())


def floor_rates():
    """Measured normal-variate rate (JAX threefry, float32) and float32 matmul FLOP/s."""
    key = jax.random.key(0)
    gen = jax.jit(lambda k: jax.random.normal(k, (1 << 22,), jnp.float32))
    jax.block_until_ready(gen(key))
    t = time.perf_counter()
    for _ in range(5):
        jax.block_until_ready(gen(key))
    normals = 5 * (1 << 22) / (time.perf_counter() - t)
    a = jax.random.normal(key, (64, 768), jnp.float32)
    mm = jax.jit(lambda x: jnp.swapaxes(x, -1, -2) @ x)
    batch = jnp.broadcast_to(a, (32, 64, 768))
    jax.block_until_ready(mm(batch))
    t = time.perf_counter()
    for _ in range(5):
        jax.block_until_ready(mm(batch))
    flops = 5 * 32 * 2 * 768 * 768 * 64 / (time.perf_counter() - t)
    return normals, flops


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer draws (smoke run)")
    ap.add_argument("--scoring", action="store_true", help="also time model scoring")
    ap.add_argument("--big-draws", type=int, default=10_000,
                    help="draws of the all-statistics call at (768,64); 0 skips it")
    args = ap.parse_args(argv)
    key = jax.random.key(0)
    print(f"# rmtbase benchmark: jax {jax.__version__}, backend {jax.default_backend()}, "
          f"devices {jax.device_count()}, cpus {os.cpu_count()}, float32")
    normals, flops = floor_rates()
    print(f"floor: normal variates {normals / 1e6:.1f} M/s; float32 matmul {flops / 1e9:.1f} GFLOP/s")
    print()
    print(f"{'spectral null (all stats)':28s} {'rmtbase draws/s':>16s} {'naive draws/s':>14s} "
          f"{'ratio':>9s} {'RNG floor draws/s':>18s}")
    for d, d_h in SPECTRAL_SHAPES:
        n = 500 if args.quick else (20_000 if d_h == 64 else 5_000)

        def ours(m, d=d, d_h=d_h):  # the default chunk size, as users get it
            null_draws(key, d, d_h, m, stats="spectral")

        rate, _ = _rate(ours, n, min(n, 128), repeat=2)
        n_naive = 1 if d >= 4096 else 3
        t = time.perf_counter()
        naive_spectral(d, d_h, n_naive)
        naive = n_naive / (time.perf_counter() - t)
        rng_floor = normals / (d_h * (d_h - 1) + 2 * d_h)  # Bartlett normals + χ² per draw
        print(f"({d},{d_h}){'':18s} {rate:16.0f} {naive:14.3g} {rate / naive:9.0f} {rng_floor:18.0f}")
    print()
    print(f"{'element-wise null (all)':28s} {'draws/s':>16s} {'matmul floor':>14s} {'RNG floor':>9s}")
    for d, d_h in ELEMENT_SHAPES:
        n = 4 if args.quick else (200 if d == 768 else 6)

        chunk = min(n, 16)

        def ours_e(m, d=d, d_h=d_h, chunk=chunk):
            null_draws(key, d, d_h, m, stats="elementwise", chunk_size=chunk)

        rate, _ = _rate(ours_e, n, chunk)
        mm_floor = flops / (2 * d * d * d_h)
        rng_floor = normals / (2 * d * d_h)
        print(f"({d},{d_h}){'':18s} {rate:16.2f} {mm_floor:14.1f} {rng_floor:9.0f}")
    if args.big_draws:
        null_draws(key, 768, 64, 16, stats="all", chunk_size=16)
        t = time.perf_counter()
        null_draws(key, 768, 64, args.big_draws, stats="all", chunk_size=16)
        dt = time.perf_counter() - t
        print(f"\n{args.big_draws} all-statistics draws at (768,64): {dt:.1f} s "
              f"({args.big_draws / dt:.0f} draws/s, compilation excluded)")
    if args.scoring:
        if importlib.util.find_spec("rmtbase.score") is None:
            print("\nscoring: rmtbase.score not available; skipped")
        else:
            from rmtbase.score import score_model

            t = time.perf_counter()
            score_model(None, progress=False)
            print(f"\nscoring: default MiniLM, all statistics: {time.perf_counter() - t:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
