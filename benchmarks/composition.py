"""Composition of a LLaMA-3-8B-shaped random model (issue 47): CPU time, peak memory and the
ratio to the FLOP floor of the per-layer-pair GEMMs, measured on this machine.

Shape: d = 4096, 32 query heads of d_h = 128, 8 key/value heads (GQA), bfloat16 storage (the
factors are drawn as float32 Gaussians and rounded to bfloat16, then read as float32, as a
bf16 checkpoint is). The factors are built directly (no 16 GB model). ``--layers`` runs fewer
layers at the full width: no. It times, at the full width, one layer's own work (norms,
overlap, Grams, column side) and one layer pair's work (three kinds), and extrapolates the
32-layer model as 496 pairs + 32 layers (an extrapolation, not a measured whole run: 102 TFLOP
of GEMMs take hours on 2 shared cores).

Floor: the one GEMM per layer pair, [W_Q; W_K; W_V] ((32 + 2·8)·128 × 4096) @ C (4096 ×
32·128), timed alone with the same jnp matmul, best of 3. Ratio = composition time per layer
pair / floor per layer pair.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/composition.py
"""

from __future__ import annotations

import argparse
import resource
import time

import jax
import jax.numpy as jnp
import numpy as np

from rmtbase.scoring import composition as S
from rmtbase.scoring.composition import plan
from rmtbase.stats import composition as C


def factors(rng, n_layers, h, n_kv, dh, d):
    group = h // n_kv
    for _ in range(n_layers):
        def bf(shape):
            x = jnp.asarray(rng.standard_normal(shape, dtype=np.float32) * 0.02)
            return np.asarray(x.astype(jnp.bfloat16).astype(jnp.float32))
        wq, wo_t = bf((h, dh, d)), bf((h, dh, d))
        wk = np.repeat(bf((n_kv, dh, d)), group, axis=0)
        wv = np.repeat(bf((n_kv, dh, d)), group, axis=0)
        yield wq, wk, wo_t, wv


def _timed(fn, *a):
    jax.block_until_ready(fn(*a))  # compile
    t0, c0 = time.perf_counter(), time.process_time()
    r = jax.block_until_ready(fn(*a))
    return r, time.perf_counter() - t0, time.process_time() - c0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv", type=int, default=8)
    ap.add_argument("--d", type=int, default=4096)
    ap.add_argument("--dh", type=int, default=128)
    ap.add_argument("--layers", type=int, default=32, help="layers of the extrapolated model")
    a = ap.parse_args()
    h, n_kv, dh, d = a.heads, a.kv, a.dh, a.d
    group = h // n_kv
    wq, wk, wo_t, wv = next(factors(np.random.default_rng(0), 1, h, n_kv, dh, d))
    wq, wk, wo_t, wv = (jnp.asarray(x) for x in (wq, wk, wo_t, wv))
    # per layer: norms, overlap, Grams, column side (what each layer costs once)
    layer = [0.0, 0.0]
    for fn, args in ((S._norms, (wq, wk, wo_t, wv)), (C.qk_overlap, (wq, wk)),
                     (S._grams, (wq,)), (S._grams, (wk,)), (S._grams, (wo_t,)),
                     (S._cols, (wo_t, wv))):
        _, w, c = _timed(fn, *args)
        layer[0] += w
        layer[1] += c
    cols = S._cols(wo_t, wv)
    gq, gk, go = S._grams(wq), S._grams(wk), S._grams(wo_t)
    pair = [0.0, 0.0]
    for rows, g, grp in ((wq, gk, 1), (wk[::group], gq, group), (wv[::group], go, group)):
        _, w, c = _timed(S._pair, rows, g, grp, cols, dh)
        pair[0] += w
        pair[1] += c
    rows = jnp.concatenate([wq.reshape(-1, d), wk[::group].reshape(-1, d),
                            wv[::group].reshape(-1, d)])
    mm = jax.jit(lambda x, y: x @ y)
    floor = min(_timed(mm, rows, cols)[1:] for _ in range(3))
    n_l = a.layers
    pairs = n_l * (n_l - 1) // 2
    full = plan(n_l, h, n_kv, d, dh)
    flops = 2 * (h + 2 * n_kv) * dh * d * h * dh
    total = [pairs * pair[i] + n_l * layer[i] for i in range(2)]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"shape: {h} heads (kv {n_kv}), d={d}, d_h={dh}, bf16-rounded factors")
    print(f"GEMM floor per layer pair: {floor[0]:.2f} s wall, {floor[1]:.2f} s CPU "
          f"({flops / floor[0] / 1e9:.1f} GFLOP/s wall)")
    print(f"composition per layer pair (3 kinds): {pair[0]:.2f} s wall, {pair[1]:.2f} s CPU: "
          f"{pair[0] / floor[0]:.2f}x wall, {pair[1] / floor[1]:.2f}x CPU of the floor")
    print(f"per layer (norms, overlap, Grams, column side): {layer[0]:.2f} s wall, "
          f"{layer[1]:.2f} s CPU")
    print(f"{n_l} layers ({pairs} layer pairs, {full['pairs_per_kind']:,} pairs per kind): "
          f"extrapolated {total[0] / 60:.0f} min wall, {total[1] / 60:.0f} min CPU; ratio to "
          f"the floor {total[0] / (pairs * floor[0]):.2f}x wall, "
          f"{total[1] / (pairs * floor[1]):.2f}x CPU")
    print(f"memory: planned {full['bytes'] / 2**30:.2f} GiB for {n_l} layers; this process's "
          f"peak RSS {peak:.2f} GiB (one layer)")


if __name__ == "__main__":
    main()
