"""The null-draws tables of docs/performance.md ("Null draws"), measured in one run (float32,
JAX CPU or whatever JAX sees).

    python benchmarks/run.py null_draws [--quick] [--scoring] [--big-draws N] [--shapes 768x64,...]

Rows:
- spectral null draws/s (all spectral statistics + rms) at (768,64), (1600,64), (4096,128),
  (5120,128): rmtbase (the exact fast path of ``null_draws``, compilation excluded) against the
  straightforward NumPy approach (draw W_Q, W_K, form W_QK, full ``np.linalg.svd`` of d×d per
  draw, timed on a few draws), with the ratio; and the same through ``rmtbase.baseline``
  (what ``rmtbase baseline --stats spectral`` runs, netCDF writing excluded);
- element-wise (all element statistics of W_Q, W_K and W_QK) null draws/s at (768,64),
  (4096,128);
- the floor: measured normal-variate rate and float32 matmul rate on this machine, and what
  fraction of it each figure reaches given the work a draw needs. Spectral draw: d_h(d_h−1)/2
  normals + 3d_h − 1 χ variates (counted as one normal each) and (7/3) d_h³ flops (C Cᵀ as a
  symmetric product, n³, plus Householder tridiagonalisation, 4/3 n³) at the matmul rate.
  Element-wise draw: 2 d d_h normals and the 2 d² d_h flops of W_Qᵀ W_K. Both floors are
  optimistic (BLAS-2 work counted at the BLAS-3 rate, statistics passes free), except that
  the rates are measured on one vector and one 768×64 product: the element-wise rows also
  give the "shape floor", the measured cost of drawing W_Q, W_K and forming W_QK alone at the
  row's shape and batch (docs/performance.md, "What bounds them", splits the rest);
- a 10,000-draw all-statistics call at (768,64) (``--big-draws``, 0 to skip);
- ``--scoring``: seconds (first call, with compilation, and warm) and peak resident memory to
  score all heads of MiniLM and of a randomly initialised GPT-2-small-sized model
  (``GPT2Config()``: 12 layers, 12 heads, d = 768), each in its own subprocess; "RSS before"
  is the peak after imports and model construction, so peak − before is what scoring adds.

OPENBLAS_NUM_THREADS=1 is set before numpy is imported (and threadpoolctl limits BLAS threads
when installed) so the NumPy baseline is single-threaded BLAS, like the tests.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

try:  # noqa: SIM105
    from threadpoolctl import threadpool_limits  # noqa: E402

    threadpool_limits(1)
except ImportError:  # pragma: no cover
    pass

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from rmtbase.baseline.eig_route import eig_method  # noqa: E402
from rmtbase.baseline.null import null_draws  # noqa: E402
from rmtbase.baseline.tables import baseline  # noqa: E402

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


def spectral_floor(d_h, normals, flops):
    """Draws/s if a spectral draw cost only its random numbers and (7/3) d_h³ flops."""
    variates = d_h * (d_h - 1) // 2 + 3 * d_h - 1
    return 1.0 / (variates / normals + (7 / 3) * d_h**3 / flops)


def element_floor(d, d_h, normals, flops):
    """Draws/s if an element-wise draw cost only 2 d d_h normals and the 2 d² d_h matmul flops."""
    return 1.0 / (2 * d * d_h / normals + 2 * d * d * d_h / flops)


def shape_floor(d, d_h, batch):
    """Draws/s if an element-wise draw cost only drawing its W_Q, W_K and forming W_QK, both
    measured at this shape, ``batch`` draws per call as the null runs them (best of three).
    The rate-based :func:`element_floor` takes its matmul rate from a 768×64 product; at
    (4096, 128) XLA's product runs ~1.6× faster than that, so only this floor bounds there."""
    from rmtbase._matmul import mm

    keys = jax.random.split(jax.random.key(3), batch)
    draw = jax.jit(jax.vmap(lambda k: jax.random.normal(k, (2, d_h, d), jnp.float32)))
    prod = jax.jit(jax.vmap(lambda w: mm(w[0].T, w[1])))
    w = draw(keys)
    jax.block_until_ready(prod(w))
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        jax.block_until_ready(prod(draw(keys)))
        best = min(best, time.perf_counter() - t)
    return batch / best


_SCORE_CASE = r"""
import json, resource, sys, time


def peak_mb():  # VmHWM: this process's own high-water mark (ru_maxrss survives exec on Linux)
    try:
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmHWM")) / 1024
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


from rmtbase.scoring.score import score_model
which = sys.argv[1]
if which == "gpt2":
    import torch, transformers
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config()).eval()
else:
    model = None
rss0 = peak_mb()
t = time.perf_counter(); score_model(model, progress=False); first = time.perf_counter() - t
t = time.perf_counter(); score_model(model, progress=False); warm = time.perf_counter() - t
peak = peak_mb()
print(json.dumps({"first": first, "warm": warm, "rss_before": rss0, "peak": peak}))
"""


def scoring_rows():
    """Score MiniLM and a random GPT-2-small in fresh subprocesses: time and peak RSS."""
    import json
    import subprocess
    import sys

    print(f"\n{'scoring, all statistics':40s} {'first call s':>12s} {'warm s':>7s} "
          f"{'peak RSS MB':>12s} {'RSS before MB':>14s}")
    for which, label in (("minilm", "MiniLM-L6 (trained, 6x12 heads)"),
                         ("gpt2", "GPT-2 small, random init (12x12 heads)")):
        out = subprocess.run([sys.executable, "-c", _SCORE_CASE, which], capture_output=True,
                             text=True, env=dict(os.environ))
        if out.returncode != 0:
            print(f"{label:40s} failed: {out.stderr.strip().splitlines()[-1:]}")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{label:40s} {r['first']:12.1f} {r['warm']:7.1f} {r['peak']:12.0f} "
              f"{r['rss_before']:14.0f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer draws (smoke run)")
    ap.add_argument("--scoring", action="store_true", help="also time model scoring")
    ap.add_argument("--big-draws", type=int, default=10_000,
                    help="draws of the all-statistics call at (768,64); 0 skips it")
    ap.add_argument("--shapes", default=None,
                    help="only these (d, d_h), e.g. 768x64,4096x128 (default: all rows)")
    args = ap.parse_args(argv)
    keep = None if args.shapes is None else {
        tuple(int(v) for v in item.lower().split("x")) for item in args.shapes.split(",")}
    spectral_shapes = [s for s in SPECTRAL_SHAPES if keep is None or s in keep]
    element_shapes = [s for s in ELEMENT_SHAPES if keep is None or s in keep]
    key = jax.random.key(0)
    print(f"# rmtbase benchmark {time.strftime('%Y-%m-%d %H:%M')}: {_cpu_name()}, "
          f"cpus {os.cpu_count()}; jax {jax.__version__}, backend {jax.default_backend()}, "
          f"devices {jax.device_count()}, float32")
    normals, flops = floor_rates()
    print(f"floor: normal variates {normals / 1e6:.1f} M/s; float32 matmul {flops / 1e9:.1f} GFLOP/s")
    print()
    print(f"{'spectral null (all stats)':25s} {'method':>6s} {'draws/s':>9s} {'naive draws/s':>14s} "
          f"{'ratio':>8s} {'floor draws/s':>14s} {'of floor':>9s}")
    for d, d_h in spectral_shapes:
        n = 500 if args.quick else (20_000 if d_h == 64 else 5_000)

        def ours(m, d=d, d_h=d_h):  # the default chunk size, as users get it
            null_draws(key, d, d_h, m, stats="spectral")

        rate, _ = _rate(ours, n, min(n, 128), repeat=2)
        n_naive = 1 if d >= 4096 else 3
        t = time.perf_counter()
        naive_spectral(d, d_h, n_naive)
        naive = n_naive / (time.perf_counter() - t)
        floor = spectral_floor(d_h, normals, flops)
        print(f"{f'({d},{d_h})':25s} {eig_method(d, d_h):>6s} {rate:9.0f} "
              f"{naive:14.3g} {rate / naive:7.0f}× {floor:14.0f} {rate / floor:8.0%}")
    n = 2_000 if args.quick else 20_000
    baseline(768, 64, draws=250, stats="spectral", progress=False)  # compile
    t = time.perf_counter()
    baseline(768, 64, draws=n, stats="spectral", progress=False)
    print(f"rmtbase.baseline (the `rmtbase baseline --stats spectral` path), (768,64), {n} draws: "
          f"{n / (time.perf_counter() - t):.0f} draws/s")
    print()
    print(f"{'element-wise null (all)':25s} {'draws/s':>9s} {'matmul floor':>13s} "
          f"{'RNG floor':>10s} {'floor':>7s} {'of floor':>9s} {'shape floor':>12s} "
          f"{'of it':>6s}")
    for d, d_h in element_shapes:
        n = 4 if args.quick else (200 if d == 768 else 6)

        chunk = min(n, 16)

        def ours_e(m, d=d, d_h=d_h, chunk=chunk):
            null_draws(key, d, d_h, m, stats="elementwise", chunk_size=chunk)

        rate, _ = _rate(ours_e, n, chunk)
        floor = element_floor(d, d_h, normals, flops)
        at_shape = shape_floor(d, d_h, chunk)
        print(f"{f'({d},{d_h})':25s} {rate:9.2f} {flops / (2 * d * d * d_h):13.1f} "
              f"{normals / (2 * d * d_h):10.0f} {floor:7.0f} {rate / floor:8.0%} "
              f"{at_shape:12.1f} {rate / at_shape:6.0%}")
    if args.big_draws:
        null_draws(key, 768, 64, 16, stats="all", chunk_size=16)
        t = time.perf_counter()
        null_draws(key, 768, 64, args.big_draws, stats="all", chunk_size=16)
        dt = time.perf_counter() - t
        print(f"\n{args.big_draws} all-statistics draws at (768,64): {dt:.1f} s "
              f"({args.big_draws / dt:.0f} draws/s, compilation excluded)")
    if args.scoring:
        scoring_rows()
    return 0


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


if __name__ == "__main__":
    raise SystemExit(main())
