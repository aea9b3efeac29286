"""A new shape's first score against a warm score, and the LLaMA-3-8B all-statistics/spectral
ratio, measured in one run (nothing downloaded).

    python benchmarks/new_shape.py [--which gemma,gemma-floor,flags,llama8b,layer] [--layers 32]
                                   [--keep DIR] [--profile]

- ``gemma``: a Gemma-3-270M-shaped random model (d = 640, 18 layers of 4 query heads of 256 on
  one key head, bf16 q/k projections only, as in ``benchmarks/scoring.py``), scored with all
  statistics by ``python -m rmtbase score --no-figures --quiet`` in fresh subprocesses: **cold**
  (``RMTBASE_CACHE`` a new empty folder: no null table, no profile null, no compiled program of
  that shape) and **warm** (the same command again on what the cold run cached). Wall and CPU
  seconds of each (CPU from ``getrusage`` of the children), the ratio cold / warm, the spectral
  null draws the decisions used and the flags.
  Also the **floor**: cold and warm on another empty cache with ``--max-draws 1000`` (no
  extension: the all-statistics and first spectral tables and XLA compilation, which any first
  score of the shape pays); ``--which gemma-floor`` measures that pair only.
- ``flags``: the decisions of the stopping rule against the extension forced to 100,000 draws
  (``--max-draws 100000``), on the trained default model (MiniLM, 72 heads) and on a random
  BERT of its shape (the 100,000-draw table of (384, 32) is shipped, so the forced run draws
  nothing): the same flags, and the draws each used.
- ``llama8b``: the LLaMA-3-8B-shaped folder of ``benchmarks/scoring.py`` scored with all
  statistics on an empty profile cache, again with it warm, and with ``--stats spectral``
  (its null tables are shipped): seconds and the ratios all/spectral. ``--profile`` also runs
  the cold all-statistics score under cProfile and prints the largest cumulative times of
  rmtbase's functions: where a first score of the shape goes.
- ``layer``: one 8B layer in this process (not part of the default run): CPU seconds of its
  spectral statistics, all statistics and the W_QK products alone, and one head's element
  passes — the product alone bounds all/spectral from below (``docs/performance.md``).

OPENBLAS_NUM_THREADS=1 as in the other benchmarks; the load average is printed with each run
(the machines this runs on are shared: compare ratios within one run only).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
sys.path.insert(0, str(HERE))

from scoring import LLAMA_SHAPES, build_llama8b  # noqa: E402

#: Gemma-3-270M's attention: d, query heads, key heads, d_h, FFN, shards.
LLAMA_SHAPES["gemma3"] = (640, 4, 1, 256, 2048, 1)

_READ = r"""
import json, sys, xarray as xr
with xr.open_dataset(sys.argv[1]) as ds:
    print(json.dumps({"flags": ds["head_flag"].values.astype(int).ravel().tolist(),
                      "draws": int(ds.attrs.get("spectral_null_draws",
                                                ds.attrs.get("baseline_draws", 0))),
                      "heads": int(ds["head_flag"].size)}))
"""


def score(model, cache: Path, out: Path, *extra, profile: Path | None = None) -> dict:
    """``rmtbase score MODEL --out OUT`` in a subprocess on ``cache``: wall, CPU, flags."""
    env = dict(os.environ, PYTHONPATH=str(SRC), RMTBASE_CACHE=str(cache),
               OPENBLAS_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    args = ["-m", "rmtbase", "score", *([str(model)] if model else []), "--no-figures",
            "--quiet", *map(str, extra), "--out", str(out)]
    if profile is not None:  # cProfile of the CLI's main (the executable's own process)
        args = ["-m", "cProfile", "-o", str(profile), "-m", "rmtbase", *args[2:]]
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode:
        raise SystemExit(f"rmtbase score failed ({p.returncode}):\n{p.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    r = subprocess.run([sys.executable, "-c", _READ, str(out / "scores.nc")], env=env,
                       capture_output=True, text=True, check=True)
    return dict(json.loads(r.stdout), wall=wall, cpu=cpu, load=load)


def _line(what, r) -> str:
    return (f"{what}: {r['wall']:.1f} s wall, {r['cpu']:.1f} s CPU (load {r['load']:.1f}), "
            f"{sum(r['flags'])}/{r['heads']} flagged, decisions on {r['draws']} spectral "
            "null draws")


def top_rmtbase(profile: Path, n: int = 15) -> list[str]:
    """The ``n`` largest cumulative times of rmtbase's functions in a cProfile file."""
    import pstats

    st = pstats.Stats(str(profile))
    rows = [(v[3], f"{Path(k[0]).name}:{k[2]}") for k, v in st.stats.items()
            if "rmtbase" in k[0] and "/cli/" not in k[0] and k[2] != "<module>"]
    return [f"  {t:8.1f} s  {name}" for t, name in sorted(rows, reverse=True)[:n]]


def gemma(tmp: Path, extension: bool = True) -> None:
    """Cold (stopping rule) and warm, and the floor: the same pair on another empty cache with
    the extension capped at the first table (``--max-draws 1000``: the joint and first
    spectral tables and compilation, what any first score of the shape pays).
    ``extension=False`` measures the floor pair only (minutes rather than an hour on 2 cores)."""
    folder = build_llama8b(tmp / "gemma3", 18, shape="gemma3")
    what = "Gemma-3-270M-shaped random bf16, all statistics"
    cap = ("--max-draws", "1000")
    pairs = [("floor", score(folder, tmp / "cache-floor", tmp / "g-floor", *cap),
              score(folder, tmp / "cache-floor", tmp / "g-floor-warm", *cap))]
    print(_line(f"{what}, cold, no extension (--max-draws 1000: the floor)", pairs[0][1]))
    print(_line("the same, warm", pairs[0][2]), flush=True)
    if extension:
        pairs.append(("cold", score(folder, tmp / "cache-gemma", tmp / "g-cold"),
                      score(folder, tmp / "cache-gemma", tmp / "g-warm")))
        print(_line(f"{what}, cold (stopping rule)", pairs[1][1]))
        print(_line("the same, warm", pairs[1][2]))
    for name, cold, warm in pairs:
        print(f"{name} / warm: {cold['wall'] / warm['wall']:.1f}x wall, "
              f"{cold['cpu'] / warm['cpu']:.1f}x CPU; same flags as warm: "
              f"{cold['flags'] == warm['flags']}", flush=True)


def flags(tmp: Path) -> None:
    import torch
    import transformers as tf

    torch.manual_seed(0)
    cfg = tf.BertConfig(hidden_size=384, num_attention_heads=12, num_hidden_layers=6,
                        intermediate_size=1536)
    rnd = tmp / "bert-random"
    tf.BertModel(cfg).save_pretrained(rnd)
    cache = tmp / "cache-flags"
    for name, model in (("MiniLM (trained, default model)", None), ("random BERT 384x32", rnd)):
        rule = score(model, cache, tmp / "f-rule")
        forced = score(model, cache, tmp / "f-forced", "--max-draws", "100000")
        same = rule["flags"] == forced["flags"]
        print(f"{name}: stopping rule {sum(rule['flags'])}/{rule['heads']} flagged on "
              f"{rule['draws']} draws ({rule['wall']:.1f} s); forced to {forced['draws']}: "
              f"{sum(forced['flags'])}/{forced['heads']} ({forced['wall']:.1f} s); "
              f"same flags: {same}", flush=True)


def llama8b(tmp: Path, layers: int, keep: Path | None, profile: bool) -> None:
    folder = build_llama8b(keep or tmp / "llama8b", layers)
    cache = tmp / "cache-8b"
    prof = tmp / "cold.prof" if profile else None
    cold = score(folder, cache, tmp / "l-cold", profile=prof)
    warm = score(folder, cache, tmp / "l-warm")
    spec = score(folder, cache, tmp / "l-spec", "--stats", "spectral")
    print(_line(f"LLaMA-3-8B-shaped bf16 ({layers} layers), all statistics, empty cache"
                f"{' (under cProfile)' if profile else ''}", cold))
    print(_line("the same, warm cache", warm))
    print(_line("--stats spectral", spec))
    print(f"all / spectral: {cold['wall'] / spec['wall']:.1f}x wall cold, "
          f"{warm['wall'] / spec['wall']:.1f}x warm ({warm['cpu'] / spec['cpu']:.1f}x CPU)",
          flush=True)
    if prof is not None:
        print("where the cold all-statistics score went (cumulative, rmtbase functions):")
        print("\n".join(top_rmtbase(prof)))


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _best(fn, repeats: int = 2) -> float:
    """Least CPU seconds of ``fn()`` over ``repeats`` calls after one warm-up (compilation)."""
    fn()
    out = []
    for _ in range(repeats):
        t = _cpu()
        fn()
        out.append(_cpu() - t)
    return min(out)


def layer() -> None:
    """One LLaMA-3-8B layer (32 query heads on 8 key heads, d = 4096, d_h = 128, bf16 values)
    in this process: CPU seconds of its spectral statistics, of all statistics, and of the 32
    W_QK = W_Qᵀ W_K products alone (each reduced to a sum so nothing else is computed), and of
    one head's element-statistic passes over its float32 product (range, count). The product is what
    every element statistic needs first, so (spectral + products) / spectral bounds the
    all/spectral ratio of a layer from below whatever the passes cost."""
    sys.path.insert(0, str(SRC))
    import jax
    import jax.numpy as jnp
    import ml_dtypes
    import numpy as np

    from rmtbase._matmul import mm_tn
    from rmtbase.scoring.measures.layer_stats import layer_stats
    from rmtbase.stats import tiles

    d, d_h, heads, group = 4096, 128, 32, 4
    rng = np.random.default_rng(0)

    def bf16(*shape):
        x = 0.02 * rng.standard_normal(shape, dtype=np.float32)
        return x.astype(ml_dtypes.bfloat16).astype(np.float32)

    wq, wk = bf16(heads, d_h, d), np.repeat(bf16(heads // group, d_h, d), group, axis=0)
    spec = _best(lambda: layer_stats(wq, wk, "spectral", "bfloat16", group=group))
    full = _best(lambda: layer_stats(wq, wk, "all", "bfloat16", group=group))
    prod_fn = jax.jit(lambda q, k: jax.lax.map(lambda a: jnp.sum(mm_tn(a[0], a[1])), (q, k)))
    prod = _best(lambda: jax.block_until_ready(prod_fn(wq, wk)))
    w = jax.jit(lambda q, k: mm_tn(q, k).reshape(-1))(wq[0], wk[0])
    n = w.shape[0]
    rng_fn = jax.jit(lambda w: tiles._in_graph(lambda x: tiles.range_pass(x, "float32"), w))
    geo = jax.jit(lambda w: tiles.range_finish(rng_fn(w), n))(w)
    side = (jnp.float32(np.sqrt(d_h) * 0.02**2), -8.0, 0.25, 64)
    cnt_fn = jax.jit(lambda w, g: tiles._in_graph(
        lambda x: tiles.count_pass(x, g, n, "float32", side), w))
    r1 = _best(lambda: jax.block_until_ready(rng_fn(w)), 3)
    r2 = _best(lambda: jax.block_until_ready(cnt_fn(w, geo)), 3)
    print(f"one LLaMA-3-8B layer (32 heads), CPU s (load {os.getloadavg()[0]:.1f}): spectral "
          f"{spec:.2f}, all {full:.2f}, the 32 W_QK products alone {prod:.2f}; per head: "
          f"range pass {1e3 * r1:.0f} ms, count pass {1e3 * r2:.0f} ms, product "
          f"{1e3 * prod / heads:.0f} ms")
    print(f"all / spectral per layer {full / spec:.1f}x; the bound from the products alone "
          f"(spectral + products) / spectral = {(spec + prod) / spec:.1f}x", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--which", default="gemma,flags,llama8b")
    ap.add_argument("--layers", type=int, default=32, help="layers of the LLaMA-8B folder")
    ap.add_argument("--keep", type=Path, default=None, help="build/reuse the 8B folder here")
    ap.add_argument("--profile", action="store_true",
                    help="run the cold 8B all-statistics score under cProfile")
    args = ap.parse_args(argv)
    which = set(args.which.split(","))
    print(f"# rmtbase new-shape benchmark {time.strftime('%Y-%m-%d %H:%M')}, "
          f"cpus {os.cpu_count()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if "gemma" in which or "gemma-floor" in which:
            gemma(tmp, extension="gemma" in which)
        if "flags" in which:
            flags(tmp)
        if "layer" in which:
            layer()
        if "llama8b" in which:
            llama8b(tmp, args.layers, args.keep, args.profile)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
