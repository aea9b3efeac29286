"""The parallel cyclic Jacobi routes: two-sided on Grams (rmtbase.stats._jacobi) and
one-sided on the cores themselves (rmtbase.stats._hestenes), each in jnp and as a Pallas kernel
(rmtbase.stats._jacobi_pallas; Pallas' interpret mode on the CPU).

Every check is against an independent computation: numpy's float64 LAPACK eigvalsh, the
float64 SVD of the null's own cores, the closed form of a 2 × 2 eigenproblem, or fancy
indexing for the XOR permutations. The accuracy rule is the project's (EIGH_MAX_REL_ERROR,
a bound on d_h·eps·κ, as for the other symmetric routes in tests/test_wishart.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rmtbase.baseline.eig_route import EIGH_MAX_REL_ERROR, eig_method
from rmtbase.stats._gpu_routes import accelerator_route, suggested_switch
from rmtbase.stats._hestenes import hestenes_eigvals
from rmtbase.stats._jacobi import jacobi_eigvalsh, padded_size
from rmtbase.stats._jacobi_pallas import (
    hestenes_eigvals_pallas,
    jacobi_eigvalsh_pallas,
    xor_static,
    xor_traced,
)

EPS32 = float(np.finfo(np.float32).eps)


def _grams(seed, batch, n, ratio=3):
    """float32 Wishart matrices C Cᵀ, C (n, ratio·n) Gaussian: κ ≈ ((1+1/√3)/(1−1/√3))² ≈ 14."""
    c = np.random.default_rng(seed).standard_normal((batch, n, ratio * n)).astype(np.float32)
    return c @ np.swapaxes(c, 1, 2)


def _rel_err(lam, g):
    """max |λ/λ_ref − 1| against float64 eigvalsh of the same float32 matrices, and the
    largest n·eps·κ of the batch (the bound the symmetric routes are held to)."""
    ref = np.linalg.eigvalsh(g.astype(np.float64))[:, ::-1]
    n = g.shape[-1]
    return np.abs(np.asarray(lam, np.float64) / ref - 1).max(), n * EPS32 * (ref[:, 0] / ref[:, -1]).max()


def test_xor_permutations_equal_fancy_indexing():
    x = jnp.arange(8 * 3).reshape(8, 3)
    for k in range(8):
        want = np.asarray(x)[np.arange(8) ^ k]
        # exact: integer arrays, a permutation
        assert np.array_equal(np.asarray(xor_static(x, 0, k)), want), k
        # exact: integer arrays, a permutation
        assert np.array_equal(np.asarray(xor_traced(x, 0, jnp.int32(k))), want), k
        # exact: integer arrays, a permutation
        assert np.array_equal(np.asarray(xor_static(x.T, 1, k)), want.T), k


@pytest.mark.parametrize("n", [1, 5, pytest.param(16, marks=pytest.mark.slow), 64])
def test_jnp_route_matches_float64(n):
    """n = 64: the spectral null's d_h at GPT-2 shape; n = 1, 5: padding to a power of two."""
    g = _grams(n, 12, n)
    lam, sweeps = jacobi_eigvalsh(jnp.asarray(g), return_sweeps=True)
    err, bound = _rel_err(lam, g)
    assert lam.shape == (12, n) and np.all(np.diff(np.asarray(lam), axis=-1) <= 0)
    assert err <= max(bound, 16 * EPS32) and err < EIGH_MAX_REL_ERROR, (err, bound)
    assert int(sweeps) <= 10  # quadratic convergence: 7 at n = 64 in float32


def test_two_by_two_closed_form_and_converged_inputs():
    """[[a, b], [b, c]]: λ = (a+c)/2 ± √(((a−c)/2)² + b²); a diagonal matrix takes no sweep and
    returns its diagonal sorted (exactly); the zero matrix returns zeros; repeated
    eigenvalues (I + v vᵀ: 1 with multiplicity n − 1) are found."""
    rng = np.random.default_rng(1)
    a, b, c = rng.standard_normal((3, 20))
    g = np.stack([np.stack([a, b], -1), np.stack([b, c], -1)], -2)
    mid, rad = (a + c) / 2, np.sqrt(((a - c) / 2) ** 2 + b * b)
    lam = np.asarray(jacobi_eigvalsh(jnp.asarray(g, jnp.float32)), np.float64)
    np.testing.assert_allclose(lam, np.stack([mid + rad, mid - rad], -1), atol=4 * EPS32 * rad.max())
    dia = np.diag(rng.standard_normal(7)).astype(np.float32)  # 3 of 8 rows padding, λ < 0 too
    lam, sweeps = jacobi_eigvalsh(jnp.asarray(dia[None]), return_sweeps=True)
    assert int(sweeps) == 0
    # exact: no rotation touches a diagonal matrix; the output is its diagonal, sorted
    assert np.array_equal(np.asarray(lam)[0], np.sort(np.diag(dia))[::-1])
    # exact: zeros never rotate (a_pq = 0 gives t = 0)
    assert np.array_equal(np.asarray(jacobi_eigvalsh(jnp.zeros((2, 6, 6)))), np.zeros((2, 6)))
    v = rng.standard_normal(12)
    lam = np.asarray(jacobi_eigvalsh(jnp.asarray(np.eye(12) + np.outer(v, v), jnp.float32)))
    np.testing.assert_allclose(lam, [1 + v @ v] + [1] * 11, rtol=2e-6 * 12, atol=2e-6 * 12)


@pytest.mark.parametrize("n,block,unroll", [(8, 1, False), (8, 2, True), (20, 4, False),
                                            (64, 2, False)])
def test_pallas_kernel_matches_float64(n, block, unroll):
    """The kernel in interpret mode (the same jaxpr the GPU compiles): n = 20 pads to 32 and
    its 5 matrices to 8 (two programs of 4, three zero matrices); n = 64 is the GPT-2 shape."""
    g = _grams(100 + n, 5, n)
    lam = jacobi_eigvalsh_pallas(jnp.asarray(g), block=block, unroll=unroll, interpret=True)
    err, bound = _rel_err(lam, g)
    assert lam.shape == (5, n) and np.all(np.diff(np.asarray(lam), axis=-1) <= 0)
    assert err <= max(bound, 16 * EPS32) and err < EIGH_MAX_REL_ERROR, (err, bound)
    with pytest.raises(ValueError, match="power of two"):
        jacobi_eigvalsh_pallas(jnp.asarray(g), block=3)


@pytest.mark.filterwarnings("ignore:The Pallas Triton backend is deprecated:DeprecationWarning")
@pytest.mark.parametrize("kernel,unroll", [(jacobi_eigvalsh_pallas, False),
                                           (jacobi_eigvalsh_pallas, True),
                                           (hestenes_eigvals_pallas, False)])
def test_pallas_kernel_lowers_to_triton(kernel, unroll):
    """Without a GPU: the kernel is lowered for CUDA (Pallas → Triton IR), which fails on any
    operation Pallas cannot lower to Triton. What Triton's own compiler then makes of it is
    measured only on a GPU (benchmarks/gpu.py, tests/test_device.py). jax 0.11 deprecates
    the Pallas Triton backend and warns at each lowering (ignored here; jax 0.10.2 does not)."""
    n = 64 if not unroll else 16
    fn = jax.jit(lambda g: kernel(g, unroll=unroll, interpret=False, num_warps=4))
    text = fn.trace(jax.ShapeDtypeStruct((32, n, n), jnp.float32)).lower(
        lowering_platforms=("cuda",)).as_text()
    assert "xla.gpu.triton" in text


@pytest.mark.filterwarnings("ignore:The Pallas Triton backend is deprecated:DeprecationWarning")
@pytest.mark.parametrize("route", ["jacobi_pallas", "hestenes_pallas"])
def test_null_draw_with_a_kernel_route_lowers_to_one_triton_call(monkeypatch, route):
    """The null's draw function with a kernel route, vectorised as map_draws does (vmap), lowers
    for CUDA to one Triton call with one program per draw (Pallas' batching rule adds the grid
    axis). Interpret mode is the CPU default, so the kernels are forced compiled here."""
    import functools
    import re

    import rmtbase.stats._jacobi_pallas as kernels
    from rmtbase.baseline import null

    for name in ("jacobi_eigvalsh_pallas", "hestenes_eigvals_pallas"):
        monkeypatch.setattr(kernels, name, functools.partial(getattr(kernels, name),
                                                             interpret=False))
    monkeypatch.setattr(null, "eig_method", lambda *a, **k: route)
    null._draw_fn.cache_clear()
    try:
        fn = null._draw_fn(null.Draws(768, 64, stats="spectral"))
        text = jax.jit(jax.vmap(fn)).trace(jax.random.split(jax.random.key(0), 32)).lower(
            lowering_platforms=("cuda",)).as_text()
    finally:
        null._draw_fn.cache_clear()
    assert text.count("xla.gpu.triton") == 1
    assert re.search(r"grid_x = 1 : i32, grid_y = 32 : i32", text)


@pytest.mark.parametrize("route", [pytest.param("jacobi", marks=pytest.mark.slow), "jacobi_pallas",
                                   pytest.param("hestenes", marks=pytest.mark.slow),
                                   "hestenes_pallas"])  # quick: the kernels (same arithmetic)
def test_null_through_jacobi_route_equals_eigh_route(monkeypatch, route):
    """The spectral null (96, 8) with the route forced: same draws (same keys, same cores)
    as the CPU's tridiagonal route, every spectral statistic within the symmetric routes'
    bound (each is within EIGH_MAX_REL_ERROR of a float64 SVD, tests/test_wishart.py; a
    statistic is a ratio of at most two such errors)."""
    from rmtbase.baseline import null

    want = null.null_draws(jax.random.key(4), 96, 8, 16, stats="spectral")
    monkeypatch.setattr(null, "eig_method", lambda *a, **k: route)
    null._draw_fn.cache_clear()
    try:
        got = null.null_draws(jax.random.key(4), 96, 8, 16, stats="spectral")
    finally:
        null._draw_fn.cache_clear()
    assert set(got) == set(want)
    for name in want:
        rel = np.abs(got[name] / want[name] - 1).max()
        assert rel < 4 * EIGH_MAX_REL_ERROR, (name, rel)


def test_accelerator_switch_is_off_until_measured():
    """eig_method keeps cuSOLVER on accelerators while the switch is None; the switch logic."""
    assert eig_method(768, 64, jnp.float32, backend="gpu") == "eigvalsh"
    assert eig_method(768, 64, jnp.float32, backend="cpu") == "eigh"
    assert accelerator_route(64) == "eigvalsh"
    assert accelerator_route(64, ("jacobi_pallas", 64)) == "jacobi_pallas"
    assert accelerator_route(128, ("hestenes_pallas", 64)) == "eigvalsh"
    rates = {(768, 64): {"eigvalsh": 1.0, "jacobi_pallas": 2.0, "hestenes_pallas": 3.0},
             (4096, 128): {"eigvalsh": 1.0, "jacobi_pallas": 0.5, "hestenes_pallas": 0.9}}
    assert suggested_switch(rates) == ("hestenes_pallas", 64)  # same limit, faster at 64
    rates[(4096, 128)]["jacobi_pallas"] = 1.5
    assert suggested_switch(rates) == ("jacobi_pallas", 128)  # the larger limit
    rates[(8192, 64)] = {"eigvalsh": 1.0, "jacobi_pallas": None}  # failed: not faster
    assert suggested_switch(rates) is None
    assert padded_size(1) == 2 and padded_size(64) == 64 and padded_size(65) == 128


def _cores(d, d_h, n, seed=11):
    """n cores C = Bᵀ L_K of the spectral null at (d, d_h) (float32) and their λ = s(C)² by a
    float64 SVD."""
    from rmtbase.ensembles import named_key
    from rmtbase.ensembles.wishart import gram_bidiagonal, gram_cholesky
    from rmtbase.stats.spectral import bidiagonal_core

    parts = jax.vmap(lambda k: (*gram_bidiagonal(named_key(k, "wq"), d, d_h),
                                gram_cholesky(named_key(k, "wk"), d, d_h)))(
        jax.random.split(jax.random.key(seed), n))
    core = bidiagonal_core(*parts)
    return core, np.linalg.svd(np.asarray(core, np.float64), compute_uv=False) ** 2


@pytest.mark.parametrize("d,d_h", [pytest.param(768, 64, marks=pytest.mark.slow), (100, 90)])
def test_hestenes_has_an_svds_error_on_null_cores(d, d_h):
    """One-sided Jacobi on the null's own cores against a float64 SVD: relative error ≤
    4·d_h·eps whatever κ — at (100, 90), κ ≈ 6·10⁴, where eig_method refuses the Gram routes
    (measured: Hestenes 3.7·10⁻⁶ on one x86-64 CPU, 1.5·10⁻⁵ on another, as XLA compiles
    the sweeps for each; two-sided Jacobi on the Gram 1.8·10⁻³, float32 SVD 1.1·10⁻⁷)."""
    core, ref = _cores(d, d_h, 6)
    lam, sweeps = hestenes_eigvals(core, return_sweeps=True)
    err = np.abs(np.asarray(lam, np.float64) / ref - 1).max()
    assert err <= 4 * d_h * EPS32, err
    assert 1 <= int(sweeps) <= 12
    if d_h == 90:
        assert eig_method(d, d_h, jnp.float32, backend="cpu") == "svd"
        assert (ref[:, 0] / ref[:, -1]).max() > 1e4


def test_hestenes_kernel_and_converged_inputs():
    """The one-sided kernel in interpret mode (n = 12: padding to 16, 5 matrices in blocks of
    4) against a float64 SVD; a diagonal matrix stops after the one sweep that finds its rows
    orthogonal and returns its squared diagonal, sorted (exactly)."""
    core, ref = _cores(400, 12, 5, seed=3)
    lam = hestenes_eigvals_pallas(core, block=4, interpret=True)
    assert np.abs(np.asarray(lam, np.float64) / ref - 1).max() <= 12 * EPS32
    dia = np.diag(np.random.default_rng(2).standard_normal(7)).astype(np.float32)
    lam, sweeps = hestenes_eigvals(jnp.asarray(dia[None]), return_sweeps=True)
    assert int(sweeps) == 1
    # exact: no rotation touches orthogonal rows (r_p·r_q = 0 gives t = 0); λ = the squares
    assert np.array_equal(np.asarray(lam)[0], np.sort(np.diag(dia) ** 2)[::-1])
