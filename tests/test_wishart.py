"""Fast spectral paths: same law as the direct factor path (two-sample KS), Gram moments,
accuracy of the symmetric eigen route."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import ks_2samp

from rmtbase.baseline.eig_route import EIGH_MAX_REL_ERROR, eig_method
from rmtbase.ensembles import lowrank_factors, named_key
from rmtbase.ensembles.wishart import gram_bidiagonal, gram_cholesky
from rmtbase.stats.spectral import (
    eigvals_from_bidiagonal,
    eigvals_from_cholesky,
    eigvals_from_factors,
    spectral_stats,
)

N_KS = 1500
ALPHA = 1e-3  # per-test level; 9 statistics × 3 shapes = 27 tests: family-wise ≤ 2.7 %, fixed keys


def _fast(key, d, d_h, n):
    def one(k):
        lq = gram_cholesky(named_key(k, "wq"), d, d_h, 1.0, jnp.float64)
        lk = gram_cholesky(named_key(k, "wk"), d, d_h, 1.0, jnp.float64)
        st = spectral_stats(eigvals_from_cholesky(lq, lk))
        st["rms"] = jnp.sqrt(jnp.sum(lq * lq) / (d * d_h))
        return st
    return jax.jit(jax.vmap(one))(jax.random.split(key, n))


def _bidiagonal(key, d, d_h, n, method):
    def one(k):
        b, sub = gram_bidiagonal(named_key(k, "wq"), d, d_h, 1.0, jnp.float64)
        lk = gram_cholesky(named_key(k, "wk"), d, d_h, 1.0, jnp.float64)
        st = spectral_stats(eigvals_from_bidiagonal(b, sub, lk, method))
        st["rms"] = jnp.sqrt((jnp.sum(b * b) + jnp.sum(sub * sub)) / (d * d_h))
        return st
    return jax.jit(jax.vmap(one))(jax.random.split(key, n))


def _direct(key, d, d_h, n):
    def one(k):
        wq, wk = lowrank_factors(k, d, d_h, dtype=jnp.float64)
        st = spectral_stats(eigvals_from_factors(wq, wk))
        st["rms"] = jnp.sqrt(jnp.mean(wq * wq))
        return st
    return jax.jit(jax.vmap(one))(jax.random.split(key, n))


@pytest.mark.parametrize("d,d_h", [(24, 4), (48, 16), (96, 8)])
def test_bartlett_spectral_stats_same_law_as_factor_path(d, d_h):
    fast = _fast(jax.random.key(100 + d), d, d_h, N_KS)
    direct = _direct(jax.random.key(200 + d), d, d_h, N_KS)
    for name in fast:
        p = ks_2samp(np.asarray(fast[name]), np.asarray(direct[name])).pvalue
        assert p > ALPHA, (name, d, d_h, p)


@pytest.mark.parametrize("method", ["svd", "eigh", "eigvalsh"])
@pytest.mark.parametrize("d,d_h", [(24, 4), (48, 16), (96, 8)])
def test_bidiagonal_spectral_stats_same_law_as_factor_path(d, d_h, method):
    """The null's fast path (W_Q bidiagonal, W_K Bartlett) against full factors, both eigen
    routes; 9 statistics × 3 shapes × 3 routes = 81 KS tests at α = 1e-3, fixed keys."""
    fast = _bidiagonal(jax.random.key(300 + d), d, d_h, N_KS, method)
    direct = _direct(jax.random.key(200 + d), d, d_h, N_KS)
    for name in fast:
        p = ks_2samp(np.asarray(fast[name]), np.asarray(direct[name])).pvalue
        assert p > ALPHA, (name, d, d_h, method, p)


def test_bidiagonal_catches_wrong_degrees_of_freedom():
    """The KS comparison has power: swapping the sub-diagonal's χ_{d_h−i} for χ_{d_h−i+1}
    (a plausible off-by-one) is rejected."""
    d, d_h = 48, 16
    direct = _direct(jax.random.key(201), d, d_h, N_KS)

    def wrong(k):
        b, sub = gram_bidiagonal(named_key(k, "wq"), d, d_h, 1.0, jnp.float64)
        sub = jnp.sqrt(sub * sub + jax.random.normal(named_key(k, "x"), sub.shape) ** 2)
        lk = gram_cholesky(named_key(k, "wk"), d, d_h, 1.0, jnp.float64)
        return spectral_stats(eigvals_from_bidiagonal(b, sub, lk))["sum_lambda2"]
    bad = jax.jit(jax.vmap(wrong))(jax.random.split(jax.random.key(5), N_KS))
    assert ks_2samp(np.asarray(bad), np.asarray(direct["sum_lambda2"])).pvalue < 1e-6


def test_bidiagonal_gram_moments():
    """B Bᵀ carries G = W Wᵀ's spectrum: E tr BBᵀ = d_h d σ², E tr (BBᵀ)² = d_h d (d_h+d+1) σ⁴
    (Wishart moments), |z| < 5 with SE from the draws; structure and dtype."""
    d, d_h, sigma, n = 30, 5, 1.3, 20_000
    diag, sub = jax.vmap(lambda k: gram_bidiagonal(k, d, d_h, sigma, jnp.float64))(
        jax.random.split(jax.random.key(9), n))
    assert diag.shape == (n, d_h) and sub.shape == (n, d_h - 1)
    assert np.all(np.asarray(diag) > 0) and np.all(np.asarray(sub) > 0)
    b = np.zeros((n, d_h, d_h))
    b[:, np.arange(d_h), np.arange(d_h)] = diag
    b[:, np.arange(1, d_h), np.arange(d_h - 1)] = sub
    g = b @ np.swapaxes(b, 1, 2)
    tr1 = np.trace(g, axis1=1, axis2=2)
    tr2 = np.einsum("nij,nji->n", g, g)
    for x, exact in ((tr1, d_h * d * sigma**2), (tr2, d_h * d * (d_h + d + 1) * sigma**4)):
        assert abs(x.mean() - exact) / (x.std(ddof=1) / np.sqrt(n)) < 5
    assert gram_bidiagonal(jax.random.key(0), 10, 3)[0].dtype == jnp.float32


@pytest.mark.slow
def test_eigh_route_accuracy_float32():
    """In float32 the symmetric routes' λ (tridiagonal + bisection, and eigvalsh) agree with a
    float64 SVD of the same core within the bound n·eps·κ that :func:`eig_method` budgets
    (≤ EIGH_MAX_REL_ERROR where chosen), and the SVD route stays within eps-level error."""
    d, d_h, n = 768, 64, 64
    assert eig_method(d, d_h, jnp.float32, backend="cpu") == "eigh"
    keys = jax.random.split(jax.random.key(11), n)
    parts = jax.vmap(lambda k: (*gram_bidiagonal(named_key(k, "wq"), d, d_h),
                                gram_cholesky(named_key(k, "wk"), d, d_h)))(keys)
    with jax.enable_x64(True):
        ref = np.asarray(eigvals_from_bidiagonal(*(p.astype(jnp.float64) for p in parts), "svd"))
    for method, tol in (("eigh", EIGH_MAX_REL_ERROR), ("eigvalsh", EIGH_MAX_REL_ERROR),
                        ("svd", 1e-5)):
        lam = np.asarray(eigvals_from_bidiagonal(*parts, method), dtype=np.float64)
        assert np.all(np.diff(lam, axis=-1) <= 0)  # descending
        assert np.abs(lam / ref - 1).max() < tol, method


def test_eig_method_choice():
    assert eig_method(768, 64, jnp.float32, backend="cpu") == "eigh"
    assert eig_method(4096, 128, jnp.float32, backend="cpu") == "eigh"
    assert eig_method(768, 64, jnp.float32, backend="gpu") == "eigvalsh"
    assert eig_method(100, 90, jnp.float32, backend="gpu") == "svd"  # κ ≈ 4e4: no symmetric route
    assert eig_method(100, 90, jnp.float32, backend="cpu") == "svd"  # κ ≈ 4e4
    assert eig_method(100, 90, jnp.float64, backend="cpu") == "eigh"
    assert eig_method(64, 64, jnp.float64, backend="cpu") == "svd"  # lower edge 0
    from rmtbase.errors import InputError

    with pytest.raises(InputError, match="method"):
        eigvals_from_bidiagonal(jnp.ones(2), jnp.ones(1), jnp.eye(2), "qr")


def test_gram_moments_and_structure():
    """E[L Lᵀ] = d σ² I; Var(G_ii) = 2 d σ⁴; |z| < 5 with SE from the draws."""
    d, d_h, sigma, n = 30, 5, 1.7, 4000
    ls = jax.vmap(lambda k: gram_cholesky(k, d, d_h, sigma, jnp.float64))(
        jax.random.split(jax.random.key(3), n))
    ls = np.asarray(ls)
    assert np.all(np.triu(ls, 1) == 0) and np.all(np.diagonal(ls, axis1=1, axis2=2) > 0)
    g = ls @ np.swapaxes(ls, 1, 2)
    mean = g.mean(0)
    se = g.std(0, ddof=1) / np.sqrt(n)
    z = (mean - d * sigma**2 * np.eye(d_h)) / se
    assert np.abs(z).max() < 5
    var_diag = g[:, np.arange(d_h), np.arange(d_h)].var(0, ddof=1)
    # sampling sd of a variance estimate ≈ var·sqrt((κ-1)/n); κ of χ²_d/d ≈ 3 + 12/d
    np.testing.assert_allclose(var_diag, 2 * d * sigma**4, rtol=5 * np.sqrt((2 + 12 / d) / n))


def test_gram_cholesky_dtype_and_errors():
    l32 = gram_cholesky(jax.random.key(0), 10, 3)
    assert l32.dtype == jnp.float32 and l32.shape == (3, 3)
    from rmtbase.errors import InputError

    with pytest.raises(InputError):
        gram_cholesky(jax.random.key(0), 3, 10)
