"""Wall time of ``rmtbase probe`` on the embedded MiniLM (the issue's target: ≤ 30 s on 2 cores).

    python benchmarks/probe.py [--repeat 3] [--threads N]

Runs, in this process: model and tokenizer load; the forward loop over the default text
(27 windows of 256 tokens, 6,701 text tokens) with the behaviour reduction; each ``--repeat``
times, and prints seconds per phase, the median, and torch's thread count. A fresh
``python -m rmtbase probe`` adds the imports of torch and transformers (a few seconds, printed
as ``import``). Not a timed test: the numbers depend on the machine and on what else runs.

Measured 2026-11-23 on the shared 2-core machine with other jobs running, float32 eager
attention. Windows one at a time (12:06 UTC, load average 10)::

    $ python benchmarks/probe.py
    import 7.3 s, load 5.8 s, torch threads 2, load average 10.2
    probe (load + 27 windows of 256, 6701 tokens): 61.9, 50.4, 60.5 s; median 60.5 s
    $ python benchmarks/probe.py --threads 1 --repeat 2
    probe (load + 27 windows of 256, 6701 tokens): 12.6, 12.3 s; median 12.4 s

Windows in batches of up to 8 (:data:`rmtbase.probe.run.MAX_BATCH`; 12:22 UTC, load average
5–6)::

    $ python benchmarks/probe.py
    import 4.9 s, load 5.9 s, torch threads 2, load average 5.6
    probe (load + 27 windows of 256, 6701 tokens): 13.5, 13.7, 11.9 s; median 13.5 s
    $ python benchmarks/probe.py --threads 1 --repeat 2
    import 5.1 s, load 6.5 s, torch threads 1, load average 5.0
    probe (load + 27 windows of 256, 6701 tokens): 6.3, 5.6 s; median 5.9 s

Two torch threads on two busy cores lose to one (spin-waiting threads); on a shared machine
``OMP_NUM_THREADS=1`` is the faster setting.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    args = ap.parse_args()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    t0 = time.perf_counter()
    import torch
    import transformers  # noqa: F401

    from rmtbase.models import default_model_path
    from rmtbase.probe import probe_model
    from rmtbase.probe.run import load
    t_import = time.perf_counter() - t0
    if args.threads:
        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    load(default_model_path())
    t_load = time.perf_counter() - t0
    runs = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        ds = probe_model(default_model_path(), progress=False)
        runs.append(time.perf_counter() - t0)
    print(f"import {t_import:.1f} s, load {t_load:.1f} s, torch threads "
          f"{torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f}")
    print(f"probe (load + {ds.attrs['n_windows']} windows of {ds.attrs['window']}, "
          f"{ds.attrs['n_tokens']} tokens): " + ", ".join(f"{t:.1f}" for t in runs)
          + f" s; median {statistics.median(runs):.1f} s")


if __name__ == "__main__":
    main()
