"""First contact at the big shapes: a cold score against a warm one, untrained and planted.

    python benchmarks/big_shapes.py [--small] [--shapes llama3-8b,qwen2-7b,d5120]
                                    [--kinds untrained,planted] [--keep DIR] [--calibrate]

Each shape is a LLaMA-layout safetensors folder of q/k projections only (the loader reads what
the score needs), bfloat16, N(0, 0.02²) entries:

- ``llama3-8b``: (4096, 128), 32 layers of 32 query heads on 8 key heads (LLaMA-3-8B, and
  Mistral-7B's attention shape);
- ``qwen2-7b``: (3584, 128), 28 layers of 28 query heads on 4 key heads (Qwen2-7B);
- ``d5120``: (5120, 128), 40 layers of 40 query heads on 8 key heads (a 13-14B width);
- ``small`` (``--small``: the only one that fits a few CPU-minutes): (640, 64), 8 layers of 10
  query heads on 2 key heads; no table ships at (640, 64), so a cold run draws every null the
  big shapes draw beyond their shipped 2,000 all-statistics and 4,000 spectral draws.

``untrained``: the entries only. ``planted``: in every layer, the first quarter of the key heads
(at least one) and the query heads that read them also carry a shared rank-1 component
(2 × 0.02 × √d × a bᵀ, unit a, b, b the same for the query head and its key head): heads the null
must flag, beside untrained ones.

Each (shape, kind) is scored by ``python -m rmtbase score MODEL --no-figures`` in fresh
subprocesses: **cold** (``RMTBASE_CACHE`` a new empty folder), then **warm** (the same command on
what the cold run cached). Printed per run: CPU seconds (user + system of the child), wall
seconds, the child's peak RSS, the null draws it generated (summed from its "generating the null
table" lines on stderr; its growth plan lines are printed too), the cache's
null-table files and bytes after it, and the decisions (heads flagged, ``head_open_decisions``,
heads undecided under the growth budget and at which draws, ``joint_null_draws``, the budget
and its estimated spending); then cold / warm in CPU and whether the flags agree. On a shared
machine compare ratios within one run only.

``--calibrate``: print the process CPU per draw of ``null_draws`` (after compilation), all
statistics at (640, 64), (1024, 64), (2048, 128), (640, 256), float32 and bfloat16, and spectral
at d_h 64, 128, 256 — what :mod:`rmtbase.baseline.draw_cost` is fitted to — beside the model.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"

#: name: (d, d_h, layers, query heads, key heads)
SHAPES = {"llama3-8b": (4096, 128, 32, 32, 8), "qwen2-7b": (3584, 128, 28, 28, 4),
          "d5120": (5120, 128, 40, 40, 8), "small": (640, 64, 8, 10, 2)}

_CHILD = r"""
import atexit, resource, runpy, sys
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)))
sys.argv = ["rmtbase", *sys.argv[1:]]
runpy.run_module("rmtbase", run_name="__main__")
"""

_READ = r"""
import json, sys, xarray as xr
with xr.open_dataset(sys.argv[1]) as ds:
    flags = ds["head_flag"].values.astype(int).ravel().tolist()
    print(json.dumps({"flags": flags, "heads": len(flags),
                      "open": int(ds.attrs.get("head_open_decisions", 0)),
                      "undecided": int(ds.attrs.get("undecided_heads", 0)),
                      "undecided_at": str(ds.attrs.get("undecided_draws", "")),
                      "budget": str(ds.attrs.get("growth_budget", "")),
                      "spent": str(ds.attrs.get("growth_budget_spent", "")),
                      "joint_draws": int(ds.attrs.get("joint_null_draws", -1)),
                      "spectral_draws": int(ds.attrs.get("spectral_null_draws", -1))}))
"""

_DRAWS = re.compile(r"generating the null table .*?, (?:draws (\d+) to (\d+)|(\d+) draws)")


def build(folder: Path, shape: str, planted: bool) -> Path:
    """The folder of the module docstring (built once)."""
    sys.path.insert(0, str(SRC))
    import numpy as np
    import torch
    from safetensors.torch import save_file

    if (folder / "model.safetensors").is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    d, d_h, layers, n_q, n_kv = SHAPES[shape]
    cfg = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": d,
           "num_attention_heads": n_q, "num_key_value_heads": n_kv, "head_dim": d_h,
           "num_hidden_layers": layers, "intermediate_size": 4 * d, "vocab_size": 32000,
           "torch_dtype": "bfloat16"}
    (folder / "config.json").write_text(json.dumps(cfg, indent=1))
    rng = np.random.default_rng(0)
    tensors = {}
    group = n_q // n_kv
    for i in range(layers):
        q = 0.02 * rng.standard_normal((n_q * d_h, d), dtype=np.float32)
        k = 0.02 * rng.standard_normal((n_kv * d_h, d), dtype=np.float32)
        if planted:
            for kv in range(max(1, n_kv // 4)):
                b = rng.standard_normal(d).astype(np.float32)
                b /= np.linalg.norm(b)
                s = 2 * 0.02 * np.sqrt(d)
                a = rng.standard_normal(d_h).astype(np.float32)
                k[kv * d_h:(kv + 1) * d_h] += s * np.outer(a / np.linalg.norm(a), b)
                for h in range(kv * group, (kv + 1) * group):
                    a = rng.standard_normal(d_h).astype(np.float32)
                    q[h * d_h:(h + 1) * d_h] += s * np.outer(a / np.linalg.norm(a), b)
        for name, w in (("q_proj", q), ("k_proj", k)):
            tensors[f"model.layers.{i}.self_attn.{name}.weight"] = \
                torch.from_numpy(w).to(torch.bfloat16)
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


def cache_files(cache: Path) -> tuple[int, int]:
    """(null-table files, their bytes) in ``cache``."""
    files = [p for p in cache.glob("lowrank-*.nc") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def score(model: Path, cache: Path, out: Path, src: Path) -> dict:
    """``rmtbase score MODEL --out OUT`` in a subprocess on ``cache`` with ``src``'s code."""
    import resource

    env = dict(os.environ, PYTHONPATH=str(src), RMTBASE_CACHE=str(cache),
               OPENBLAS_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    rss = out.with_suffix(".rss")
    out.parent.mkdir(parents=True, exist_ok=True)
    args = ["-c", _CHILD, str(rss), "score", str(model), "--no-figures", "--out",
            str(out)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode:
        raise SystemExit(f"rmtbase score failed ({p.returncode}):\n{p.stderr[-3000:]}")
    grown = sum(int(m[1]) - int(m[0]) if m[1] else int(m[2]) for m in _DRAWS.findall(p.stderr))
    plans = [ln for ln in p.stderr.splitlines() if "rmtbase: growing the" in ln]
    r = subprocess.run([sys.executable, "-c", _READ, str(out / "scores.nc")], env=env,
                       capture_output=True, text=True, check=True)
    n_files, n_bytes = cache_files(cache)
    return dict(json.loads(r.stdout), wall=wall, grown=grown, plans=plans, files=n_files,
                bytes=n_bytes, rss=int(rss.read_text()) / 1024,
                cpu=(after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))


def _line(what: str, r: dict) -> str:
    return (f"{what}: {r['cpu']:.1f} CPU-s, {r['wall']:.1f} s wall, peak RSS {r['rss']:.0f} "
            f"MiB; {r['grown']:,} null draws generated; cache {r['files']} table files, "
            f"{r['bytes'] / 2**20:.1f} MiB; {sum(r['flags'])}/{r['heads']} heads flagged, "
            f"{r['open']} open decisions, {r['undecided']} undecided"
            f"{' at ' + r['undecided_at'] if r['undecided'] else ''}, joint null draws "
            f"{r['joint_draws']:,}, spectral {r['spectral_draws']:,}; growth budget "
            f"{r['budget']} CPU-s, {r['spent']} spent (estimated)")


def pair(shape: str, kind: str, model: Path, tmp: Path, src: Path) -> float:
    """Cold then warm on a new cache; prints both and the ratio; returns it."""
    cache = Path(tempfile.mkdtemp(prefix=f"cache-{shape}-{kind}-", dir=tmp))
    cold = score(model, cache, tmp / f"{shape}-{kind}-cold", src)
    for ln in cold["plans"]:
        print(f"  {ln}")
    print(_line(f"{shape} {kind} cold", cold), flush=True)
    warm = score(model, cache, tmp / f"{shape}-{kind}-warm", src)
    print(_line(f"{shape} {kind} warm", warm), flush=True)
    ratio = cold["cpu"] / warm["cpu"]
    print(f"{shape} {kind}: cold / warm {ratio:.2f}x CPU (target <= 3x: "
          f"{'met' if ratio <= 3 else 'NOT met'}); same flags cold and warm: "
          f"{cold['flags'] == warm['flags']}", flush=True)
    return ratio


def calibrate() -> None:
    """The per-draw CPU of :mod:`rmtbase.baseline.draw_cost`, measured, beside its model."""
    sys.path.insert(0, str(SRC))
    import jax

    from rmtbase.baseline.draw_cost import seconds_per_draw
    from rmtbase.baseline.null import null_draws

    cases = [(640, 64, "all", "bfloat16", 100), (1024, 64, "all", "float32", 100),
             (1024, 64, "all", "bfloat16", 100), (2048, 128, "all", "float32", 40),
             (2048, 128, "all", "bfloat16", 40), (640, 256, "all", "bfloat16", 20),
             (640, 64, "spectral", "float32", 2000), (2048, 128, "spectral", "float32", 2000),
             (640, 256, "spectral", "float32", 500)]
    for d, d_h, stats, storage, n in cases:
        key = jax.random.key(0)
        null_draws(key, d, d_h, n, stats=stats, storage=storage)  # compiled here
        t = time.process_time()
        null_draws(jax.random.fold_in(key, 1), d, d_h, n, stats=stats, storage=storage)
        got = (time.process_time() - t) / n
        print(f"({d}, {d_h}) {stats} {storage}: {got * 1e3:.3f} CPU-ms/draw measured, "
              f"{seconds_per_draw(d, d_h, stats) * 1e3:.3f} modelled", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="llama3-8b,qwen2-7b,d5120")
    ap.add_argument("--kinds", default="untrained,planted")
    ap.add_argument("--small", action="store_true", help="the (640, 64) shape only")
    ap.add_argument("--keep", type=Path, help="where to build (and keep) the folders")
    ap.add_argument("--calibrate", action="store_true", help="the per-draw cost model's check")
    a = ap.parse_args()
    if a.calibrate:
        calibrate()
        return
    shapes = ["small"] if a.small else a.shapes.split(",")
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        for shape in shapes:
            for kind in a.kinds.split(","):
                model = build((a.keep or tmp) / f"{shape}-{kind}", shape, kind == "planted")
                pair(shape, kind, model, tmp, SRC.resolve())


if __name__ == "__main__":
    main()
