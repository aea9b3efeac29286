"""Composition of a LLaMA-3-8B-shaped random model: CPU time, peak memory and the
ratio to the FLOP floor of the per-layer-pair GEMMs, measured on the same machine.

Shape: d = 4096, 32 query heads of d_h = 128, 8 key/value heads (GQA), bfloat16 storage (each
layer's factors are drawn as float32 Gaussians and rounded to bfloat16, then read as float32,
as a bf16 checkpoint is). The factors are generated layer by layer (no 16 GB model on disk) and
fed to :func:`rmtbase.scoring.composition.run.composition_from_factors`, the function
``rmtbase.composition`` runs after loading; the generation is timed apart and left out.

``--layers N`` runs the real thing on the first N layers at the full width (N(N−1)/2 layer
pairs, every kind, the overlap and the norms); ``--layers 32`` is the whole model (496 layer
pairs, 102 TFLOP of GEMMs). With N < 32 the 32-layer model is also extrapolated from one layer's
own work and one layer pair's work timed apart (an extrapolation, marked as such).

Floor: the one GEMM per layer pair, [W_Q; W_K; W_V] ((32 + 2·8)·128 × 4096) @ C (4096 ×
32·128), timed alone with the same jnp matmul, best of 3, times the number of layer pairs.
Ratio = the run's time / that floor (CPU time and wall). Peak memory: the process's peak RSS
(``ru_maxrss``) beside :func:`rmtbase.scoring.composition.run.plan`'s bytes.

Here (2 shared cores):

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/composition.py --layers 3

The whole model, on the GPU machine's 16 CPU cores (about 35 CPU-minutes measured piecewise on
2 cores; JAX kept on the CPU so the numbers are CPU numbers; ~3 GiB):

    JAX_PLATFORMS=cpu python benchmarks/composition.py --layers 32 --json "$OUT/composition_8b.json"

and, for the accelerator's time on the same shape (same script, JAX on the GPU; the floor is
then the GPU GEMM): ``python benchmarks/composition.py --layers 32 --json $OUT/composition_8b_gpu.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import time

import jax
import jax.numpy as jnp
import numpy as np

from rmtbase.scoring.composition import run as S
from rmtbase.scoring.composition.run import composition_from_factors, plan
from rmtbase.stats import composition as C


def factors(rng, n_layers, h, n_kv, dh, d, spent=None):
    """Per layer (wq, wk, wo_t, wv), bf16-rounded float32, keys/values expanded to the query
    heads; the generation time is added to ``spent`` ([wall, CPU]) when given."""
    group = h // n_kv
    for _ in range(n_layers):
        t0, c0 = time.perf_counter(), time.process_time()

        def bf(shape):
            x = jnp.asarray(rng.standard_normal(shape, dtype=np.float32) * 0.02)
            return np.asarray(x.astype(jnp.bfloat16).astype(jnp.float32))
        wq, wo_t = bf((h, dh, d)), bf((h, dh, d))
        wk = np.repeat(bf((n_kv, dh, d)), group, axis=0)
        wv = np.repeat(bf((n_kv, dh, d)), group, axis=0)
        if spent is not None:
            spent[0] += time.perf_counter() - t0
            spent[1] += time.process_time() - c0
        yield wq, wk, wo_t, wv


def _timed(fn, *a):
    jax.block_until_ready(fn(*a))  # compile
    t0, c0 = time.perf_counter(), time.process_time()
    r = jax.block_until_ready(fn(*a))
    return r, time.perf_counter() - t0, time.process_time() - c0


def floor_per_pair(wq, wk, wv, cols, group, d):
    """Best of 3 (wall, CPU) of the layer pair's one GEMM."""
    rows = jnp.concatenate([wq.reshape(-1, d), wk[::group].reshape(-1, d),
                            wv[::group].reshape(-1, d)])
    mm = jax.jit(lambda x, y: x @ y)
    return min(_timed(mm, rows, cols)[1:] for _ in range(3))


def extrapolate(wq, wk, wo_t, wv, group, dh):
    """(per layer [wall, CPU], per layer pair [wall, CPU]) timed apart."""
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
    return layer, pair


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv", type=int, default=8)
    ap.add_argument("--d", type=int, default=4096)
    ap.add_argument("--dh", type=int, default=128)
    ap.add_argument("--layers", type=int, default=3,
                    help="layers run for real at the full width (32: the whole model)")
    ap.add_argument("--full-layers", type=int, default=32, help="layers of the whole model")
    ap.add_argument("--json", default=None, help="also write the numbers to this JSON file")
    a = ap.parse_args()
    h, n_kv, dh, d, n_l = a.heads, a.kv, a.dh, a.d, a.layers
    group = h // n_kv
    res = {"shape": {"heads": h, "kv_heads": n_kv, "d": d, "d_h": dh, "storage": "bfloat16"},
           "layers_run": n_l, "backend": jax.default_backend(), "cpus": os.cpu_count(),
           "machine": platform.machine(), "jax": jax.__version__}

    # the floor, on one layer's factors (layer 0 of another seed: the values do not matter)
    wq, wk, wo_t, wv = (jnp.asarray(x) for x in
                        next(factors(np.random.default_rng(1), 1, h, n_kv, dh, d)))
    cols = S._cols(wo_t, wv)
    fl = floor_per_pair(wq, wk, wv, cols, group, d)
    gemm = 2.0 * (h + 2 * n_kv) * dh * d * h * dh
    res["floor_per_pair"] = {"wall_s": fl[0], "cpu_s": fl[1], "gflops_wall": gemm / fl[0] / 1e9}
    if n_l < a.full_layers:
        layer, pair = extrapolate(wq, wk, wo_t, wv, group, dh)
    del wq, wk, wo_t, wv, cols

    # the real run on n_l layers
    pairs = n_l * (n_l - 1) // 2
    spent = [0.0, 0.0]
    t0, c0 = time.perf_counter(), time.process_time()
    comp, _, _ = composition_from_factors(
        factors(np.random.default_rng(0), n_l, h, n_kv, dh, d, spent), n_kv)
    wall = time.perf_counter() - t0 - spent[0]
    cpu = time.process_time() - c0 - spent[1]
    assert np.isfinite(comp[:, 0, :, n_l - 1, :]).all()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    pl = plan(n_l, h, n_kv, d, dh)
    res["run"] = {"layer_pairs": pairs, "pairs_per_kind": pl["pairs_per_kind"],
                  "wall_s": wall, "cpu_s": cpu, "generation_s_excluded": spent,
                  "floor_wall_s": pairs * fl[0], "floor_cpu_s": pairs * fl[1],
                  "ratio_wall": wall / (pairs * fl[0]), "ratio_cpu": cpu / (pairs * fl[1]),
                  "peak_rss_gib": peak, "planned_gib": pl["bytes"] / 2**30,
                  "gemm_tflop": pl["gemm_flops"] / 1e12}
    print(f"shape: {h} heads (kv {n_kv}), d={d}, d_h={dh}, bf16-rounded factors; backend "
          f"{res['backend']}, {res['cpus']} CPUs")
    print(f"GEMM floor per layer pair: {fl[0]:.2f} s wall, {fl[1]:.2f} s CPU "
          f"({res['floor_per_pair']['gflops_wall']:.1f} GFLOP/s wall)")
    r = res["run"]
    print(f"measured: {n_l} layers ({pairs} layer pairs, {r['pairs_per_kind']:,} pairs per "
          f"kind, {r['gemm_tflop']:.2f} TFLOP): {wall:.1f} s wall, {cpu:.1f} s CPU = "
          f"{r['ratio_wall']:.2f}x wall, {r['ratio_cpu']:.2f}x CPU of the floor; peak RSS "
          f"{peak:.2f} GiB (planned {r['planned_gib']:.2f} GiB)")
    if n_l < a.full_layers:
        nf = a.full_layers
        pf = nf * (nf - 1) // 2
        total = [pf * pair[i] + nf * layer[i] for i in range(2)]
        full = plan(nf, h, n_kv, d, dh)
        res["extrapolated"] = {"layers": nf, "wall_s": total[0], "cpu_s": total[1],
                               "ratio_wall": total[0] / (pf * fl[0]),
                               "ratio_cpu": total[1] / (pf * fl[1]),
                               "planned_gib": full["bytes"] / 2**30,
                               "per_pair_cpu_s": pair[1], "per_layer_cpu_s": layer[1]}
        e = res["extrapolated"]
        print(f"extrapolated (not measured), {nf} layers: per layer pair {pair[1]:.2f} s CPU, "
              f"per layer {layer[1]:.2f} s CPU -> {total[0] / 60:.0f} min wall, "
              f"{total[1] / 60:.0f} min CPU; {e['ratio_wall']:.2f}x wall, "
              f"{e['ratio_cpu']:.2f}x CPU of the floor; planned {e['planned_gib']:.2f} GiB")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
