"""Bartlett fast path: same law as the direct factor path (two-sample KS), Gram moments."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import ks_2samp

from rmtbase.ensembles import lowrank_factors, named_key
from rmtbase.stats.spectral import eigvals_from_cholesky, eigvals_from_factors, spectral_stats
from rmtbase.wishart import gram_cholesky

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
