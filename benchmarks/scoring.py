"""Scoring benchmarks of the two verdict issues, measured in one run (nothing downloaded).

    python benchmarks/scoring.py [--which llama8b,perm,llama70b] [--layers 32] [--keep DIR]

- ``llama8b``: a LLaMA-3-8B-shaped checkpoint folder (d = 4096, 32 layers, 32 query heads of
  128 on 8 key heads) holding only the q_proj/k_proj tensors, random N(0, 0.02²) stored as
  bfloat16 in 4 safetensors shards with an index (1.3 GB, built in a temporary folder, or
  ``--keep DIR`` to reuse). It is scored in a fresh subprocess with all statistics and with
  ``--stats spectral`` (the `rmtbase score` path without figures): wall seconds and peak RSS
  (VmHWM). The null tables of (4096, 128) — spectral float32 and all-statistics bfloat16 — are
  shipped, so nothing is generated. Before the precision-matched null this took 4 min 17 s
  at 2.1 GB (22 s and 1.5 GB spectral) on the 2-core machine; with it, 177 s at 2.4 GB
  (2026-11-22) until the two-pass element statistics, L2-sized in-graph tiles and
  positioned safetensors reads: 105 s at 1.25 GB on that machine, 259 s at 1.35 GB on a
  slower one where the 2026-11-22 code took 458 s (2026-11-23; docs/performance.md
  has the A/B table).
- ``llama70b`` (not run by default): a LLaMA-3-70B-shaped folder (d = 8192, 80 layers, 64
  query heads of 128 on 8 key heads, bf16, 27 shards of 3 layers, q_proj/k_proj only: 11.5 GB,
  built in a temporary folder or ``--keep70 DIR``) scored with ``--stats spectral`` over all
  80 layers, and with all statistics over its first 1 and 3 layers (``--layers70-all``;
  views of the same shards) with ``draws=20``: no (8192, 128) table is shipped and 2,000 all-statistics draws
  there would take most of an hour on two cores. s/layer of the all-statistics run is the
  difference of the two runs over the difference of their layers (fixed costs cancel).
- ``perm``: the permutation null of a GPT-2-small-shaped random model (12 layers × 12 heads,
  d = 768) with 1,000 spectral permutations per head (144,000 permuted heads), spectral
  statistics only, and the same with the product's element statistics on 200 permutations.

OPENBLAS_NUM_THREADS=1 as in the other benchmarks.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

_CASE = r"""
import json, sys, time
def peak_mb():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmHWM")) / 1024
from rmtbase.scoring.score import score_model
args = json.loads(sys.argv[1])
model = args.pop("model")
if model == "gpt2":
    import torch, transformers
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config()).eval()
t = time.perf_counter()
ds = score_model(model, progress=False, spectrum_draws=0, **args)
dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "peak_mb": peak_mb(), "flagged": int(ds["head_flag"].sum()),
                  "heads": int(ds["head_flag"].size)}))
"""


#: (d, query heads, key heads, d_h, intermediate size, shards) of the LLaMA-3 shapes built here.
LLAMA_SHAPES = {"8b": (4096, 32, 8, 128, 14336, 4), "70b": (8192, 64, 8, 128, 28672, 30)}


def build_llama8b(folder: Path, layers: int = 32, shape: str = "8b") -> Path:
    """Config + bf16 safetensors shards of random q/k projections (LLaMA-3-8B shapes, or
    LLaMA-3-70B's with ``shape="70b"``: d = 8192, 64 query heads on 8 key heads, at most 30
    shards as the real checkpoint: 27 of 3 layers).
    Only q_proj/k_proj are written: the loader reads nothing else (tests/test_models_minilm's
    test_loading_reads_only_query_and_key_tensors), so the FFNs and embeddings that make a real
    checkpoint ~16 or ~140 GB would only take disk."""
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    if (folder / "model.safetensors.index.json").is_file():
        return folder
    d, n_heads, n_kv, d_h, ffn, shards = LLAMA_SHAPES[shape]
    cfg = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": d,
           "num_attention_heads": n_heads, "num_key_value_heads": n_kv, "head_dim": d_h,
           "num_hidden_layers": layers, "intermediate_size": ffn, "vocab_size": 128256,
           "rope_theta": 500000.0, "torch_dtype": "bfloat16"}
    (folder / "config.json").write_text(json.dumps(cfg, indent=1))
    gen = torch.Generator().manual_seed(0)
    weight_map, per = {}, -(-layers // shards)
    shards = -(-layers // per)
    for s in range(shards):
        tensors = {}
        for i in range(s * per, min(layers, (s + 1) * per)):
            for name, rows in (("q_proj", n_heads * d_h), ("k_proj", n_kv * d_h)):
                key = f"model.layers.{i}.self_attn.{name}.weight"
                tensors[key] = (0.02 * torch.randn(rows, d, generator=gen)).to(torch.bfloat16)
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        save_file(tensors, str(folder / fname), metadata={"format": "pt"})
        weight_map.update({k: fname for k in tensors})
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": weight_map}, indent=1))
    return folder


def first_layers(folder: Path, layers: int, dest: Path) -> Path:
    """A view of ``folder`` holding its first ``layers`` layers: config and index rewritten,
    shards symlinked (nothing copied)."""
    dest.mkdir(parents=True, exist_ok=True)
    cfg = json.loads((folder / "config.json").read_text())
    (dest / "config.json").write_text(json.dumps(dict(cfg, num_hidden_layers=layers), indent=1))
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    keep = {k: v for k, v in index["weight_map"].items() if int(k.split(".")[2]) < layers}
    for fname in set(keep.values()):
        if not (dest / fname).exists():
            (dest / fname).symlink_to(folder / fname)
    (dest / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": keep}, indent=1))
    return dest


def run_case(args: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", _CASE, json.dumps(args)], capture_output=True,
                         text=True, env=dict(os.environ))
    if out.returncode:
        raise RuntimeError(out.stderr.strip().splitlines()[-1])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--which", default="llama8b,perm")
    ap.add_argument("--layers", type=int, default=32, help="layers of the LLaMA-8B folder")
    ap.add_argument("--keep", type=Path, default=None, help="build/reuse the folder here")
    ap.add_argument("--keep70", type=Path, default=None,
                    help="build/reuse the 80-layer LLaMA-70B folder here (11.5 GB)")
    ap.add_argument("--layers70-all", default="1,3",
                    help="layer counts of the two all-statistics runs of llama70b")
    args = ap.parse_args(argv)
    which = set(args.which.split(","))
    print(f"# rmtbase scoring benchmark {time.strftime('%Y-%m-%d %H:%M')}, cpus {os.cpu_count()}")
    if "llama8b" in which:
        with tempfile.TemporaryDirectory() as tmp:
            folder = build_llama8b(args.keep or Path(tmp) / "llama8b", args.layers)
            for stats in ("all", "spectral"):
                r = run_case({"model": str(folder), "stats": stats})
                print(f"LLaMA-3-8B-shaped bf16 ({args.layers} layers, {r['heads']} heads), "
                      f"--stats {stats}: {r['seconds']:.1f} s, peak RSS {r['peak_mb']:.0f} MB, "
                      f"{r['flagged']} heads flagged")
    if "llama70b" in which:
        with tempfile.TemporaryDirectory(dir=args.keep70 and args.keep70.parent) as tmp:
            folder = build_llama8b(args.keep70 or Path(tmp) / "llama70b", 80, shape="70b")
            # nothing of (8192, 128) is shipped: a tiny all-statistics table (draws=20) keeps
            # its generation (~1 s a draw here) out of the run; the first run makes the
            # tables and compiled programs that the timed runs then find in the cache
            small, big = (int(x) for x in args.layers70_all.split(","))
            cases = [("spectral", folder, 80, {}),
                     *[("all", first_layers(folder, n, Path(tmp) / f"first{n}"), n,
                        {"draws": 20}) for n in (small, big)]]
            run_case({"model": str(cases[1][1]), "stats": "all", "draws": 20})
            got = {}
            for stats, path, n, extra in cases:
                r = got[(stats, n)] = run_case({"model": str(path), "stats": stats, **extra})
                print(f"LLaMA-3-70B-shaped bf16 ({n} layers, {r['heads']} heads), --stats "
                      f"{stats}: {r['seconds']:.1f} s ({r['seconds'] / n:.2f} s/layer), peak "
                      f"RSS {r['peak_mb']:.0f} MB, {r['flagged']} heads flagged", flush=True)
            per = (got[("all", big)]["seconds"] - got[("all", small)]["seconds"]) / (big - small)
            print(f"LLaMA-3-70B-shaped, --stats all: {per:.1f} s per further layer "
                  f"({big} against {small} layers); 80 layers ~{80 * per / 60:.0f} min")
    if "perm" in which:
        for stats, extra in (("spectral", {}), ("all", {"element_draws": 200})):
            r = run_case({"model": "gpt2", "null": "permutation", "draws": 1000, "stats": stats,
                          **extra})
            print(f"permutation null, GPT-2-small shape (144 heads x 1000 spectral "
                  f"permutations{', + 200 element' if extra else ''}), --stats {stats}: "
                  f"{r['seconds']:.1f} s, peak RSS {r['peak_mb']:.0f} MB, "
                  f"{r['flagged']} heads flagged")
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    raise SystemExit(main())
