"""Calibration of the FP8 nulls' element statistics, on many independent tiles.

    python sims/fp8_calibration.py [--storage fp8_e4m3] [--d 384] [--d-h 32]
                                   [--bands 1000] [--draws 4000] [--seed 0]
    python sims/fp8_calibration.py --models 12 --first-seed 6 [--storage fp8_e4m3|float32]

(the second form scores untrained FP8 models end to end: :func:`end_to_end`.)

The "checkpoint" side is built as a checkpoint is: ``--bands`` independent 128-row bands of an
(n·d_h, d) projection, i.i.d. N(0, 0.02²) (numpy), quantised by the reference writer
(:func:`rmtbase.models._fp8.quantize`) and read back by the reader
(:func:`rmtbase.models._fp8.dequantize`), each band cut into its 128/d_h heads. The null is
:func:`rmtbase.baseline.null.null_draws` at (d, d_h) with the same storage (its own JAX round
trip, heads drawn inside full tiles, :func:`rmtbase.stats.precision.null_rows`). Each head's
W_Q comes from one band and its W_K from another, so q.* and k.* are separate samples.

Printed per element statistic: n heads, the rate of p ≤ 0.05 (two-sided add-one empirical p,
:func:`rmtbase.decision.significance.empirical_p`, the scoring's), and its se: heads of one
band share its tile scales, so bands are the clusters (cluster-robust variance of the count)
plus the null's own sampling, a(1 − a)/draws; z = (rate − 0.05)/se. Also the shift of the
checkpoint heads' mean from the null mean in null sd (se from both samples, bands as
clusters). Reproduces the numbers in docs/adapters.md ("Calibration").
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402

import numpy as np  # noqa: E402


def checkpoint_heads(rng, bands: int, d: int, d_h: int, storage: str, sigma=0.02,
                     scale_dtype="float32"):
    """``(bands, 128/d_h, d_h, d)`` float32 heads of independent 128-row bands stored as
    ``storage`` by the reference writer and read back by the reader. ``scale_dtype=
    "bfloat16"`` (per-channel only): the row scales rounded to bfloat16 before quantising, as
    compressed-tensors makes them for a bfloat16 model (the null keeps float32 scales)."""
    from rmtbase.models import _fp8

    fmt = _fp8.format_of(storage)
    rows = (128 // d_h) * d_h
    out = np.empty((bands, rows // d_h, d_h, d), np.float32)
    for b in range(bands):
        w = (sigma * rng.standard_normal((rows, d))).astype(np.float32)
        if storage == _fp8.CHANNEL_STORAGE and scale_dtype == "bfloat16":
            import ml_dtypes

            sc = (np.abs(w).max(axis=1, keepdims=True) / np.float32(_fp8.E4M3_MAX)).astype(
                ml_dtypes.bfloat16).astype(np.float32)
            q = np.clip(w / sc, -_fp8.E4M3_MAX, _fp8.E4M3_MAX).astype(ml_dtypes.float8_e4m3fn)
            v = _fp8.dequantize_rows(q.view(np.uint8), sc)
        elif storage == _fp8.CHANNEL_STORAGE:
            v = _fp8.dequantize_rows(*_fp8.quantize_rows(w))
        else:
            q, s = _fp8.quantize(w, fmt)
            v = _fp8.dequantize(q.view(np.uint8), s, fmt=fmt)
        out[b] = v.reshape(rows // d_h, d_h, d)
    return out


def head_values(wq, wk, storage: str) -> dict:
    """Element statistics of heads ``(n, d_h, d)`` by :func:`rmtbase.stats.head_stats` (the
    scoring's estimator), in chunks."""
    import jax.numpy as jnp

    from rmtbase.stats import head_stats

    out: dict[str, list] = {}
    n = wq.shape[0]
    size = min(n, 512)  # one compiled shape: the last chunk is padded with its own heads
    for i in range(0, n, size):
        idx = np.minimum(np.arange(i, i + size), n - 1)
        st = head_stats(jnp.asarray(wq[idx]), jnp.asarray(wk[idx]),
                        which=("q", "k"), spectral=False, storage=storage)
        for k, v in st.items():
            out.setdefault(k, []).append(np.asarray(v)[: min(size, n - i)])
    return {k: np.concatenate(v) for k, v in out.items()}


def calibrate(storage="fp8_e4m3", d=384, d_h=32, bands=1000, draws=4000, seed=0,
              alpha=0.05, scale_dtype="float32") -> dict:
    """``{stat: (n, rate, se, z_rate, shift_sd, z_shift)}`` (definitions: module docstring)."""
    import jax

    from rmtbase.baseline.null import null_draws
    from rmtbase.decision.significance import empirical_p

    rng = np.random.default_rng(seed)
    per = 128 // d_h
    hq = checkpoint_heads(rng, bands, d, d_h, storage, scale_dtype=scale_dtype)
    hk = checkpoint_heads(rng, bands, d, d_h, storage, scale_dtype=scale_dtype)
    hq, hk = hq.reshape(-1, d_h, d), hk.reshape(-1, d_h, d)
    values = head_values(hq, hk, storage)
    null = null_draws(jax.random.key(seed), d, d_h, draws, stats="elementwise",
                      storage=storage, sigma_q=0.02, sigma_k=0.02)
    cluster = np.repeat(np.arange(bands), per)
    res = {}
    for stat in sorted(values):
        if not stat.startswith(("q.", "k.")) or stat not in null:
            continue
        v, nv = values[stat].astype(np.float64), np.asarray(null[stat], np.float64)
        p, _ = empirical_p(v, nv)
        hit = (p <= alpha).astype(float)
        rate = hit.mean()
        dev = np.bincount(cluster, weights=hit - rate)
        se = np.sqrt(np.sum(dev**2) / v.size**2 + alpha * (1 - alpha) / nv.size)
        sd = nv.std()
        cdev = np.bincount(cluster, weights=v - v.mean())
        se_shift = np.sqrt(np.sum(cdev**2) / v.size**2 + nv.var() / nv.size) / sd
        shift = (v.mean() - nv.mean()) / sd
        res[stat] = (v.size, rate, se, (rate - alpha) / se, shift, shift / se_shift)
    return res


def end_to_end(storage="fp8_e4m3", models=12, first_seed=6, layers=12, alpha=0.05) -> dict:
    """The scoring path itself: ``models`` untrained LLaMA (d = 384, 12 query heads of 32 on 4
    key heads, ``layers`` layers, transformers' N(0, 0.02²) init, seeds ``first_seed`` …)
    written as FP8 checkpoints (``tests/_fp8.py``) and scored with every statistic
    (:func:`rmtbase.scoring.score.score_model`). Per statistic in the decision: (n, rate, se,
    z) with heads sharing a 128-row tile as clusters (4 query heads a tile; a layer's 4 key
    heads are one tile, counted once each) plus a(1 − a)/draws; and the heads flagged."""
    import sys
    import tempfile
    from pathlib import Path

    import torch
    import transformers as tf

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from _fp8 import write_fp8

    from rmtbase.scoring.score import score_model

    fmt = {"fp8_e4m3": "e4m3", "fp8_e5m2": "e5m2", "fp8_e4m3_channel": "channel",
           "float32": None}[storage]
    p: dict[str, list] = {}
    clusters: dict[str, list] = {}
    flagged, draws, fam = 0, {}, None
    own_cache = "RMTBASE_CACHE" not in os.environ
    with tempfile.TemporaryDirectory() as tmp:
        if own_cache:  # null tables made for the first model serve the others
            os.environ["RMTBASE_CACHE"] = str(Path(tmp) / "cache")
        for seed in range(first_seed, first_seed + models):
            torch.manual_seed(seed)
            model = tf.LlamaForCausalLM(tf.LlamaConfig(
                hidden_size=384, num_attention_heads=12, num_key_value_heads=4,
                num_hidden_layers=layers, intermediate_size=128, vocab_size=64))
            folder = Path(tmp) / f"m{seed}"
            if fmt is None:  # the same weights in float32: the comparison
                model.save_pretrained(folder)
            else:
                write_fp8(model, folder, fmt)
            ds = score_model(str(folder), progress=False, spectrum_draws=0)
            assert ds.attrs["null_storage"] == storage or fmt is None, ds.attrs["null_storage"]
            flagged += int(ds["head_flag"].sum())
            fam = ds["in_family"].to_series()
            for stat in ds["stat"].values:
                v = ds["p_value"].sel(stat=stat).values  # (layer, head)
                draws[str(stat)] = int(ds["null_draws"].sel(stat=stat))
                if str(stat).startswith("k."):
                    v = v[:, ::3]
                    tile = np.repeat(np.arange(layers)[:, None], 4, axis=1)
                else:
                    tile = np.arange(layers)[:, None] * 3 + np.arange(12)[None, :] // 4
                p.setdefault(str(stat), []).append(v.ravel())
                clusters.setdefault(str(stat), []).append((tile + 1000 * seed).ravel())
            print(f"model seed {seed}: {int(ds['head_flag'].sum())} heads flagged", flush=True)
        if own_cache:
            del os.environ["RMTBASE_CACHE"]
    res = {"_flagged": flagged}
    for stat in fam.index[fam.values]:
        v, c = np.concatenate(p[stat]), np.concatenate(clusters[stat])
        hit = (v <= alpha).astype(float)
        rate = hit.mean()
        _, inv = np.unique(c, return_inverse=True)
        dev = np.bincount(inv, weights=hit - rate)
        se = np.sqrt(np.sum(dev**2) / v.size**2 + alpha * (1 - alpha) / draws[stat])
        res[stat] = (v.size, rate, se, (rate - alpha) / se)
    return res


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--storage", default="fp8_e4m3")
    ap.add_argument("--d", type=int, default=384)
    ap.add_argument("--d-h", type=int, default=32)
    ap.add_argument("--bands", type=int, default=1000)
    ap.add_argument("--draws", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scale-dtype", default="float32", choices=("float32", "bfloat16"),
                    help="per-channel checkpoints: the dtype their row scales are made in")
    ap.add_argument("--models", type=int, default=0,
                    help="score this many untrained FP8 models end to end instead")
    ap.add_argument("--first-seed", type=int, default=6)
    a = ap.parse_args(argv)
    if a.models:
        res = end_to_end(a.storage, a.models, a.first_seed)
        print(f"{a.storage} end to end: {a.models} models from seed {a.first_seed}, "
              f"{res.pop('_flagged')} heads flagged")
        for stat, (n, rate, se, z) in res.items():
            print(f"{stat:22s} {n:6d} {rate:7.4f} {se:7.4f} {z:6.2f}")
        return
    res = calibrate(a.storage, a.d, a.d_h, a.bands, a.draws, a.seed, scale_dtype=a.scale_dtype)
    print(f"{a.storage} d={a.d} d_h={a.d_h} bands={a.bands} draws={a.draws} seed={a.seed} "
          f"scales={a.scale_dtype}")
    print(f"{'stat':22s} {'n':>6s} {'rate':>7s} {'se':>7s} {'z':>6s} {'shift/sd':>9s} {'z':>6s}")
    for stat, (n, rate, se, z, shift, zs) in res.items():
        print(f"{stat:22s} {n:6d} {rate:7.4f} {se:7.4f} {z:6.2f} {shift:9.4f} {zs:6.2f}")


if __name__ == "__main__":
    main()
