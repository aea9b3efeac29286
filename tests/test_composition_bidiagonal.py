"""The bidiagonal composition-null sampler (rmtbase.baseline.composition_bidiagonal): the law of
whole Gaussian factors, continued draws, and where scoring uses it (fixed keys throughout)."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from scipy.stats import ks_2samp

from rmtbase.baseline.composition_bidiagonal import null_squares_bidiagonal
from rmtbase.baseline.composition_null import Part, null_squares, null_squares_full
from rmtbase.stats import composition as C


@pytest.mark.parametrize("d,d_h1,d_h2", [(16, 2, 2), (40, 6, 5), (96, 8, 12), (64, 1, 1)])
def test_bidiagonal_sampler_has_the_law_of_whole_factors(d, d_h1, d_h2):
    """20,000 bidiagonal draws against 6,000 whole-factor draws (an independent computation:
    the four Gaussian factors themselves): two-sample KS p > 1e-3; mean within 4 se of the exact
    1/d; variance within 4 se of :func:`rmtbase.stats.composition.null_moments` (exact for
    d_h ≤ 2; se from the draws' fourth central moment)."""
    s = np.asarray(null_squares_bidiagonal(jax.random.key(3), d, d_h1, d_h2, 20000), np.float64)
    w = np.asarray(null_squares_full(jax.random.key(4), d, d_h1, d_h2, 6000), np.float64)
    assert ks_2samp(s, w).pvalue > 1e-3
    m, v = C.null_moments(d, d_h1, d_h2)
    c = s - s.mean()
    z_mean = (s.mean() - m) / np.sqrt(v / s.size)
    z_var = (np.mean(c**2) - v) / np.sqrt((np.mean(c**4) - np.mean(c**2) ** 2) / s.size)
    assert abs(z_mean) < 4 and abs(z_var) < 4, (z_mean, z_var)


@pytest.mark.slow
def test_bidiagonal_sampler_at_a_large_head_matches_the_reduced_one():
    """At d_h 128 (d = 300), 3,000 draws of each exact sampler: KS p > 1e-3, and both means
    within 4 se of 1/d."""
    s = np.asarray(null_squares_bidiagonal(jax.random.key(5), 300, 128, 128, 3000), np.float64)
    r = np.asarray(null_squares(jax.random.key(6), 300, 128, 128, 3000), np.float64)
    assert ks_2samp(s, r).pvalue > 1e-3
    m, v = C.null_moments(300, 128, 128)
    for x in (s, r):
        assert abs(x.mean() - m) < 4 * np.sqrt(v / x.size)


def test_bidiagonal_draws_continue():
    """Draws 5 … 29 are draws 5 … 29 of the 30-draw table (draw i from fold_in(key, i))."""
    key = jax.random.key(9)
    whole = np.asarray(null_squares_bidiagonal(key, 48, 6, 6, 30))
    part = np.asarray(null_squares_bidiagonal(key, 48, 6, 6, 30, part=Part(5)))
    # 25 and 30 draws are two compiled programs: float32 rounding of a d_h = 6 chain (k = 16)
    np.testing.assert_allclose(part, whole[5:], rtol=16 * np.finfo(np.float32).eps)
    with pytest.raises(ValueError, match="bidiagonal null needs"):
        null_squares_bidiagonal(key, 10, 6, 6, 4)


def test_scoring_uses_it_from_d_h_128_only(monkeypatch, tmp_path):
    """float32 draws at d_h ≥ 128 come from the bidiagonal sampler (cache format 2); below, and for
    16-bit storage, the draws and cache names are as they were (format 1)."""
    from rmtbase.baseline.composition_bidiagonal import composition_bidiagonal as bidiagonal
    from rmtbase.scoring.composition import cache as K
    from rmtbase.scoring.composition.pairs import score_draws

    key = jax.random.key(0)
    assert bidiagonal(640, 256, 256) and bidiagonal(300, 128, 128)
    assert not bidiagonal(576, 64, 64) and not bidiagonal(640, 256, 256, "bfloat16")
    got = score_draws(key, 300, 128, 128, 0, 8)
    # separate calls may compile apart: float32 rounding of a d_h = 128 chain (k = 64)
    tol = 64 * np.finfo(np.float32).eps
    np.testing.assert_allclose(got, np.sqrt(np.asarray(
        null_squares_bidiagonal(key, 300, 128, 128, 8), np.float64)), rtol=tol)
    small = score_draws(key, 64, 8, 8, 0, 8)
    np.testing.assert_allclose(small, np.sqrt(np.asarray(null_squares(key, 64, 8, 8, 8),
                                                         np.float64)), rtol=tol)
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path))
    assert K.null_path("composition", 640, 256, 10, 0, "float32").name.endswith("-v2.nc")
    assert K.null_path("composition", 576, 64, 10, 0, "float32").name.endswith("-v1.nc")
    assert K.null_path("composition", 640, 256, 10, 0, "bfloat16").name.endswith("-v1.nc")
    assert K.null_path("overlap-shared", 640, 256, 10, 0, "float32").name.endswith("-v2.nc")
    assert K.null_path("overlap-shared", 576, 64, 10, 0, "float32").name.endswith("-v1.nc")
    assert K.null_path("overlap-distinct", 640, 256, 10, 0, "float32").name.endswith("-v1.nc")


@pytest.mark.parametrize("d,d_h", [(16, 2), (40, 6), (96, 12)])
def test_shared_key_overlap_sampler_has_the_law_of_whole_factors(d, d_h):
    """20,000 GEMM-free shared-key overlap draws against 6,000 whole-factor draws: KS p > 1e-3;
    mean within 4 se of 0 (exact); where the variance is exact (d_h = 2), within 4 se of
    :func:`rmtbase.analytic.composition_moments.overlap_moments` (se from the fourth moment)."""
    from rmtbase.analytic.composition_moments import overlap_moments
    from rmtbase.baseline.composition_bidiagonal import null_overlap_shared_bidiagonal
    from rmtbase.baseline.composition_null import null_overlap_full

    c = np.asarray(null_overlap_shared_bidiagonal(jax.random.key(3), d, d_h, 20000), np.float64)
    w = np.asarray(null_overlap_full(jax.random.key(4), d, d_h, 6000, True), np.float64)
    assert ks_2samp(c, w).pvalue > 1e-3
    m, v, exact = overlap_moments(d, d_h, True)
    assert abs(c.mean() - m) < 4 * np.sqrt(v / c.size)
    z_var = (np.mean(c**2) - v) / np.sqrt((np.mean(c**4) - np.mean(c**2) ** 2) / c.size)
    assert abs(z_var) < 4 or not exact, z_var
    with pytest.raises(ValueError, match="bidiagonal overlap null needs"):
        null_overlap_shared_bidiagonal(jax.random.key(0), 10, 6, 4)
