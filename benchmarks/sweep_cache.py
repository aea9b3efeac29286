"""``rmtbase sweep --into-cache`` then ``score``: the score of a new shape made warm by a sweep,
against the same score drawing its own null, measured in one run (issue 34 step 4; nothing
downloaded).

    python benchmarks/sweep_cache.py [--d 256] [--heads 4] [--layers 4] [--workers 2]
                                     [--storage float32] [--stats all]

A random GPT-2 of width d with ``--heads`` heads (d_h = d / heads) is saved, then scored by
``python -m rmtbase score --no-figures`` in fresh subprocesses:

- **cold**: ``RMTBASE_CACHE`` a new empty folder (every null table and the profile null drawn);
- **sweep**: ``rmtbase sweep --d D --dh DH --into-cache --workers W`` into another empty folder;
- **warm**: the same score on the folder the sweep filled.

Wall and CPU seconds of each (CPU from ``getrusage`` of the children: the sweep's loopback
workers included), the ratio warm / cold, the "generating the null table" lines each score
printed (the warm one must print none), and whether the two scores' ``scores.nc`` hold the
same values. OPENBLAS_NUM_THREADS=1; the load average is printed (the machines this runs on
are shared: compare within one run only).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402


def _run(cmd, cache: Path) -> tuple[float, float, str]:
    """(wall s, CPU s of the children, stderr) of ``python -m rmtbase *cmd``."""
    env = dict(os.environ, RMTBASE_CACHE=str(cache), HF_HUB_OFFLINE="1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "rmtbase", *cmd], env=env, capture_output=True,
                       text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode:
        sys.exit(f"failed ({p.returncode}): rmtbase {' '.join(cmd)}\n{p.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, p.stderr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--storage", default="float32")
    ap.add_argument("--stats", default="all")
    a = ap.parse_args()
    import numpy as np
    import torch
    import transformers as tf
    import xarray as xr

    d_h = a.d // a.heads
    root = Path(tempfile.mkdtemp(prefix="rmtbase-sweep-cache-"))
    torch.manual_seed(0)
    cfg = tf.GPT2Config(n_embd=a.d, n_head=a.heads, n_layer=a.layers, vocab_size=50,
                        n_positions=32, bos_token_id=0, eos_token_id=0)
    model = tf.GPT2LMHeadModel(cfg)
    if a.storage in ("bfloat16", "float16"):
        model = model.to(getattr(torch, a.storage))
    model.save_pretrained(root / "model")
    score = ["score", str(root / "model"), "--stats", a.stats, "--no-figures"]
    print(f"shape d={a.d} d_h={d_h}, {a.layers} layers x {a.heads} heads, {a.storage}, "
          f"stats {a.stats}; load average {os.getloadavg()[0]:.1f}", flush=True)
    rows = {}
    rows["cold"] = _run([*score, "--out", str(root / "cold")], root / "cache-cold")
    rows["sweep"] = _run(["sweep", "--d", str(a.d), "--dh", str(d_h), "--storage", a.storage,
                          "--stats", a.stats, "--into-cache", "--workers", str(a.workers),
                          "--no-progress"], root / "cache-warm")
    rows["warm"] = _run([*score, "--out", str(root / "warm")], root / "cache-warm")
    for k, (wall, cpu, err) in rows.items():
        gen = err.count("generating the null table")
        print(f"{k:6s} wall {wall:7.1f} s  CPU {cpu:7.1f} s  null tables generated: {gen}")
    print(f"warm / cold: wall {rows['warm'][0] / rows['cold'][0]:.2f}, "
          f"CPU {rows['warm'][1] / rows['cold'][1]:.2f}; load average {os.getloadavg()[0]:.1f}")
    with xr.open_dataset(root / "cold" / "scores.nc") as c, \
            xr.open_dataset(root / "warm" / "scores.nc") as w:
        same = all(np.array_equal(c[v].values, w[v].values, equal_nan=True)
                   for v in ("value", "p_value", "head_p_value", "head_flag"))
    print(f"same values (value, p_value, head_p_value, head_flag): {same}")


if __name__ == "__main__":
    main()
