"""The GPU table of issue 27 in one run (runs on any JAX backend; on the CPU it is a dry run).

    python benchmarks/gpu.py [--quick] [--skip-scoring] [--out FILE.md]

Prints the device, JAX and jaxlib versions, then a Markdown table to paste into docs/performance.md:

1. **Spectral null by eigen route** at (768, 64), (4096, 128), (8192, 128): draws/s through
   :func:`rmtbase.baseline.null.null_draws` (``stats="spectral"``, what ``rmtbase baseline
   --stats spectral`` runs, compilation excluded) with each route of
   :func:`rmtbase.stats.spectral.eigvals_from_bidiagonal`: ``svd`` (s(C)²), ``eigh``
   (tridiagonalisation + Sturm bisection) and ``eigvalsh`` (``jnp.linalg.eigvalsh`` of C Cᵀ: on
   a GPU cuSOLVER's batched Jacobi or ``syevd``), and the route
   :func:`rmtbase.baseline.null.eig_method` takes now on this backend (1,000,000 draws at
   d_h = 64, 200,000 at d_h = 128; 2,000 and 500 with ``--quick``). The chosen route's column
   is the spectral null's figure.
2. **All-statistics null** draws/s at (768, 64) and (4096, 128), float32 and bfloat16 storage.
3. **GPU = CPU**: the same keys drawn here and in a subprocess with ``JAX_PLATFORMS=cpu``
   (256 spectral draws and 16 all-statistics draws at (768, 64)): the largest difference of
   every statistic in units of its null standard deviation, and the largest relative
   difference. Threefry bits are the same on every backend; what may differ is float32
   rounding (normals, products, eigenvalues) and which eigen route runs.
4. Unless ``--skip-scoring``: ``benchmarks/scoring.py --which llama8b,perm`` (the
   LLaMA-3-8B-shaped bf16 folder with all statistics and with ``--stats spectral``, and the
   permutation null at GPT-2-small shape), whose lines are passed through.

Issue 27's targets on one H100: spectral ≥ 10⁶ draws/s at (768, 64); all-statistics bfloat16
at (4096, 128) ≥ 1,000 draws/s; the 8B folder with all statistics ≤ 30 s end to end.
OPENBLAS_NUM_THREADS=1 as in the other benchmarks.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

SHAPES = ((768, 64), (4096, 128), (8192, 128))
ALL_SHAPES = ((768, 64), (4096, 128))
ROUTES = ("svd", "eigh", "eigvalsh")

# run in a subprocess under JAX_PLATFORMS=cpu and here: the same keys on both backends
_DRAWS = r"""
import json, sys
import numpy as np, jax
from rmtbase.baseline.null import null_draws
a = json.loads(sys.argv[1])
out = {}
for stats, n in (("spectral", a["n_spectral"]), ("all", a["n_all"])):
    r = null_draws(jax.random.key(7), 768, 64, n, stats=stats)
    out.update({f"{stats}:{k}": np.asarray(v) for k, v in r.items()})
np.savez(a["path"], **out)
"""


def _route_draws_per_s(d, d_h, n, route):
    """Spectral null draws/s through :func:`rmtbase.baseline.null.null_draws` with its eigen
    route set to ``route`` (the null's own batching and chunking: a route timed on one batched
    call can rank otherwise; on this CPU the SVD of 256 cores in one call timed 0.87× the eigh
    route at (4096, 128), and the null itself 1.6× slower with the SVD)."""
    from rmtbase.baseline import null

    chosen = null.eig_method
    null.eig_method = lambda *args, **kw: route
    null._draw_fn.cache_clear()
    try:
        return _draws_per_s(d, d_h, n, "spectral")
    finally:
        null.eig_method = chosen
        null._draw_fn.cache_clear()


def _draws_per_s(d, d_h, n, stats, storage="float32"):
    import jax

    from rmtbase.baseline.null import null_draws

    null_draws(jax.random.key(1), d, d_h, min(n, 64), stats=stats, storage=storage)  # compile
    t = time.perf_counter()
    null_draws(jax.random.key(2), d, d_h, n, stats=stats, storage=storage)
    return n / (time.perf_counter() - t)


def _here_and_cpu(n_spectral, n_all):
    """{name: (here, cpu)} for the same keys on this backend and on the CPU (subprocess)."""
    import jax

    from rmtbase.baseline.null import null_draws

    here = {}
    for stats, n in (("spectral", n_spectral), ("all", n_all)):
        r = null_draws(jax.random.key(7), 768, 64, n, stats=stats)
        here.update({f"{stats}:{k}": np.asarray(v) for k, v in r.items()})
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "cpu.npz")
        env = dict(os.environ, JAX_PLATFORMS="cpu")
        subprocess.run([sys.executable, "-c", _DRAWS,
                        json.dumps({"n_spectral": n_spectral, "n_all": n_all, "path": path})],
                       env=env, check=True)
        with np.load(path) as cpu:
            return {k: (v, cpu[k]) for k, v in here.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small batches (a dry run on the CPU)")
    ap.add_argument("--skip-scoring", action="store_true", help="no benchmarks/scoring.py run")
    ap.add_argument("--out", type=Path, default=None, help="also write the table here")
    args = ap.parse_args(argv)
    import jax
    import jaxlib

    from rmtbase.baseline.null import eig_method

    q = args.quick
    backend = jax.default_backend()
    lines: list[str] = []

    def emit(*rows):
        lines.extend(rows)
        print("\n".join(rows), flush=True)

    emit(f"device: {jax.devices()[0].device_kind} ({backend}, {len(jax.devices())} device(s)); "
         f"jax {jax.__version__}, jaxlib {jaxlib.__version__}; "
         f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
         "", "| spectral null draws/s, float32 | " + " | ".join(ROUTES)
         + " | route chosen (eig_method) |", "|---|" + "---:|" * len(ROUTES) + "---|")
    for d, d_h in SHAPES:
        n = (2_000 if q else 1_000_000) if d_h <= 64 else (500 if q else 200_000)
        rates = [_route_draws_per_s(d, d_h, n, r) for r in ROUTES]
        emit(f"| ({d}, {d_h}) | " + " | ".join(f"{x:,.0f}" for x in rates)
             + f" | {eig_method(d, d_h)} |")
    emit("", "| all-statistics null | shape | storage | draws/s |", "|---|---|---|---:|")
    for d, d_h in ALL_SHAPES:
        for storage in ("float32", "bfloat16"):
            n = (32 if d <= 1024 else 4) if q else (20_000 if d <= 1024 else 4_000)
            emit(f"| all statistics | ({d}, {d_h}) | {storage} | "
                 f"{_draws_per_s(d, d_h, n, 'all', storage):,.1f} |")
    emit("", f"{backend} against cpu, same keys, (768, 64):", "",
         "| statistic | max abs Δ / null sd | max relative Δ |", "|---|---:|---:|")
    for name, (a, b) in sorted(_here_and_cpu(64 if q else 256, 8 if q else 16).items()):
        if a.ndim != 1:
            continue
        sd = float(np.std(b)) or 1.0
        diff = np.abs(a - b)
        rel = diff / np.maximum(np.abs(b), np.finfo(np.float32).tiny)
        emit(f"| {name} | {np.nanmax(diff) / sd:.2e} | {np.nanmax(rel):.2e} |")
    if not args.skip_scoring:
        here = Path(__file__).resolve().parent
        p = subprocess.run([sys.executable, str(here / "scoring.py"), "--which", "llama8b,perm"],
                           capture_output=True, text=True)
        if p.returncode:
            print(p.stderr[-2000:], file=sys.stderr)
        emit("", "benchmarks/scoring.py --which llama8b,perm:", "", "```", p.stdout.strip(), "```")
    if args.out:
        tmp = args.out.with_name(args.out.name + ".tmp")
        tmp.write_text("\n".join(lines) + "\n")
        tmp.replace(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
