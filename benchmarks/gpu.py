"""Every figure of the GPU tables in one run, the most wanted first, within a wall-clock budget
(default 480 s).

    python benchmarks/gpu.py [--json FILE] [--out FILE.md] [--budget-s 480] [--quick]
                             [--sections LIST] [--skip-scoring] [--skip-composition] [--smoke]
                             [--inline] [--commit SHA]

Sections, in this order, each in its own subprocess (its own process group) with a time limit:
its share of the budget (:data:`SHARE`) or what is left, whichever is less. A section that runs
out or crashes keeps the figures it printed (each is printed and flushed as it is measured);
its status says why it ended; the JSON is rewritten after every section, so a run killed
whole keeps every section before it.

1. ``scoring``: a LLaMA-3-8B-shaped bf16 folder (``benchmarks/scoring.py``'s builder: q/k only,
   1.3 GB) scored through :func:`rmtbase.scoring.score.score_model` in a fresh process per case:
   all statistics, ``stats="spectral"``, and spectral again with the next layer read serially
   (``*_serial``: what reading ahead, :mod:`rmtbase.scoring.heads.read_ahead`, buys). Per case: wall
   seconds (``score_8b_all_s``), host peak RSS (VmHWM, ``*_peak_rss_mb``) and the device's peak
   bytes (``*_device_peak_mb``, JAX's allocator; absent on the CPU). Needs ``netCDF4`` (the
   shipped tables); skipped, with the reason, without it.
2. ``composition``: ``benchmarks/composition.py --layers 32`` (the 8B shape, all 496 layer pairs)
   as a subprocess; ``composition_8b_s`` is its own wall time (factor generation left out).
3. ``circuits``: the circuit search's model passes in torch on its fastest device (CUDA where
   there is one): a SmolLM2-135M-shaped and an 8B-shaped random-weight LLaMA (d 4096, 32 heads
   on 8 KV heads of 128, :data:`CIRCUIT_LAYERS_8B` layers), float32, eager attention with the
   attention weights returned (the capture's forward), a batch of repeated-random-token
   sequences: ``circuits_<model>_forward_s`` and ``circuits_<model>_fwd_bwd_s`` (one forward +
   backward), medians of 3 after a warm-up, and the device's peak memory.
4. ``spectral``: the spectral null through :func:`rmtbase.baseline.null.null_draws` by eigen route
   at (768, 64) × 10⁶ and (4096, 128), (8192, 128) × 2·10⁵ draws (a 2 % probe cuts the count to
   the time share, ``*_n_draws``); ``spectral_*_factors_per_s`` (the random part alone) and
   ``spectral_*_moments_draws_per_s``: the random part plus the trace/power route of the
   statistics (:mod:`rmtbase.stats._moments_route`: no decomposition; no entropy).
   ``gpu_route_switch_suggested``: :func:`rmtbase.stats._gpu_routes.suggested_switch`.
5. ``all``: all-statistics null draws/s at (768, 64) and (4096, 128), float32 and bfloat16
   storage, at the default batch budget (:func:`rmtbase.baseline.limits.batch_budget`; the
   width as ``*_batch``) and with an 8 GiB one (``*_bf16_budget8g_*``).
6. ``kernels``: bare batched eigenvalues of Wishart matrices (n = 64, 128; ``eigvalsh``, the jnp
   and Pallas Jacobi routes, the moments route), each with its error against float64, and the
   entropy histogram's counts of a d × d matrix by one scatter, by per-block histograms (the
   accelerator's) and by sort (``hist_<d>_{scatter,blocked,sort}_per_s``: matrices/s).

JSON (``--json``): ``device``, ``backend``, ``jax``, ``jaxlib``, ``commit``, ``date``,
``budget_s``, ``smoke``, the figures (:data:`KEYS`: the headline keys), ``sections`` (status and
wall time of each) and ``skipped`` (key → reason).

``--smoke``: tiny shapes under the same keys (shapes in ``shapes``), a CPU check of the plumbing
(tests/test_gpu_benchmark.py); ``--inline`` runs the sections in this process (no
composition). ``$RMTBASE_BENCH_CRASH`` = a section's name makes that section's process kill
itself (SIGSEGV) after its first figure: the check that a crash loses nothing else.
OPENBLAS_NUM_THREADS=1 as in the other benchmarks.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

HERE = Path(__file__).resolve().parent
#: label → (d, d_h) and draws; under --smoke every label is measured at a tiny shape
SPECTRAL = {"768x64": ((768, 64), 1_000_000), "4096x128": ((4096, 128), 200_000),
            "8192x128": ((8192, 128), 200_000)}
ALL = {"768x64": ((768, 64), 5_000), "4096x128": ((4096, 128), 500)}
SMOKE = {"768x64": (96, 8), "4096x128": (96, 8), "8192x128": (96, 8)}  # one compile each
ROUTES = ("eigvalsh", "jacobi_pallas", "hestenes_pallas", "jacobi", "hestenes")
KERNEL_SIZES = (64, 128)
#: Pallas variants timed bare: (block, unroll, num_warps); the unrolled one last (longest compile)
VARIANTS = ((1, False, 4), (1, False, 8), (2, False, 4), (4, False, 8), (1, True, 4))
VARIANTS_ONE_SIDED = ((1, False, 4), (2, False, 4), (1, True, 4))
BIG_BUDGET = 8 * 2**30  # bytes: the memory_budget probe of the "all" section
SECTIONS = ("scoring", "composition", "circuits", "spectral", "all", "kernels")
#: share of the budget each section may take at most, or what is left (the shares add up to
#: a little more than the budget: the last section, the least wanted, takes what is left)
SHARE = {"scoring": 0.35, "composition": 0.2, "circuits": 0.1, "spectral": 0.15, "all": 0.15,
         "kernels": 0.1}
#: layers of the 8B-shaped model of the circuits section (its passes scale with them)
CIRCUIT_LAYERS_8B = 4
#: (hidden, heads, kv heads, d_h, intermediate, layers, vocab) of the circuits section's models
CIRCUIT_MODELS = {"smollm2": (576, 9, 3, 64, 1536, 30, 49152),
                  "8b": (4096, 32, 8, 128, 14336, CIRCUIT_LAYERS_8B, 128256)}
CIRCUIT_SMOKE = (64, 4, 2, 16, 128, 2, 256)
#: (sequences, tokens) of a pass: the search's default batch (16 × 101) on SmolLM2, 4 on 8B
CIRCUIT_BATCH = {"smollm2": (16, 101), "8b": (4, 101)}
#: entropy-histogram counts timed on one d × d matrix (kernels section)
HIST_D = (768, 4096)
KEYS = ("device", "jax", "commit", "spectral_768x64_draws_per_s",
        "spectral_768x64_eigvalsh_draws_per_s", "spectral_768x64_jacobi_pallas_draws_per_s",
        "spectral_4096x128_draws_per_s", "spectral_8192x128_draws_per_s",
        "eigvalsh_64x64_per_s", "eigvalsh_128x128_per_s", "jacobi_pallas_64x64_per_s",
        "hestenes_pallas_64x64_per_s", "spectral_768x64_hestenes_pallas_draws_per_s",
        "spectral_768x64_factors_per_s",
        "all_4096x128_float32_draws_per_s", "all_4096x128_bf16_draws_per_s",
        "all_768x64_float32_draws_per_s", "all_768x64_bf16_draws_per_s",
        "gpu_route_switch_suggested", "score_8b_all_s", "score_8b_spectral_s", "composition_8b_s",
        "score_8b_all_peak_rss_mb", "score_8b_all_device_peak_mb", "score_8b_spectral_serial_s",
        "circuits_smollm2_forward_s", "circuits_smollm2_fwd_bwd_s", "circuits_8b_forward_s",
        "circuits_8b_fwd_bwd_s", "spectral_768x64_moments_draws_per_s", "moments_64x64_per_s",
        "hist_4096_scatter_per_s", "hist_4096_blocked_per_s", "hist_4096_sort_per_s",
        "all_4096x128_bf16_batch")


_SECTION = {"name": None}


def emit(key, value):
    """One figure, as the line the parent collects (flushed: a killed section keeps it). Where
    ``$RMTBASE_BENCH_CRASH`` names the running section, its process dies by SIGSEGV right
    after the first figure (module docstring)."""
    print("RESULT " + json.dumps({key: value}), flush=True)
    name = _SECTION["name"]
    if name is not None and name in os.environ.get("RMTBASE_BENCH_CRASH", "").split(","):
        import signal

        os.kill(os.getpid(), signal.SIGSEGV)


def _median_rate(fn, inputs, count, repeats=5):
    """Items/s of ``fn`` over ``count`` items: warm-up, then the median of up to ``repeats``
    timed calls (fewer where one call takes over ~0.4 s) alternating between the input sets
    (so a cache does not hold the one input)."""
    import jax

    jax.block_until_ready(fn(inputs[0]))
    t = time.perf_counter()
    jax.block_until_ready(fn(inputs[1 % len(inputs)]))
    once = time.perf_counter() - t
    times = [once]
    for r in range(min(repeats, int(2.0 / max(once, 1e-9))) - 1):  # ≤ ~2 s a figure
        t = time.perf_counter()
        jax.block_until_ready(fn(inputs[r % len(inputs)]))
        times.append(time.perf_counter() - t)
    times.sort()
    return count / times[len(times) // 2]


def _kernel_routes(smoke):
    """{name: (jitted fn, input kind)}: "gram" routes take G = C Cᵀ, "core" routes take its
    Cholesky factor L (L Lᵀ = G: the same λ, as the null's cores)."""
    import jax
    import jax.numpy as jnp

    from rmtbase.stats._hestenes import hestenes_eigvals
    from rmtbase.stats._jacobi import jacobi_eigvalsh
    from rmtbase.stats._jacobi_pallas import hestenes_eigvals_pallas, jacobi_eigvalsh_pallas
    from rmtbase.stats._moments_route import moment_stats

    def moments(core):  # λ_max, λ_min of the trace/power route (no decomposition)
        st = moment_stats(core)
        return jnp.stack([st["lambda_max"], st["lambda_min"]], axis=-1)

    routes = {"eigvalsh": (lambda g: jnp.linalg.eigvalsh(g)[..., ::-1], "gram"),
              "moments": (moments, "core"),
              "jacobi": (jacobi_eigvalsh, "gram"), "hestenes": (hestenes_eigvals, "core")}
    for kernel, kind, variants in ((jacobi_eigvalsh_pallas, "gram", VARIANTS),
                                   (hestenes_eigvals_pallas, "core", VARIANTS_ONE_SIDED)):
        for b, unroll, warps in ((variants[:1] + variants[-1:]) if smoke else variants):
            name = (f"{'jacobi' if kind == 'gram' else 'hestenes'}_pallas_block{b}_"
                    f"{'unrolled' if unroll else 'fori'}_w{warps}")
            routes[name] = (functools.partial(kernel, block=b, unroll=unroll,
                                              num_warps=warps), kind)
    return {name: (jax.jit(fn), kind) for name, (fn, kind) in routes.items()}


def _hist_rates(smoke):
    """Matrices/s of the entropy histogram's counts of one d × d Gaussian matrix (its Rice-rule
    bins, indices as the element pass makes them) by one scatter (``jnp.bincount``), by
    per-block histograms (:func:`rmtbase.stats._binning.blocked_bincount`, what an accelerator
    runs) and by sort (:func:`~rmtbase.stats._binning.sorted_bincount`), a batch of 4 matrices a
    call; the counts are checked equal first."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from rmtbase.stats._binning import blocked_bincount, entropy_bins, sorted_bincount

    for d in HIST_D:
        n = (32 if smoke else d) ** 2
        bins = entropy_bins(n)
        sets = []
        for seed in (0, 1):
            w = jax.random.normal(jax.random.key(seed), (4, n))
            lo, hi = w.min(axis=1, keepdims=True), w.max(axis=1, keepdims=True)
            idx = jnp.clip(jnp.floor((w - lo) / ((hi - lo) / bins)), 0, bins - 1)
            sets.append(jax.block_until_ready(idx.astype(jnp.int32)))
        scatter = jax.jit(jax.vmap(lambda i, b=bins: jnp.bincount(i, length=b)))
        by_sort = jax.jit(jax.vmap(lambda i, b=bins: sorted_bincount(i, b)))
        blocked = jax.jit(jax.vmap(lambda i, b=bins: blocked_bincount(i, b)))
        want = np.asarray(scatter(sets[0]))
        same = all(np.array_equal(want, np.asarray(f(sets[0]))) for f in (by_sort, blocked))
        emit(f"hist_{d}_counts_equal", same)
        for name, fn in (("scatter", scatter), ("blocked", blocked), ("sort", by_sort)):
            emit(f"hist_{d}_{name}_per_s", _median_rate(fn, sets, 4))


def section_kernels(smoke, routes=ROUTES):
    """Bare batched eigenvalue kernels and histogram counts (module docstring, section 6)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from rmtbase.baseline.eig_route import EIGH_MAX_REL_ERROR

    _hist_rates(smoke)
    wanted = set(routes)
    routes = {name: r for name, r in _kernel_routes(smoke).items()  # --routes: by family
              if name == "moments" or name.split("_block")[0] in wanted}
    data, best = {}, {}
    for size in KERNEL_SIZES:
        n = 8 if smoke else size  # --smoke: every label at n = 8 (compiled once)
        batch = 16 if smoke else (1 << 20) // n  # 16,384 at n = 64: 268 MB a set
        sets = []
        for seed in (0, 1):
            c = jax.random.normal(jax.random.key(seed), (batch, n, 3 * n))
            g = c @ jnp.swapaxes(c, 1, 2)
            sets.append(jax.block_until_ready({"gram": g, "core": jnp.linalg.cholesky(g)}))
        ref = np.linalg.eigvalsh(np.asarray(sets[0]["gram"][:64], np.float64))[:, ::-1]
        data[f"{size}x{size}"] = (sets, ref, batch)
    # every size of a route before the next route; the unrolled kernels (long compiles) last
    order = sorted(routes, key=lambda r: "unrolled" in r)
    for name, label in [(r, lab) for r in order for lab in data]:
        sets, ref, batch = data[label]
        fn, kind = routes[name]
        try:
            want = ref[:, [0, -1]] if name == "moments" else ref  # λ_max, λ_min only
            err = float(np.abs(np.asarray(fn(sets[0][kind]))[:64] / want - 1).max())
            rate = _median_rate(fn, [x[kind] for x in sets], batch)
        except Exception as exc:  # a variant that does not compile is a result too
            emit(f"{name}_{label}_error", f"{type(exc).__name__}: {str(exc)[:300]}")
            continue
        emit(f"{name}_{label}_per_s", rate)
        emit(f"{name}_{label}_max_rel_err", err)
        family = name.split("_block")[0]  # jacobi_pallas or hestenes_pallas
        if family != name and err <= EIGH_MAX_REL_ERROR and \
                rate > best.get((family, label), ("", 0.0))[1]:
            best[(family, label)] = (name, rate)
            emit(f"{family}_{label}_per_s", rate)
            emit(f"{family}_{label}_best_variant", name)


def _null_rate(d, d_h, n, stats, storage, share_s, route=None, budget=None):
    """(draws/s, draws) of :func:`null_draws` (compiled first; a 2 % probe decides whether n
    fits ``share_s`` seconds, else n is cut to fit). ``route``: the spectral eigen route;
    ``budget``: its ``memory_budget`` (bytes a vectorised batch may use)."""
    import jax

    from rmtbase.baseline import null

    chosen = null.eig_method
    if route is not None:
        null.eig_method = lambda *a, **k: route
        null._draw_fn.cache_clear()
    try:
        run = lambda key, m: null.null_draws(  # noqa: E731
            jax.random.key(key), d, d_h, m, stats=stats, storage=storage, memory_budget=budget)
        run(1, min(n, 1024))  # compile
        probe = max(min(n, 64), n // 50)
        t = time.perf_counter()
        run(2, probe)
        rate = probe / (time.perf_counter() - t)
        if n / rate > share_s:
            n = max(probe, int(rate * share_s))
        t = time.perf_counter()
        run(3, n)
        return n / (time.perf_counter() - t), n
    finally:
        null.eig_method = chosen
        null._draw_fn.cache_clear()


def _factor_rate(d, d_h, batch):
    """Draws/s of the spectral null's random part alone (W_Q's bidiagonal B, W_K's Bartlett
    L_K and the core C = Bᵀ L_K, vectorised over ``batch`` keys): the ceiling any eigen route
    stays under."""
    import jax

    from rmtbase.ensembles import named_key
    from rmtbase.ensembles.wishart import gram_bidiagonal, gram_cholesky
    from rmtbase.stats.spectral import bidiagonal_core

    fn = jax.jit(jax.vmap(lambda k: bidiagonal_core(
        *gram_bidiagonal(named_key(k, "wq"), d, d_h), gram_cholesky(named_key(k, "wk"), d, d_h))))
    keys = [jax.random.split(jax.random.key(seed), batch) for seed in (5, 6)]
    return _median_rate(fn, keys, batch)


def _moments_rate(d, d_h, batch):
    """Draws/s of the random part (:func:`_factor_rate`'s) plus the trace/power route of the
    spectral statistics (:func:`rmtbase.stats._moments_route.moment_stats`): the null's
    statistics but the entropy, without an eigendecomposition."""
    import jax

    from rmtbase.ensembles import named_key
    from rmtbase.ensembles.wishart import gram_bidiagonal, gram_cholesky
    from rmtbase.stats._moments_route import moment_stats
    from rmtbase.stats.spectral import bidiagonal_core

    fn = jax.jit(jax.vmap(lambda k: moment_stats(bidiagonal_core(
        *gram_bidiagonal(named_key(k, "wq"), d, d_h), gram_cholesky(named_key(k, "wk"), d, d_h)))))
    keys = [jax.random.split(jax.random.key(seed), batch) for seed in (5, 6)]
    return _median_rate(fn, keys, batch)


def section_spectral(smoke, quick, seconds, routes=ROUTES):
    """The spectral null by route (module docstring, section 2)."""
    import jax

    from rmtbase.baseline.eig_route import eig_method
    from rmtbase.stats._gpu_routes import suggested_switch

    rates = {}
    for label, ((d, d_h), n) in SPECTRAL.items():
        if smoke:
            (d, d_h), n = SMOKE[label], 64
        n = n // 10 if quick else n
        chosen = eig_method(d, d_h)
        rates[(d, d_h)] = {}
        emit(f"spectral_{label}_factors_per_s", _factor_rate(d, d_h, 16 if smoke else 16_384))
        emit(f"spectral_{label}_moments_draws_per_s",
             _moments_rate(d, d_h, 16 if smoke else 16_384))
        todo = tuple(dict.fromkeys((*routes, chosen)))
        for route in todo:  # half the section's time for the runs, half for compiling
            try:
                rate, used = _null_rate(d, d_h, n, "spectral", "float32",
                                        seconds / (2 * len(todo) * len(SPECTRAL)), route)
            except Exception as exc:
                emit(f"spectral_{label}_{route}_error", f"{type(exc).__name__}: {str(exc)[:300]}")
                continue
            rates[(d, d_h)][route] = rate
            emit(f"spectral_{label}_{route}_draws_per_s", rate)
            emit(f"spectral_{label}_{route}_n_draws", used)
            if route == chosen:
                emit(f"spectral_{label}_draws_per_s", rate)
                emit(f"spectral_{label}_route", chosen)
    if jax.default_backend() != "cpu":
        emit("gpu_route_switch_suggested", suggested_switch(rates))
    else:
        emit("gpu_route_switch_suggested", None)


def section_all(smoke, quick, seconds):
    """All-statistics null draws/s (module docstring, section 5)."""
    import jax.numpy as jnp

    from rmtbase.baseline.limits import batch_budget
    from rmtbase.baseline.null import draw_batch

    emit("batch_budget_bytes", batch_budget())
    for label, ((d, d_h), n) in ALL.items():
        if smoke:
            (d, d_h), n = SMOKE[label], 4
        n = max(8, n // 10) if quick and not smoke else n
        for storage, tag in (("float32", "float32"), ("bfloat16", "bf16")):
            emit(f"all_{label}_{tag}_batch", draw_batch(d, d_h, "all", "lowrank",
                                                        jnp.dtype("float32").itemsize,
                                                        batch_budget(), storage=_record(storage)))
            rate, used = _null_rate(d, d_h, n, "all", storage, seconds / (3 * len(ALL)))
            emit(f"all_{label}_{tag}_draws_per_s", rate)
            emit(f"all_{label}_{tag}_n_draws", used)
        # a fixed 8 GiB budget beside the default one (a quarter of the card's memory limit)
        rate, used = _null_rate(d, d_h, n, "all", "bfloat16", seconds / (3 * len(ALL)),
                                budget=BIG_BUDGET)
        emit(f"all_{label}_bf16_budget8g_draws_per_s", rate)
        emit(f"all_{label}_bf16_budget8g_n_draws", used)


def _record(storage):
    from rmtbase.stats.storage import storage_record

    return storage_record(storage)


def _run_group(cmd, timeout, env=None, group=True):
    """(stdout, status) of ``cmd`` killed at ``timeout`` seconds: in its own process group,
    killed whole (``group``: a section, which starts children of its own), or a child of a
    section, in that section's group (so the section's kill takes it too), killed alone.
    Status ``ok``, ``timeout after N s`` or ``exit N: <last stderr line>``. What was printed
    before a kill is kept."""
    import signal

    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=group, env=env)
    try:
        out, err = p.communicate(timeout=max(1.0, timeout))
    except subprocess.TimeoutExpired:
        if group:
            os.killpg(p.pid, signal.SIGKILL)
        else:
            p.kill()
        out, err = p.communicate()
        return out, f"timeout after {timeout:.0f} s"
    if p.returncode:
        tail = [line for line in err.strip().splitlines() if line.strip()][-1:] or [""]
        return out, f"exit {p.returncode}: {tail[0][:300]}"
    return out, "ok"


def section_composition(smoke, seconds):
    """benchmarks/composition.py at the 8B shape (module docstring, section 2); its status."""
    shape = ["--layers", "2", "--full-layers", "2", "--d", "64", "--dh", "8", "--heads", "4",
             "--kv", "2"] if smoke else ["--layers", "32"]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "composition.json"
        _, status = _run_group([sys.executable, str(HERE / "composition.py"), *shape, "--json",
                                str(path)], seconds, env=_child_env(), group=False)
        if path.is_file():
            run = json.loads(path.read_text())["run"]
            emit("composition_8b_s", run["wall_s"])
            emit("composition_8b_ratio_wall", run["ratio_wall"])
            emit("composition_8b_peak_rss_gib", run["peak_rss_gib"])
    if status != "ok":
        raise RuntimeError(f"composition.py: {status}")


#: scoring cases: (key suffix, score_model's stats, read ahead)
SCORE_CASES = (("all", "all", True), ("spectral", "spectral", True),
               ("spectral_serial", "spectral", False))

_SCORE_CHILD = r"""
import json, sys, time
args = json.loads(sys.argv[1])
from rmtbase.scoring.heads import pipeline
from rmtbase.scoring.score import score_model
pipeline.READ_AHEAD = args.pop("read_ahead")
folder = args.pop("folder")
t = time.perf_counter()
ds = score_model(folder, progress=False, spectrum_draws=0, **args)
dt = time.perf_counter() - t
with open("/proc/self/status") as f:
    peak = next(int(l.split()[1]) for l in f if l.startswith("VmHWM")) / 1024
dev = None
import jax
if jax.default_backend() != "cpu":
    dev = (jax.devices()[0].memory_stats() or {}).get("peak_bytes_in_use")
print(json.dumps({"seconds": dt, "peak_rss_mb": peak, "heads": int(ds["head_flag"].size),
                  "device_peak_mb": None if dev is None else dev / 2**20}))
"""


def _tiny_folder(folder: Path) -> Path:
    """--smoke's stand-in for the 8B folder: the same builder's layout (q/k only, bf16, an
    index) at d = 64, 4 query heads on 2 key heads of 16, 2 layers."""
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    cfg = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
           "num_hidden_layers": 2, "intermediate_size": 128, "vocab_size": 256,
           "torch_dtype": "bfloat16"}
    (folder / "config.json").write_text(json.dumps(cfg))
    gen = torch.Generator().manual_seed(0)
    tensors = {f"model.layers.{i}.self_attn.{name}.weight":
               (0.02 * torch.randn(rows, 64, generator=gen)).to(torch.bfloat16)
               for i in range(2) for name, rows in (("q_proj", 64), ("k_proj", 32))}
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


def section_scoring(smoke, seconds):
    """The 8B folder scored (module docstring, section 1)."""
    import importlib.util

    if importlib.util.find_spec("netCDF4") is None:
        return "skipped: no netCDF4 module here (the shipped null tables are netCDF4)"
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        env = _child_env()
        if smoke:  # tiny tables drawn into a private cache, not the user's
            folder, extra = _tiny_folder(Path(tmp) / "tiny"), {"draws": 100}
            env["RMTBASE_CACHE"] = str(Path(tmp) / "cache")
        else:
            spec = importlib.util.spec_from_file_location("bench_scoring", HERE / "scoring.py")
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            t = time.perf_counter()
            folder, extra = mod.build_llama8b(Path(tmp) / "llama8b"), {}
            emit("score_8b_build_s", time.perf_counter() - t)
        for tag, stats, ahead in SCORE_CASES:
            left = seconds - (time.perf_counter() - start)
            args = {"folder": str(folder), "stats": stats, "read_ahead": ahead, **extra}
            out, status = _run_group([sys.executable, "-c", _SCORE_CHILD, json.dumps(args)],
                                     left, env=env, group=False)
            if status != "ok":
                raise RuntimeError(f"score {tag}: {status}")
            got = json.loads(out.strip().splitlines()[-1])
            emit(f"score_8b_{tag}_s", got["seconds"])
            emit(f"score_8b_{tag}_peak_rss_mb", got["peak_rss_mb"])
            if got["device_peak_mb"] is not None:
                emit(f"score_8b_{tag}_device_peak_mb", got["device_peak_mb"])


def _circuit_model(name, smoke, device):
    """A random-weight float32 LLaMA of ``name``'s shape (:data:`CIRCUIT_MODELS`), eager
    attention (the capture reads the attention weights), on ``device``."""
    import torch
    import transformers

    hidden, heads, kv, d_h, ffn, layers, vocab = CIRCUIT_SMOKE if smoke else \
        CIRCUIT_MODELS[name]
    cfg = transformers.LlamaConfig(hidden_size=hidden, num_attention_heads=heads,
                                   num_key_value_heads=kv, head_dim=d_h,
                                   intermediate_size=ffn, num_hidden_layers=layers,
                                   vocab_size=vocab, max_position_embeddings=2048,
                                   attn_implementation="eager")
    torch.manual_seed(0)
    with torch.device(device):
        model = transformers.LlamaForCausalLM(cfg)
    return model.float().eval(), vocab


def section_circuits(smoke, seconds):
    """Forward (with the attention weights) and forward + backward passes of the circuit
    search's models in torch (module docstring, section 3)."""
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    emit("circuits_device", torch.cuda.get_device_name() if device == "cuda" else "cpu")
    start = time.perf_counter()
    for name in CIRCUIT_MODELS:
        if time.perf_counter() - start > 0.6 * seconds:
            emit(f"circuits_{name}_skipped", "out of the section's time")
            continue
        model, vocab = _circuit_model(name, smoke, device)
        n, t = (2, 12) if smoke else CIRCUIT_BATCH[name]
        half = torch.randint(0, vocab, (n, t // 2), generator=torch.Generator().manual_seed(1))
        ids = torch.cat([half[:, :1], half, half], dim=1)[:, :t].to(device)  # repeated tokens
        emit(f"circuits_{name}_tokens", n * t)
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()

        def forward(model=model, ids=ids):
            with torch.inference_mode():
                return model(ids, output_attentions=True).attentions[-1].sum().item()

        def fwd_bwd(model=model, ids=ids):
            model.zero_grad(set_to_none=True)
            out = model(ids, output_attentions=True)
            loss = torch.logsumexp(out.logits.float(), dim=-1).mean()
            loss.backward()
            return loss.item()

        for what, fn in (("forward", forward), ("fwd_bwd", fwd_bwd)):
            fn()  # warm-up
            times = []
            for _ in range(3):
                if device == "cuda":
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                fn()
                if device == "cuda":
                    torch.cuda.synchronize()
                times.append(time.perf_counter() - t0)
            emit(f"circuits_{name}_{what}_s", sorted(times)[1])
        if device == "cuda":
            emit(f"circuits_{name}_device_peak_mb", torch.cuda.max_memory_allocated() / 2**20)
        del model, forward, fwd_bwd, fn
        if device == "cuda":
            torch.cuda.empty_cache()


def _meta():
    import jax
    import jaxlib

    emit("device", jax.devices()[0].device_kind)
    emit("backend", jax.default_backend())
    emit("jax", jax.__version__)
    emit("jaxlib", jaxlib.__version__)


def _commit(given):
    """``given`` (``--commit``) where given, else HEAD of this checkout (``+dirty`` where tracked
    files differ). The given one wins: a device's copy of the tree may carry a stale ``.git``
    (on 2026-11-26 the second run's copy answered with the first call's commit, ``+dirty``)."""
    if given:
        return given
    try:
        git = ["git", "-C", str(HERE.parent)]
        head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run([*git, "status", "--porcelain", "-uno"], capture_output=True,
                               text=True).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return given or "unknown"


def _collect(out, res):
    for line in out.splitlines():
        if line.startswith("RESULT "):
            res.update(json.loads(line[7:]))


def _run_section(name, args, seconds, res):
    """Run one section in a subprocess of this script (or here with --inline); its figures go
    into ``res``; returns its status: ``ok``, the section's own (``skipped: ...``), ``timeout
    after N s`` or ``exit N: <last stderr line>`` (a crash: ``exit -11``)."""
    if name in ("composition", "scoring") and getattr(args, f"skip_{name}"):
        return f"skipped: --skip-{name}"
    if args.inline:
        if name == "composition":
            return "skipped: --inline runs no external benchmark"
        import contextlib
        import io

        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            status = _section_here(name, args.smoke, args.quick, 0.8 * seconds, args.routes)
        _collect(buf.getvalue(), res)
        return status or "ok"
    flags = ["--smoke"] * args.smoke + ["--quick"] * args.quick + ["--routes", args.routes]
    out, status = _run_group([sys.executable, str(Path(__file__).resolve()), "--section", name,
                              "--seconds", f"{0.8 * seconds:.0f}", *flags], seconds)
    _collect(out, res)
    told = [line[7:] for line in out.splitlines() if line.startswith("STATUS ")]
    return told[-1] if told and status == "ok" else status


#: $XLA_PYTHON_CLIENT_PREALLOCATE as this process found it (:func:`_child_env`)
_PREALLOCATE = os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE")


def _child_env(env=None):
    """The environment of a section's own children (a score, composition.py): as this process
    found it, so that JAX there takes its usual share of the device's memory."""
    env = dict(os.environ if env is None else env)
    env.pop("XLA_PYTHON_CLIENT_PREALLOCATE", None)
    if _PREALLOCATE is not None:
        env["XLA_PYTHON_CLIENT_PREALLOCATE"] = _PREALLOCATE
    return env


def _section_here(name, smoke, quick, seconds, routes=""):
    """Run section ``name`` in this process; its status where it says one (else None). The
    sections whose work runs in children (scoring, composition) or in torch (circuits) keep
    JAX here from reserving the device's memory (it preallocates 75 % by default)."""
    if name in ("scoring", "composition", "circuits"):
        os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    _meta()
    _SECTION["name"] = name  # from here a crash may be injected (emit)
    try:
        if name == "scoring":
            return section_scoring(smoke, seconds)
        if name == "composition":
            return section_composition(smoke, seconds)
        if name == "circuits":
            return section_circuits(smoke, seconds)
        if name == "kernels":
            return section_kernels(smoke, tuple(r for r in routes.split(",") if r) or ROUTES)
        if name == "spectral":
            return section_spectral(smoke, quick, seconds,
                                    tuple(r for r in routes.split(",") if r) or ROUTES)
        return section_all(smoke, quick, seconds)
    finally:
        _SECTION["name"] = None


def _write_json(path, res):
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)


def _table(res):
    rows = ["| figure | value |", "|---|---:|"]
    for key in KEYS[3:]:
        v = res.get(key)
        text = f"{v:,.1f}" if isinstance(v, float) else ("—" if v is None else str(v))
        rows.append(f"| `{key}` | {text} |")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, default=None, help="write the figures here (JSON)")
    ap.add_argument("--out", type=Path, default=None, help="also write the table here")
    ap.add_argument("--budget-s", type=float, default=480.0, help="wall seconds for the run")
    ap.add_argument("--quick", action="store_true", help="a tenth of the draws")
    ap.add_argument("--smoke", action="store_true", help="tiny shapes (a CPU plumbing check)")
    ap.add_argument("--inline", action="store_true", help="sections in this process")
    ap.add_argument("--sections", default=",".join(SECTIONS),
                    help=f"which of {','.join(SECTIONS)} to run (the others are skipped)")
    ap.add_argument("--routes", default=",".join(ROUTES),
                    help="eigen routes of the spectral and kernels sections (spectral: the "
                    "chosen one is always added; kernels: the moments route too)")
    ap.add_argument("--skip-scoring", action="store_true")
    ap.add_argument("--skip-composition", action="store_true")
    ap.add_argument("--commit", default=None, help="the commit to record (else git's HEAD here)")
    ap.add_argument("--section", choices=SECTIONS, help=argparse.SUPPRESS)
    ap.add_argument("--seconds", type=float, default=60.0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.section:
        status = _section_here(args.section, args.smoke, args.quick, args.seconds, args.routes)
        if status:
            print(f"STATUS {status}", flush=True)
        return 0
    start = time.perf_counter()
    res = {"commit": _commit(args.commit), "date": time.strftime("%Y-%m-%d %H:%M UTC",
           time.gmtime()), "budget_s": args.budget_s, "smoke": args.smoke, "quick": args.quick,
           "shapes": {k: list(SMOKE[k] if args.smoke else v[0]) for k, v in SPECTRAL.items()},
           "sections": {}, "skipped": {}}
    for name in SECTIONS:
        t = time.perf_counter()
        left = args.budget_s - (t - start) - 5
        limit = min(SHARE[name] * args.budget_s, left)
        if name not in args.sections.split(","):
            status = "skipped: not in --sections"
        elif limit < 10:
            status = "skipped: out of budget"
        else:
            status = _run_section(name, args, limit, res)
        res["sections"][name] = {"status": status, "wall_s": time.perf_counter() - t}
        print(f"# {name}: {status} ({time.perf_counter() - t:.0f} s)", flush=True)
        if args.json:
            _write_json(args.json, res)
    for key in KEYS:
        if key not in res:
            res["skipped"][key] = "not measured (see sections)"
    res["wall_s"] = time.perf_counter() - start
    lines = [f"device: {res.get('device')} ({res.get('backend')}); jax {res.get('jax')}; "
             f"commit {res['commit']}; {res['date']}; {res['wall_s']:.0f} s", "", *_table(res)]
    print("\n".join(lines), flush=True)
    if args.json:
        _write_json(args.json, res)
    if args.out:
        tmp = args.out.with_name(args.out.name + ".tmp")
        tmp.write_text("\n".join(lines) + "\n")
        tmp.replace(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
