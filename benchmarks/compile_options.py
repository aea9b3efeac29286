"""XLA CPU compiler options, program by program: compile CPU, run time, output bytes (issue 59).

    RMTBASE_CACHE=$(mktemp -d) python benchmarks/compile_options.py capture DIR score MODEL \
        --no-figures --quiet --out OUT
    python benchmarks/compile_options.py replay DIR 5,1,23 base,nofe,O1 [--reps 2] [--runs 5]
    python benchmarks/compile_options.py bits DIR 5 nofe [--trials 8]

``capture`` runs ``rmtbase ARGS…`` in this process into an empty DIR (a cold ``RMTBASE_CACHE`` compiles
everything) and writes, for the n-th XLA compilation, ``DIR/NN.mlir`` (the StableHLO module),
``DIR/NN.opts`` (its serialised ``CompileOptions``) and ``DIR/NN.args`` (the inputs of its first
call, pickled numpy), and prints one line per program: compile CPU and wall, calls, and the
CPU its calls took (every call blocks, and JAX's C++ dispatch is turned off so each is seen;
the score runs slower than usual). ``replay`` recompiles programs NN under each named option
set of :data:`VARIANTS`, alternating the order per repetition, and prints per set the mean
compile CPU (user + system of this process during the compile: XLA's LLVM threads included),
the fastest of ``runs`` calls on the captured inputs, and whether every output's bytes equal
``base``'s. ``bits`` runs base and a variant on ``trials`` perturbed copies of the inputs
(random keys; factors shuffled or with noise added) and counts the trials whose bytes differ.
Uses private functions of jax 0.10 (``jax._src.compiler.backend_compile_and_load``,
``pxla.ExecuteReplicated``, ``pjit._get_fastpath_data``); it stops if the first is gone.
Measured with it: see ``rmtbase._compiled.FEW_CALLS`` and docs/performance.md.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import atexit  # noqa: E402
import hashlib  # noqa: E402
import pickle  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

#: Option sets by name (``_name``: a field of ``ExecutableBuildOptions``, else an XLA debug
#: option passed as ``compiler_options`` are).
VARIANTS = {
    "base": {},
    "nofe": {"xla_cpu_use_fusion_emitters": False},
    "O1": {"xla_backend_optimization_level": 1},
    "O2": {"xla_backend_optimization_level": 2},
    "nofeO1": {"xla_cpu_use_fusion_emitters": False, "xla_backend_optimization_level": 1},
    "nox": {"xla_llvm_disable_expensive_passes": True},
    "split1": {"xla_cpu_parallel_codegen_split_count": 1},
    "split4": {"xla_cpu_parallel_codegen_split_count": 4},
    "inl": {"xla_llvm_force_inline_before_split": False},
    "noreg": {"xla_cpu_copy_insertion_use_region_analysis": False},
    "conc": {"xla_cpu_enable_concurrency_optimized_scheduler": False},
    "xnn": {"xla_cpu_use_xnnpack": False},
    "v128": {"xla_cpu_prefer_vector_width": 128},
    "v512": {"xla_cpu_prefer_vector_width": 512},
    "avx2": {"xla_cpu_max_isa": "AVX2"},
    "noalias": {"xla_llvm_enable_noalias_metadata": False},
    "effort": {"_exec_time_optimization_effort": -1.0},
    "level0": {"_optimization_level": 9},
}


def _cpu() -> float:
    return sum(os.times()[:2])


def capture(out: str, argv: list[str]) -> int:
    import jax._src.compiler as compiler
    import jax._src.interpreters.pxla as pxla
    import jax._src.pjit as pjit

    original = getattr(compiler, "backend_compile_and_load", None)
    if original is None:
        raise SystemExit("jax._src.compiler.backend_compile_and_load is gone: update this")
    os.makedirs(out, exist_ok=True)
    if any(name.endswith(".mlir") for name in os.listdir(out)):
        raise SystemExit(f"{out} holds an earlier capture: give an empty folder")
    rows, programs, calls = {}, {}, {}

    def compile_(backend, module, devices, options, host_callbacks):
        n = len(rows) + 1
        with open(f"{out}/{n:02d}.mlir", "w") as f:
            f.write(module.operation.get_asm(enable_debug_info=False))
        with open(f"{out}/{n:02d}.opts", "wb") as f:
            f.write(options.SerializeAsString())
        cpu, wall = _cpu(), time.perf_counter()
        exe = original(backend, module, devices, options, host_callbacks)
        name = str(module.operation.attributes["sym_name"]).strip('"')
        rows[n] = (name, _cpu() - cpu, time.perf_counter() - wall)
        programs[id(exe)] = n
        return exe

    call = pxla.ExecuteReplicated.__call__

    def execute(self, *args):
        import jax

        n = programs.get(id(self.xla_executable))
        if n is not None and not os.path.exists(f"{out}/{n:02d}.args"):
            bufs = self.in_handler([x for i, x in enumerate(args) if i in self.kept_var_idx])
            with open(f"{out}/{n:02d}.args", "wb") as f:
                pickle.dump([np.asarray(b) for b in bufs], f)
        cpu = _cpu()
        result = jax.block_until_ready(call(self, *args))
        k, c = calls.get(n, (0, 0.0))
        calls[n] = (k + 1, c + _cpu() - cpu)
        return result

    def report():
        for n, (name, cpu, wall) in sorted(rows.items(), key=lambda r: -r[1][1]):
            k, c = calls.get(n, (0, 0.0))
            sys.stderr.write(f"#{n:<3d} {name:28s} compile {cpu:6.2f} CPU-s {wall:6.2f} s wall;"
                             f" {k} calls, {c:6.2f} CPU-s\n")

    compiler.backend_compile_and_load = compile_
    pxla.ExecuteReplicated.__call__ = execute
    pjit._get_fastpath_data = lambda *a, **k: None  # every call through execute()
    atexit.register(report)
    sys.argv = ["rmtbase", *argv]
    from rmtbase._entry import main

    return main()


def _setup():
    import jax
    import jax.numpy as jnp
    from jax._src.lax import linalg

    m = jnp.eye(4) + 0.1  # registers the LAPACK kernels the programs call
    jax.block_until_ready((jnp.linalg.qr(m), jnp.linalg.svd(m), jnp.linalg.eigh(m),
                           linalg.tridiagonal(m)[0]))


def _load(folder: str, n: int):
    with open(f"{folder}/{n:02d}.args", "rb") as f:
        args = pickle.load(f)
    with open(f"{folder}/{n:02d}.mlir") as f, open(f"{folder}/{n:02d}.opts", "rb") as g:
        return f.read(), g.read(), args


def _compile(asm: str, options: bytes, variant: dict):
    import jax
    from jax._src.interpreters import mlir
    from jax._src.lib import xla_client as xc
    from jax._src.lib.mlir import ir

    opts = xc.CompileOptions.ParseFromString(options)
    env = dict(opts.env_option_overrides)
    env.update({k: v for k, v in variant.items() if not k.startswith("_")})
    opts.env_option_overrides = list(env.items())
    for k, v in variant.items():
        if k.startswith("_"):
            setattr(opts.executable_build_options, k[1:], v)
    with mlir.make_ir_context():
        module = ir.Module.parse(asm)
        cpu, wall = _cpu(), time.perf_counter()
        exe = jax.devices()[0].client.compile_and_load(
            module, executable_devices=xc.DeviceList(tuple(jax.devices()[:1])),
            compile_options=opts)
        return exe, _cpu() - cpu, time.perf_counter() - wall


def _run(exe, args):
    import jax

    return [np.asarray(r) for r in exe.execute([jax.device_put(a) for a in args])]


def _digest(outs) -> str:
    return hashlib.sha256(b"".join(o.tobytes() for o in outs)).hexdigest()[:12]


def replay(folder: str, ns: list[int], names: list[str], reps: int, runs: int) -> None:
    import jax

    _setup()
    for n in ns:
        asm, options, args = _load(folder, n)
        res = {v: [] for v in names}
        digests = {v: set() for v in names}
        for rep in range(reps):
            for v in names if rep % 2 == 0 else names[::-1]:
                exe, cpu, _ = _compile(asm, options, VARIANTS[v])
                digests[v].add(_digest(_run(exe, args)))
                bufs = [jax.device_put(a) for a in args]
                best = np.inf
                for _ in range(runs):
                    t = time.perf_counter()
                    jax.block_until_ready(exe.execute(bufs))
                    best = min(best, time.perf_counter() - t)
                res[v].append((cpu, best))
        for v in names:
            r = np.array(res[v])
            print(f"#{n:<3d} {v:8s} compile {r[:, 0].mean():6.2f} CPU-s (min {r[:, 0].min():.2f})"
                  f"  run {r[:, 1].min() * 1e3:9.2f} ms  same bytes as {names[0]}: "
                  f"{digests[v] == digests[names[0]]}", flush=True)


def bits(folder: str, n: int, variant: str, trials: int, seed: int = 1) -> None:
    _setup()
    asm, options, args = _load(folder, n)
    base = _compile(asm, options, {})[0]
    other = _compile(asm, options, VARIANTS[variant])[0]
    rng = np.random.default_rng(seed)

    def perturb(a, t):
        if t == 0:
            return a
        if a.dtype == np.uint32:  # keys
            return rng.integers(0, 2**32, a.shape, dtype=np.uint64).astype(np.uint32)
        if a.dtype == np.float32 and a.ndim >= 2:
            flat = a.reshape(a.shape[0], -1).copy()
            if t % 2:
                for row in flat:
                    rng.shuffle(row)
                return flat.reshape(a.shape)
            noise = rng.standard_normal(a.shape).astype(np.float32) * np.float32(a.std())
            return (a + noise * np.float32(rng.uniform(0.01, 2))).astype(np.float32)
        if a.dtype == np.float32:
            return (a * np.float32(rng.uniform(0.5, 2))).astype(np.float32)
        return a

    differ = 0
    for t in range(trials):
        x = [perturb(a, t) for a in args]
        differ += _digest(_run(base, x)) != _digest(_run(other, x))
    print(f"#{n} {variant}: {differ}/{trials} trials differ from base")


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "capture":
        return capture(sys.argv[2], sys.argv[3:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["replay", "bits"])
    ap.add_argument("dir")
    ap.add_argument("programs", help="NN[,NN...] (bits: one)")
    ap.add_argument("variants", help="names in VARIANTS, comma-separated (bits: one)")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--trials", type=int, default=8)
    a = ap.parse_args()
    ns = [int(x) for x in a.programs.split(",")]
    if a.what == "replay":
        replay(a.dir, ns, a.variants.split(","), a.reps, a.runs)
    else:
        bits(a.dir, ns[0], a.variants, a.trials)
    return 0


if __name__ == "__main__":
    sys.exit(main())
