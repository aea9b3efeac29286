"""Where a spectral null draw's time goes: random numbers, core, tridiagonalisation, bisection.

    python benchmarks/spectral_breakdown.py [--d 768] [--dh 64]

Times each stage of the fast path of :func:`rmtbase.baseline.null.null_draws` (``stats="spectral"``) on
a batch of 128 draws (the default chunk), best of three, in µs per draw, plus the SVD route
for comparison. float32, compilation excluded, OPENBLAS_NUM_THREADS=1.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.scipy.linalg import eigh_tridiagonal  # noqa: E402

from rmtbase.ensembles import named_key  # noqa: E402
from rmtbase.ensembles.wishart import gram_bidiagonal, gram_cholesky  # noqa: E402
from rmtbase.stats.spectral import (  # noqa: E402
    bidiagonal_core,
    eigvals_from_bidiagonal,
    spectral_stats,
)

BATCH = 128


def best_seconds(fn, *args, rep=40):
    """Seconds per call of ``fn(*args)``, compilation excluded: the best of three runs of
    ``rep`` calls (also used by ``elementwise_breakdown.py``)."""
    jax.block_until_ready(fn(*args))
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(rep):
            out = fn(*args)
        jax.block_until_ready(out)
        best = min(best, (time.perf_counter() - t) / rep)
    return best


def _us_per_draw(fn, *args, rep=40):
    return best_seconds(fn, *args, rep=rep) / BATCH * 1e6


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=768)
    ap.add_argument("--dh", type=int, default=64)
    args = ap.parse_args(argv)
    d, d_h = args.d, args.dh
    keys = jax.vmap(jax.random.fold_in, (None, 0))(jax.random.key(0), jnp.arange(BATCH))
    draw = jax.jit(jax.vmap(lambda k: (*gram_bidiagonal(named_key(k, "wq"), d, d_h),
                                       gram_cholesky(named_key(k, "wk"), d, d_h))))
    diag, sub, lk = draw(keys)

    def gram(a, b, lk):  # C Cᵀ with C = Bᵀ L_K, as in eigvals_from_bidiagonal
        c = bidiagonal_core(a, b, lk)
        return c @ c.T

    gram_fn = jax.jit(jax.vmap(gram))
    m = gram_fn(diag, sub, lk)
    tri = jax.jit(lambda m: jax.lax.linalg.tridiagonal(m)[1:3])
    dd, ee = tri(m)
    bisect = jax.jit(jax.vmap(lambda x, y: eigh_tridiagonal(x, y, eigvals_only=True)))
    route = {r: jax.jit(jax.vmap(lambda a, b, c, r=r: spectral_stats(eigvals_from_bidiagonal(a, b, c, r))))
             for r in ("eigh", "svd")}
    print(f"spectral draw at ({d},{d_h}), µs per draw (batch {BATCH}, {jax.default_backend()}):")
    print(f"  random numbers (B of W_Q, L_K of W_K)  {_us_per_draw(draw, keys):7.1f}")
    print(f"  core C = Bᵀ L_K and C Cᵀ               {_us_per_draw(gram_fn, diag, sub, lk):7.1f}")
    print(f"  tridiagonalisation (sytrd)             {_us_per_draw(tri, m):7.1f}")
    print(f"  bisection (eigh_tridiagonal)           {_us_per_draw(bisect, dd, ee):7.1f}")
    for r, fn in route.items():
        print(f"  eigenvalues + statistics, {r:4s} route    {_us_per_draw(fn, diag, sub, lk):7.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
