"""The parallel cyclic Jacobi eigenvalue routes (issue 57): rmtbase.stats._jacobi (jnp) and
rmtbase.stats._jacobi_pallas (the Pallas kernel; Pallas' interpret mode on the CPU).

Every check is against an independent computation: numpy's float64 LAPACK eigvalsh, the
float64 SVD of the null's own cores, the closed form of a 2 × 2 eigenproblem, or fancy
indexing for the XOR permutations. The accuracy rule is the project's (EIGH_MAX_REL_ERROR,
a bound on d_h·eps·κ, as for the other symmetric routes in tests/test_wishart.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rmtbase.baseline.null import EIGH_MAX_REL_ERROR, eig_method
from rmtbase.stats._gpu_routes import accelerator_route, suggested_max_d_h
from rmtbase.stats._jacobi import jacobi_eigvalsh, padded_size
from rmtbase.stats._jacobi_pallas import jacobi_eigvalsh_pallas, xor_static, xor_traced

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


@pytest.mark.parametrize("n", [1, 2, 5, 16, 64])
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


@pytest.mark.parametrize("unroll", [False, True])
def test_pallas_kernel_lowers_to_triton(unroll):
    """Without a GPU: the kernel is lowered for CUDA (Pallas → Triton IR), which fails on any
    operation Pallas cannot lower to Triton. What Triton's own compiler then makes of it is
    measured only on a GPU (benchmarks/gpu.py, tests/test_device.py)."""
    n = 64 if not unroll else 16
    fn = jax.jit(lambda g: jacobi_eigvalsh_pallas(g, unroll=unroll, interpret=False, num_warps=4))
    text = fn.trace(jax.ShapeDtypeStruct((32, n, n), jnp.float32)).lower(
        lowering_platforms=("cuda",)).as_text()
    assert "xla.gpu.triton" in text


@pytest.mark.parametrize("route", ["jacobi", "jacobi_pallas"])
def test_null_through_jacobi_route_equals_eigh_route(monkeypatch, route):
    """The spectral null (192, 16) with the route forced: same draws (same keys, same cores)
    as the CPU's tridiagonal route, every spectral statistic within the symmetric routes'
    bound (each is within EIGH_MAX_REL_ERROR of a float64 SVD, tests/test_wishart.py; a
    statistic is a ratio of at most two such errors)."""
    from rmtbase.baseline import null

    want = null.null_draws(jax.random.key(4), 192, 16, 16, stats="spectral")
    monkeypatch.setattr(null, "eig_method", lambda *a, **k: route)
    null._draw_fn.cache_clear()
    try:
        got = null.null_draws(jax.random.key(4), 192, 16, 16, stats="spectral")
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
    assert accelerator_route(64, max_d_h=64) == "jacobi_pallas"
    assert accelerator_route(128, max_d_h=64) == "eigvalsh"
    rates = {(768, 64): {"eigvalsh": 1.0, "jacobi_pallas": 2.0},
             (4096, 128): {"eigvalsh": 1.0, "jacobi_pallas": 0.5}}
    assert suggested_max_d_h(rates) == 64
    rates[(8192, 64)] = {"eigvalsh": 1.0, "jacobi_pallas": None}  # failed: not faster
    assert suggested_max_d_h(rates) is None
    assert padded_size(1) == 2 and padded_size(64) == 64 and padded_size(65) == 128
