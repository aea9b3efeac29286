"""Every figure of issue 57's GPU table in one run, within a wall-clock budget (default 480 s).

    python benchmarks/gpu.py [--json FILE] [--out FILE.md] [--budget-s 480] [--quick]
                             [--skip-scoring] [--skip-composition] [--smoke] [--inline]

Sections, each in its own subprocess with a time limit taken from what is left of the budget
(a section that runs out keeps the figures it printed; the rest are recorded as skipped, with
the reason), so one slow or failing route cannot eat the run:

1. ``kernels``: bare batched eigenvalues of float32 Wishart matrices G = C Cᵀ (C n × 3n
   Gaussian), n = 64 and 128, matrices/s (median of timed repeats after a warm-up, two input
   sets alternated): ``jnp.linalg.eigvalsh`` (cuSOLVER on a GPU), the jnp Jacobi routes
   (two-sided on G, :mod:`rmtbase.stats._jacobi`; one-sided on G's Cholesky factor,
   :mod:`rmtbase.stats._hestenes`) and their Pallas kernels
   (:mod:`rmtbase.stats._jacobi_pallas`) in several variants (block, unrolled step loop, warps),
   each with its largest relative error against numpy float64 on 64 matrices: a variant over
   EIGH_MAX_REL_ERROR never counts as the best of its family (``*_best_variant``).
2. ``spectral``: the spectral null through :func:`rmtbase.baseline.null.null_draws` (what
   ``rmtbase baseline --stats spectral`` runs, compilation excluded) at (768, 64) with 10⁶
   draws and (4096, 128), (8192, 128) with 2·10⁵, by route (``eigvalsh``, ``jacobi_pallas``,
   ``hestenes_pallas``, ``jacobi``, ``hestenes``, and the route :func:`~rmtbase.baseline.eig_route.eig_method` takes now). A probe of
   2 % of the draws decides whether the whole count fits the section's share; if not, the count
   is cut to fit and recorded (``*_n_draws``). ``spectral_*_factors_per_s``: the random part
   alone (the factors and the core, no eigenvalues), the ceiling of every route.
   ``gpu_route_switch_suggested``: the switch of
   :mod:`rmtbase.stats._gpu_routes` that these figures support ([route, largest d_h] or null).
3. ``all``: all-statistics null draws/s at (768, 64) and (4096, 128), float32 and bfloat16
   storage (5,000 and 500 draws, same probe rule); and bfloat16 again with an 8 GiB
   ``memory_budget`` (``*_bf16_budget8g_*``): on an accelerator the default 512 MiB makes the
   (4096, 128) batch one draw wide (~545 MiB a draw), so this says what wider batches buy.
4. ``composition``: ``benchmarks/composition.py --layers 32`` (the 8B shape, all 496 layer
   pairs) as a subprocess; ``composition_8b_s`` is its own wall time (factor generation left
   out), beside its GEMM-floor ratio.
5. ``scoring``: ``benchmarks/scoring.py --which llama8b`` as a subprocess (builds the
   LLaMA-3-8B-shaped bf16 folder, 1.3 GB, then scores it with all statistics and with
   ``--stats spectral``): seconds and peak RSS as it reports them. The shipped null tables are
   netCDF4: where the Python that runs this has no ``netCDF4`` module (the device image has
   none) the section is skipped and says so; docs/performance.md gives the wheels to carry.

JSON (``--json``, written after every section, atomically): ``device``, ``backend``, ``jax``,
``jaxlib``, ``commit``, ``date``, ``budget_s``, ``smoke``, then the figures under
self-explaining keys (``spectral_768x64_draws_per_s``, ``spectral_768x64_eigvalsh_draws_per_s``,
``all_4096x128_bf16_draws_per_s``, ``eigvalsh_64x64_per_s``, ``score_8b_all_s``,
``composition_8b_s``, ...; :data:`KEYS` lists the headline keys) and ``skipped`` (key → reason).

``--smoke``: tiny sizes under the same keys (shapes in ``shapes``), for a CPU check of the
plumbing (tests/test_gpu_benchmark.py); ``--inline`` runs the sections in this process and
skips the two external subprocesses. ``--sections`` and ``--routes`` pick what runs (a rerun
after a route broke a section, say). ``--quick``: full shapes, a tenth of the draws.
OPENBLAS_NUM_THREADS=1 as in the other benchmarks. Nothing here imports netCDF4.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
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
SECTIONS = ("kernels", "spectral", "all", "composition", "scoring")
#: share of the budget each section may take at most (the rest is what is left)
SHARE = {"kernels": 0.2, "spectral": 0.3, "all": 0.2, "composition": 0.25, "scoring": 0.5}
KEYS = ("device", "jax", "commit", "spectral_768x64_draws_per_s",
        "spectral_768x64_eigvalsh_draws_per_s", "spectral_768x64_jacobi_pallas_draws_per_s",
        "spectral_4096x128_draws_per_s", "spectral_8192x128_draws_per_s",
        "eigvalsh_64x64_per_s", "eigvalsh_128x128_per_s", "jacobi_pallas_64x64_per_s",
        "hestenes_pallas_64x64_per_s", "spectral_768x64_hestenes_pallas_draws_per_s",
        "spectral_768x64_factors_per_s",
        "all_4096x128_float32_draws_per_s", "all_4096x128_bf16_draws_per_s",
        "all_768x64_float32_draws_per_s", "all_768x64_bf16_draws_per_s",
        "gpu_route_switch_suggested", "score_8b_all_s", "score_8b_spectral_s", "composition_8b_s")


def emit(key, value):
    """One figure, as the line the parent collects (flushed: a killed section keeps it)."""
    print("RESULT " + json.dumps({key: value}), flush=True)


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

    routes = {"eigvalsh": (lambda g: jnp.linalg.eigvalsh(g)[..., ::-1], "gram"),
              "jacobi": (jacobi_eigvalsh, "gram"), "hestenes": (hestenes_eigvals, "core")}
    for kernel, kind, variants in ((jacobi_eigvalsh_pallas, "gram", VARIANTS),
                                   (hestenes_eigvals_pallas, "core", VARIANTS_ONE_SIDED)):
        for b, unroll, warps in ((variants[:1] + variants[-1:]) if smoke else variants):
            name = (f"{'jacobi' if kind == 'gram' else 'hestenes'}_pallas_block{b}_"
                    f"{'unrolled' if unroll else 'fori'}_w{warps}")
            routes[name] = (functools.partial(kernel, block=b, unroll=unroll,
                                              num_warps=warps), kind)
    return {name: (jax.jit(fn), kind) for name, (fn, kind) in routes.items()}


def section_kernels(smoke):
    """Bare batched eigenvalue kernels (module docstring, section 1)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from rmtbase.baseline.eig_route import EIGH_MAX_REL_ERROR

    routes = _kernel_routes(smoke)  # jitted once: --smoke's labels share one shape
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
            err = float(np.abs(np.asarray(fn(sets[0][kind]))[:64] / ref - 1).max())
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
    """All-statistics null draws/s (module docstring, section 3)."""
    for label, ((d, d_h), n) in ALL.items():
        if smoke:
            (d, d_h), n = SMOKE[label], 4
        n = max(8, n // 10) if quick and not smoke else n
        for storage, tag in (("float32", "float32"), ("bfloat16", "bf16")):
            rate, used = _null_rate(d, d_h, n, "all", storage, seconds / (3 * len(ALL)))
            emit(f"all_{label}_{tag}_draws_per_s", rate)
            emit(f"all_{label}_{tag}_n_draws", used)
        # the batch width on an accelerator is MEMORY_BUDGET (512 MiB) / ~545 MiB a draw = 1 at
        # (4096, 128): one draw per compiled call. What a larger budget buys (not the default)
        rate, used = _null_rate(d, d_h, n, "all", "bfloat16", seconds / (3 * len(ALL)),
                                budget=BIG_BUDGET)
        emit(f"all_{label}_bf16_budget8g_draws_per_s", rate)
        emit(f"all_{label}_bf16_budget8g_n_draws", used)


def _run_group(cmd, timeout, env=None):
    """(stdout, status) of ``cmd`` in its own process group, killed whole at ``timeout``
    seconds (scoring.py starts children of its own); status ``ok``, ``timeout after N s`` or
    ``exit N: <last stderr line>``. What was printed before a kill is kept."""
    import signal

    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, env=env)
    try:
        out, err = p.communicate(timeout=max(1.0, timeout))
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        return out, f"timeout after {timeout:.0f} s"
    if p.returncode:
        tail = [line for line in err.strip().splitlines() if line.strip()][-1:] or [""]
        return out, f"exit {p.returncode}: {tail[0][:300]}"
    return out, "ok"


def section_composition(smoke, seconds):
    """benchmarks/composition.py at the 8B shape (module docstring, section 4)."""
    shape = ["--layers", "2", "--full-layers", "2", "--d", "64", "--dh", "8", "--heads", "4",
             "--kv", "2"] if smoke else ["--layers", "32"]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "composition.json"
        _, status = _run_group([sys.executable, str(HERE / "composition.py"), *shape, "--json",
                                str(path)], seconds)
        if path.is_file():
            run = json.loads(path.read_text())["run"]
            emit("composition_8b_s", run["wall_s"])
            emit("composition_8b_ratio_wall", run["ratio_wall"])
            emit("composition_8b_peak_rss_gib", run["peak_rss_gib"])
    return status


def section_scoring(smoke, seconds):
    """benchmarks/scoring.py --which llama8b (module docstring, section 5); None = ran."""
    import importlib.util

    if smoke:
        return "skipped: --smoke builds no 8B folder"
    if importlib.util.find_spec("netCDF4") is None:
        return "skipped: no netCDF4 module here (the shipped null tables are netCDF4)"
    out, status = _run_group([sys.executable, str(HERE / "scoring.py"), "--which", "llama8b"],
                             seconds)
    for line in out.splitlines():
        m = re.search(r"--stats (all|spectral): ([\d.]+) s, peak RSS (\d+) MB", line)
        if m:
            emit(f"score_8b_{m[1]}_s", float(m[2]))
            emit(f"score_8b_{m[1]}_peak_rss_mb", float(m[3]))
    return status


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
    """Run one section (in a subprocess, or here with --inline); its figures go into ``res``;
    returns its status."""
    if name in ("composition", "scoring"):
        if args.inline:
            return "skipped: --inline runs no external benchmark"
        if getattr(args, f"skip_{name}"):
            return f"skipped: --skip-{name}"
        import contextlib
        import io

        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            status = (section_composition if name == "composition" else section_scoring)(
                args.smoke, seconds)
        _collect(buf.getvalue(), res)
        return status
    flags = ["--smoke"] * args.smoke + ["--quick"] * args.quick + ["--routes", args.routes]
    if args.inline:
        import contextlib
        import io

        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            _section_here(name, args.smoke, args.quick, 0.8 * seconds, args.routes)
        _collect(buf.getvalue(), res)
        return "ok"
    out, status = _run_group([sys.executable, str(Path(__file__).resolve()), "--section", name,
                              "--seconds", f"{0.8 * seconds:.0f}", *flags], seconds)
    _collect(out, res)
    return status


def _section_here(name, smoke, quick, seconds, routes=""):
    _meta()
    if name == "kernels":
        section_kernels(smoke)
    elif name == "spectral":
        section_spectral(smoke, quick, seconds, tuple(r for r in routes.split(",") if r) or ROUTES)
    else:
        section_all(smoke, quick, seconds)


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
                    help="eigen routes of the spectral section (the chosen one is always added)")
    ap.add_argument("--skip-scoring", action="store_true")
    ap.add_argument("--skip-composition", action="store_true")
    ap.add_argument("--commit", default=None, help="the commit to record (else git's HEAD here)")
    ap.add_argument("--section", choices=SECTIONS[:3], help=argparse.SUPPRESS)
    ap.add_argument("--seconds", type=float, default=60.0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.section:
        _section_here(args.section, args.smoke, args.quick, args.seconds, args.routes)
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
