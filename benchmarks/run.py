"""The maintained benchmarks, by name: each backs the numbers of one section of
docs/performance.md and runs as its own script under benchmarks/.

    python benchmarks/run.py --list            # the names, what each measures, its section
    python benchmarks/run.py --quick           # every benchmark that has a quick run, in turn
    python benchmarks/run.py NAME [ARGS ...]   # one benchmark, its own options after the name

A benchmark runs in a fresh process (``python benchmarks/<script>.py ARGS``), so one's imports
and compilation never time another's; ``--quick`` runs the smoke version of those that have one
(a plumbing check in minutes on 2 CPU cores, not a figure to quote). Figures are compared only
within one run on one machine (docs/performance.md, its first paragraph)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

HERE = Path(__file__).resolve().parent


class Benchmark(NamedTuple):
    """One named benchmark: its script (benchmarks/<script>.py), the docs/performance.md section
    whose numbers it backs, what it measures, and its quick run's arguments (None: none)."""

    script: str
    section: str
    measures: str
    quick: tuple | None = None


#: The maintained benchmarks, in the order of docs/performance.md.
BENCHMARKS = {
    "null_draws": Benchmark(
        "null_draws", "Null draws",
        "spectral and element-wise null draws/s against naive NumPy and the machine's floor",
        ("--quick", "--big-draws", "0", "--shapes", "768x64")),
    "scoring": Benchmark(
        "scoring", "Scoring",
        "LLaMA-3-8B- and 70B-shaped folders and the permutation null, each in a fresh process"),
    "new_shape": Benchmark(
        "new_shape", "A new shape's first score",
        "a new shape's cold score against its warm one; the 8B all/spectral ratio per layer"),
    "first_contact": Benchmark(
        "first_contact", "A quantised file's first contact",
        "SmolLM2 Q4_1 GGUF and a Gemma-shaped Q5_0 folder, cold against warm, in CPU seconds"),
    "gpu": Benchmark(
        "gpu", "GPU",
        "every GPU figure within a wall-clock budget, the most wanted first (JSON and table)",
        ("--smoke", "--budget-s", "120")),
    "composition": Benchmark(
        "composition", "GPU",
        "composition of a LLaMA-3-8B shape: CPU or device time, peak memory, FLOP floor",
        ("--layers", "2", "--full-layers", "2", "--d", "256", "--dh", "32", "--heads", "8",
         "--kv", "2")),
    "patching": Benchmark(
        "patching", "The circuit search",
        "the causal step's CPU beside the composition's, SmolLM2-135M Q4_1 GGUF; --commands: "
        "rmtbase circuits against score --composition --stats spectral, each cold; --memory: "
        "RSS before and after find_circuits (the C heap given back)"),
    "task_circuits": Benchmark(
        "task_circuits", "A task's circuit",
        "rmtbase circuits --task on SmolLM2's GGUF, 64 IOI prompts: CPU per stage, peak RSS; "
        "the faithfulness area and smallest 0.8 circuit beside EAP's and EAP-IG's rankings; "
        "--busy N: the command's process CPU beside N busy processes, OMP_NUM_THREADS=1 "
        "against the default environment (the thread policy)"),
    "task_zoo": Benchmark(
        "task_zoo", "A task's circuit",
        "a trained induction model (262 edges), two corruptions: rmtbase's ranking beside "
        "auto-circuit's EAP, EAP-IG and ACDC (--peers PYTHON), one evaluator on held-out "
        "prompts: curve area, smallest circuit >= 0.8, CPU and peak RSS of each; "
        "--behaviour bigram, tracr: the circuit zoo's markov3, auto-circuit's tracr programs"),
    "interrupt_moments": Benchmark(
        "interrupt_moments", "Interrupts",
        "Ctrl-C at random moments of rmtbase circuits: clean ends and SIGINT-to-exit",
        ("--tries", "2")),
    "big_shapes": Benchmark(
        "big_shapes", "Big shapes, cold and warm",
        "a cold score against its warm one at the 7-8B shapes, untrained and planted "
        "(--small: a shape that fits a 2-core machine)"),
    "composition_gemma_shape": Benchmark(
        "composition_gemma_shape", "A d_h = 256 model, cold",
        "a cold score --composition --probe of a Gemma-3-270M shape against SmolLM2's"),
    "heavy_tail": Benchmark(
        "heavy_tail", "Heavy-tail metrics beside WeightWatcher",
        "per-layer alpha of WeightWatcher 0.7.7 (its own venv) and rmtbase (MiniLM; --model "
        "smollm2, mpnet or PATH), CPU of analyze() beside rmtbase heavy-tail cold and warm in "
        "one run; --gaussian: alpha of random matrices; --trajectory: trained checkpoints"),
}


def _run(name: str, args) -> int:
    b = BENCHMARKS[name]
    print(f"== {name} ({b.section}): {' '.join(args)}", flush=True)
    return subprocess.call([sys.executable, str(HERE / f"{b.script}.py"), *args])


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in BENCHMARKS:
        return _run(argv[0], argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 epilog="names: " + ", ".join(BENCHMARKS))
    ap.add_argument("--list", action="store_true", help="list the benchmarks")
    ap.add_argument("--quick", action="store_true", help="run every quick run, in turn")
    args = ap.parse_args(argv)
    if args.list or not args.quick:
        for name, b in BENCHMARKS.items():
            quick = "quick" if b.quick is not None else "no quick run"
            print(f"{name:<24} {b.measures} [docs/performance.md: {b.section}; {quick}]")
        return 0
    failed = [n for n, b in BENCHMARKS.items() if b.quick is not None and _run(n, b.quick)]
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
