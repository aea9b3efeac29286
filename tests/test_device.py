"""GPU = CPU: the null drawn on an accelerator against the same keys on the CPU.

The GPU = CPU checks run only where JAX's default backend is an accelerator (a lent GPU); on a
CPU-only machine, CI's included, they skip and say so. The Jacobi kernel's accuracy check runs
on every backend: compiled on a GPU, in Pallas' interpret mode on the CPU. Threefry bits are the
same on every backend; what may differ is float32 rounding (normals, products, eigenvalues) and
the eigen route (:func:`rmtbase.baseline.eig_route.eig_method`: ``eigvalsh`` on an accelerator,
tridiagonal bisection on the CPU, both within EIGH_MAX_REL_ERROR relative of a float64 SVD; on
this CPU the two routes' spectral statistics differ by ≤ 1.3e-6 relative at (768, 64), 512
draws). The bounds, one per class of statistic, are in :func:`test_accelerator_null_equals_cpu`:
together they say that a null table made on either backend serves both.
"""

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from rmtbase.stats import SPECTRAL_STATS as _SPECTRAL

#: jax 0.11 warns at every lowering of a Pallas Triton kernel (the backend is deprecated there;
#: jax 0.10.2 does not); the Jacobi kernels use it, so their tests ignore that one warning
TRITON_DEPRECATION = pytest.mark.filterwarnings(
    "ignore:The Pallas Triton backend is deprecated:DeprecationWarning")
accelerator = pytest.mark.skipif(
    jax.default_backend() == "cpu",
    reason="no accelerator: JAX sees only the CPU (these GPU = CPU checks run where one is lent)")

_CPU = r"""
import json, sys
import numpy as np, jax
from rmtbase.baseline.null import null_draws
a = json.loads(sys.argv[1])
r = null_draws(jax.random.key(a["seed"]), a["d"], a["d_h"], a["n"], stats=a["stats"],
               storage=a["storage"])
np.savez(a["path"], **{k: np.asarray(v) for k, v in r.items()})
"""


def _both(tmp_path, route=None, **a):
    """{name: (here, cpu)}: the same draws here (``route``: the spectral eigen route forced
    here; None: the one eig_method takes) and on the CPU (a subprocess, its own route)."""
    from rmtbase.baseline import null

    if route is not None:
        chosen, null.eig_method = null.eig_method, lambda *args, **kw: route
        null._draw_fn.cache_clear()
    try:
        here = null.null_draws(jax.random.key(a["seed"]), a["d"], a["d_h"], a["n"],
                               stats=a["stats"], storage=a["storage"])
    finally:
        if route is not None:
            null.eig_method = chosen
            null._draw_fn.cache_clear()
    path = tmp_path / "cpu.npz"
    subprocess.run([sys.executable, "-c", _CPU, json.dumps({**a, "path": str(path)})],
                   env=dict(os.environ, JAX_PLATFORMS="cpu"), check=True)
    with np.load(path) as cpu:
        return {k: (np.asarray(v), cpu[k]) for k, v in here.items()}


def _histogram(name: str) -> bool:
    from rmtbase.stats.statistic import STATISTICS

    return any(s.histogram and name.endswith("." + s.name) for s in STATISTICS)


@accelerator
@pytest.mark.parametrize("stats,n,storage", [("spectral", 512, "float32"), ("all", 24, "float32"),
                                             ("all", 96, "bfloat16")])
def test_accelerator_null_equals_cpu(tmp_path, stats, n, storage):
    """Three classes of statistic, three bounds (first run on an H200, 2026-11-26, where the
    earlier single bound of 1e-3 sd failed on all three cases; rerun there the same day, where
    the bfloat16 case failed on its smooth element statistics and was given the paired bound):

    - spectral (functions of λ) in float32: relative to the CPU draw, ≤ 4·EIGH_MAX_REL_ERROR — both
      backends' λ are within EIGH_MAX_REL_ERROR of a float64 SVD (tests/test_wishart.py), and a
      statistic is a ratio of at most two such errors (measured ≤ 5.1e-5, condition number);
    - smooth element statistics (moments, Weibull fit, q99 ratio) in float32: ≤ 1e-3 null sd
      draw by draw (measured ≤ 1.5e-4 sd on the H200);
    - histogram statistics (entropy, delta_entropy, kl_gaussian, sigma_fit), and in bfloat16
      storage every statistic, spectral ones too (the factors themselves differ, below; λ_min,
      λ_max by up to 6e-4 relative): draws may move, so what a table needs is no
      systematic shift: the paired mean difference ≤ 0.1 sd, and within 4 of its standard
      errors unless it is ≤ 0.01 sd (float32 sums do round differently on the two backends: a
      shift of 7e-4 sd in qk.sum_lambda has z = 73 at 96 draws, and one of 1.3e-3 sd in
      q.weibull_k z = 3.9 in bfloat16; a shift that small changes no p-value a table gives).
      In float32 one ulp of a sum moves a bin edge past entries (measured ≤ 2.6e-2 sd a
      draw); in bfloat16 the two backends' float32 Gaussians differ in their last bits, which
      moves the bf16 rounding of some entries (measured on the H200, 96 draws: 0.01–0.02
      sd a draw for std, skewness, kurtosis; up to 1.6 sd for delta_entropy and kl_gaussian,
      paired means ≤ 0.06 sd).

    Every statistic is checked before the test fails, and the failures are listed together.
    """
    from rmtbase.baseline.eig_route import EIGH_MAX_REL_ERROR

    pairs = _both(tmp_path, seed=3, d=768, d_h=64, n=n, stats=stats, storage=storage)
    assert pairs
    bad = []
    for name, (acc, cpu) in pairs.items():
        assert acc.shape == cpu.shape, name
        # exact: integers / booleans (NaN masks)
        assert np.array_equal(np.isnan(acc), np.isnan(cpu)), name
        if acc.ndim != 1:
            continue
        sd = np.nanstd(cpu)
        assert sd > 0, name
        diff = (acc - cpu)[~np.isnan(cpu)]
        if storage == "float32" and name.startswith("qk.") and name.split(".")[-1] in _SPECTRAL:
            rel = np.abs(diff) / np.abs(cpu[~np.isnan(cpu)])
            if not rel.max() < 4 * EIGH_MAX_REL_ERROR:
                bad.append((name, "relative", float(rel.max())))
        elif _histogram(name) or storage != "float32":
            se = max(np.std(diff, ddof=1), np.finfo(np.float32).eps * sd) / np.sqrt(diff.size)
            shift = abs(diff.mean())
            if not (shift <= 0.1 * sd and (shift <= 4 * se or shift <= 0.01 * sd)):
                bad.append((name, "paired mean (sd, z)", float(diff.mean() / sd),
                            float(diff.mean() / se)))
        elif not np.abs(diff).max() / sd < 1e-3:
            bad.append((name, "draw (sd)", float(np.abs(diff).max() / sd)))
    assert not bad, bad


@accelerator
@TRITON_DEPRECATION
@pytest.mark.parametrize("route", ["jacobi_pallas", "hestenes_pallas", "jacobi", "hestenes"])
def test_accelerator_jacobi_routes_equal_cpu(tmp_path, route):
    """The spectral null with a Jacobi route forced on the accelerator (the routes
    eig_method may take there once measured) against the CPU's own route, same keys: every
    spectral statistic within 4·EIGH_MAX_REL_ERROR relative, as the float32 spectral case
    above (each route's λ are within EIGH_MAX_REL_ERROR of a float64 SVD)."""
    from rmtbase.baseline.eig_route import EIGH_MAX_REL_ERROR

    pairs = _both(tmp_path, route, seed=3, d=768, d_h=64, n=512, stats="spectral",
                  storage="float32")
    rel = {name: float(np.max(np.abs(acc / cpu - 1))) for name, (acc, cpu) in pairs.items()
           if acc.ndim == 1}
    assert rel and max(rel.values()) < 4 * EIGH_MAX_REL_ERROR, rel


@TRITON_DEPRECATION
@pytest.mark.parametrize("n", [16, 64, 128])
@pytest.mark.parametrize("unroll", [False, True])
@pytest.mark.parametrize("one_sided", [False, True])
def test_jacobi_kernel_matches_float64(n, unroll, one_sided):
    """The Pallas Jacobi kernels on this backend (compiled on a GPU; interpret mode on the CPU,
    where only the cheap n = 16, not unrolled, runs: tests/test_jacobi.py has the rest) against
    numpy float64 on float32 Wishart matrices G (fixed seeds): the two-sided kernel on G, the
    one-sided on its Cholesky factor (same λ); every output entry compared (a NaN or an
    unwritten entry fails), within the symmetric routes' bound n·eps·κ ≤ EIGH_MAX_REL_ERROR."""
    from rmtbase.baseline.eig_route import EIGH_MAX_REL_ERROR
    from rmtbase.stats._jacobi_pallas import hestenes_eigvals_pallas, jacobi_eigvalsh_pallas

    if jax.default_backend() == "cpu" and (n > 16 or unroll):
        pytest.skip("interpret mode on the CPU: n = 16 fori only (tests/test_jacobi.py)")
    if unroll and n > 64:
        pytest.skip("the unrolled sweep at n = 128 is 127 steps long: its compile time is not "
                    "yet known (benchmarks/gpu.py tries it last)")
    seed = 57_000 + n + unroll
    c = np.random.default_rng(seed).standard_normal((300, n, 3 * n))
    g = (c @ np.swapaxes(c, 1, 2)).astype(np.float32)
    x = np.linalg.cholesky(g.astype(np.float64)).astype(np.float32) if one_sided else g
    kernel = hestenes_eigvals_pallas if one_sided else jacobi_eigvalsh_pallas
    ref = np.linalg.eigvalsh(x.astype(np.float64) @ np.swapaxes(x, 1, 2).astype(np.float64)
                             if one_sided else g.astype(np.float64))[:, ::-1]
    for block in ((1,) if unroll else (1, 4)):  # fewer long compiles
        lam = np.asarray(kernel(x, block=block, unroll=unroll), np.float64)
        err = np.abs(lam / ref - 1).max()
        bound = n * np.finfo(np.float32).eps * (ref[:, 0] / ref[:, -1]).max()
        assert np.isfinite(lam).all() and err <= max(bound, 1e-6), (seed, block, err, bound)
        assert err < EIGH_MAX_REL_ERROR, (seed, block, err)
