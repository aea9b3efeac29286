"""Spectral statistics from factors against the direct SVD of the d×d product (float64)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rmtbase.stats import spectral
from rmtbase.stats.spectral import (
    SPECTRAL_STATS,
    eigvals_from_cholesky,
    eigvals_from_factors,
    spectral_stats,
)


def _direct(wq, wk):
    """Reference: squared singular values of the full d×d W_QK (numpy LAPACK, float64)."""
    s = np.linalg.svd(np.asarray(wq, np.float64).T @ np.asarray(wk, np.float64), compute_uv=False)
    return s[: wq.shape[0]] ** 2


@pytest.mark.parametrize("d,d_h", [(7, 3), (24, 8), (40, 40), (33, 1)])
def test_factor_path_equals_direct_svd(d, d_h):
    rng = np.random.default_rng(d * 100 + d_h)
    wq = rng.normal(size=(5, d_h, d)) * 0.7
    wk = rng.normal(size=(5, d_h, d)) * 1.3
    lam = np.asarray(eigvals_from_factors(jnp.asarray(wq), jnp.asarray(wk)))
    assert lam.shape == (5, d_h)
    for b in range(5):
        ref = _direct(wq[b], wk[b])
        # float64: agreement to ~1e-12 relative to the largest eigenvalue (SVD backward error)
        np.testing.assert_allclose(lam[b], ref, rtol=0, atol=1e-11 * ref[0])
        assert np.all(np.diff(lam[b]) <= 0)  # descending


def test_cholesky_path_transpose_convention():
    """λ = s²(lqᵀ lk) with G = l lᵀ = w wᵀ equals the spectrum of wqᵀ wk (not of lq lkᵀ)."""
    rng = np.random.default_rng(1)
    wq, wk = rng.normal(size=(2, 6, 15))
    lq = np.linalg.cholesky(wq @ wq.T)
    lk = np.linalg.cholesky(wk @ wk.T)
    lam = np.asarray(eigvals_from_cholesky(jnp.asarray(lq), jnp.asarray(lk)))
    np.testing.assert_allclose(lam, _direct(wq, wk), rtol=1e-10)
    wrong = np.linalg.svd(lq @ lk.T, compute_uv=False) ** 2
    assert not np.allclose(wrong, _direct(wq, wk), rtol=1e-3)


def test_rank_deficient_factor_gives_zeros():
    rng = np.random.default_rng(2)
    wq = rng.normal(size=(4, 12))
    wq[3] = wq[0] + wq[1]  # rank 3
    wk = rng.normal(size=(4, 12))
    lam = np.asarray(eigvals_from_factors(jnp.asarray(wq), jnp.asarray(wk)))
    np.testing.assert_allclose(lam[:3], _direct(wq, wk)[:3], rtol=1e-10)
    assert abs(lam[3]) < 1e-20 * lam[0] + 1e-12


def test_spectral_stats_against_numpy_definitions():
    rng = np.random.default_rng(3)
    lam = rng.gamma(2.0, size=(3, 9)) * 10
    st = spectral_stats(jnp.asarray(lam))
    assert set(st) == set(SPECTRAL_STATS)
    for b in range(3):
        x = lam[b]
        p = x / x.sum()
        ref = {"lambda_max": x.max(), "lambda_min": x.min(), "sum_lambda": x.sum(),
               "sum_lambda2": (x**2).sum(), "pr": x.sum() ** 2 / (x**2).sum(),
               "npr": x.sum() ** 2 / (x**2).sum() / 9, "spectral_entropy": -(p * np.log(p)).sum(),
               "condition_number": x.max() / x.min(), "stable_rank": x.sum() / x.max()}
        for k, v in ref.items():
            np.testing.assert_allclose(float(st[k][b]), v, rtol=1e-13, err_msg=k)


def test_spectral_stats_flat_and_degenerate():
    st = spectral_stats(jnp.ones(5))
    assert float(st["npr"]) == pytest.approx(1.0)
    assert float(st["spectral_entropy"]) == pytest.approx(np.log(5))
    st = spectral_stats(jnp.array([2.0, 0.0]))
    assert float(st["spectral_entropy"]) == 0.0
    assert np.isinf(float(st["condition_number"]))


def test_float32_factor_path_close_to_float64():
    wq, wk = jax.random.normal(jax.random.key(4), (2, 16, 96), jnp.float32)
    lam32 = np.asarray(eigvals_from_factors(wq, wk))
    ref = _direct(np.asarray(wq), np.asarray(wk))
    np.testing.assert_allclose(lam32, ref, rtol=0, atol=2e-5 * ref[0])
    assert spectral.core_from_factors(wq, wk).shape == (16, 16)
